"""A failed test on one rank of a job of several ends the job with that
rank's error: its other ranks would otherwise wait in a collective it
never makes.  A suite's conftest.py takes the hook:

    pytest_runtest_makereport = end_job.on_failure(lambda: hvd)

It prints the failure and exits; hvdrun then stops the rest, so the job
ends with that rank's error, not a timeout."""
import os
import sys

import pytest


def on_failure(binding):
    """The pytest_runtest_makereport hook for the hvd module binding() gives."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        hvd = binding()
        if report.failed and hvd.is_initialized() and hvd.size() > 1:
            sys.stderr.write("rank %d failed %s (%s); ending the job:\n%s\n"
                             % (hvd.rank(), item.nodeid, report.when, report.longreprtext))
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(1)
    return pytest_runtest_makereport
