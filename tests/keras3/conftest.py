"""Shared set-up for hvd.keras on Keras 3's three backends (ctest
python.keras3.{tensorflow,jax,torch}.np{1,2,4}: the same tests, KERAS_BACKEND
set per test; the venv's pytest in every rank under hvdrun, as
tests/tensorflow and tests/jax).  Each framework gets one thread per rank
(the CI has two cores); tests/conftest.py starts and ends hvd, and
tests/end_job.py ends the job when a rank fails a test.  Nothing here
imports a framework by name: hvd.keras imports the backend's binding."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import keras  # noqa: E402
import pytest  # noqa: E402

import hvd.keras as hvd  # noqa: E402

import end_job  # noqa: E402  (tests/end_job.py)

if keras.backend.backend() == "torch":
    import torch
    torch.set_num_threads(1)
elif keras.backend.backend() == "tensorflow":
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)


@pytest.fixture(scope="session")
def hvd_binding():
    return hvd


pytest_runtest_makereport = end_job.on_failure(lambda: hvd)
