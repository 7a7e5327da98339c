"""Shared set-up for hvd.jax's tests (the project's venv, with JAX).

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as tests/python does for hvd.torch: every
rank collects the same tests in the same order and makes the same
collective calls.  Rank r's input is a deterministic function of (r,
seed) (tests/rank_data.py), so each test computes its reference with
NumPy from every rank's input; tests/conftest.py starts and ends hvd.
JAX compiles slowly on the CI's two cores: tests jit few functions, each
once, over small arrays.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402

import hvd.jax as hvd  # noqa: E402

# int64 and float64 arrays stay 64-bit, so every dtype hvd takes is tested.
jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session")
def hvd_binding():
    return hvd
