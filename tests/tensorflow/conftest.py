"""Shared set-up for hvd.tensorflow's tests (Debian's pytest is not in the
venv: the venv's own pytest runs them).

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as tests/python does for hvd.torch.  Every
rank collects the same tests and makes the same collective calls; rank r's
input is a deterministic function of (r, seed) (tests/rank_data.py), so
each rank computes the reference of a collective locally with numpy;
tests/conftest.py starts and ends hvd.  tf_modes.py runs an op eagerly,
in tf.function or in a TensorFlow 1 graph.

A rank that fails a test ends the job (tests/end_job.py): its other ranks
would otherwise wait in a collective it never makes.

TensorFlow gets ONE inter-op thread for the whole session: hvd's
collectives are asynchronous kernels, so no op waiting for other ranks
holds that thread (test_more_collectives_than_threads leans on it).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("HOROVOD_DYNAMIC_PROCESS_SETS", "1")
# XLA kernels for the ops (test_tf_xla.py); read when the op library loads.
os.environ.setdefault("HOROVOD_ENABLE_XLA_OPS", "1")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)

import hvd.tensorflow as hvd  # noqa: E402

import end_job  # noqa: E402  (tests/end_job.py)


@pytest.fixture(scope="session")
def hvd_binding():
    return hvd


# A failed test (or its set-up) on one rank of a job of several ends the
# job with that rank's error.
pytest_runtest_makereport = end_job.on_failure(lambda: hvd)
