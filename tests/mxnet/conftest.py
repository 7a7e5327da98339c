"""Shared set-up for hvd.mxnet's tests (the MXNet venv, scripts/venv-mxnet.sh).

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as tests/python does for hvd.torch: every rank
collects the same tests in the same order and makes the same collective
calls.  Rank r's input is a deterministic function of (r, seed)
(tests/rank_data.py), so each test computes its reference with NumPy from
every rank's input; tests/conftest.py starts and ends hvd.
"""
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

# MXNet 1.9's modules use distutils' LooseVersion and NumPy's old aliases
# as they load: warnings about MXNet, not about hvd.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import hvd.mxnet as hvd  # noqa: E402


@pytest.fixture(scope="session")
def hvd_binding():
    return hvd

