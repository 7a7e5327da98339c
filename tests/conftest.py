"""The fixtures every Python suite shares (tests/python: hvd.torch,
tests/jax: hvd.jax, tests/tensorflow: hvd.tensorflow and hvd.keras).

A suite's own conftest.py sets its framework up (threads, environment) and
overrides `hvd_binding` with the binding it tests; `hvd_session` then
starts that binding once before the suite's first test and shuts it down
after its last.  Suites that test no binding (tests/launcher, tests/cluster,
...) keep the default None and get nothing started.

Each rank's input comes from rank_data.py beside this file (importable from
every suite: pytest puts this directory on sys.path when it loads this
conftest.py).
"""
import pytest


@pytest.fixture(scope="session")
def hvd_binding():
    """The hvd module a suite tests; None where a suite tests none."""
    return None


@pytest.fixture(scope="session", autouse=True)
def hvd_session(hvd_binding):
    """hvd_binding.init() for the whole session, shutdown() at its end."""
    if hvd_binding is None:
        yield None
        return
    hvd_binding.init()
    yield hvd_binding
    hvd_binding.shutdown()
