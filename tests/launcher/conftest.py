"""Shared fixtures for hvdrun's end-to-end tests.

HVD_BUILD_DIR names the CMake build directory (ctest sets it); hvdrun is
$HVD_BUILD_DIR/hvdrun and the multi-rank test programs are
$HVD_BUILD_DIR/tests/NAME.
"""
import glob
import os

import pytest


@pytest.fixture(scope="session")
def build_dir():
    path = os.environ.get("HVD_BUILD_DIR",
                          os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def python_extension(build_dir):
    """Skips the tests that run hvd from Python where it cannot run: a
    sanitizer build (its libraries cannot load into python) or a build
    without hvd's Python extension."""
    if os.environ.get("HVD_SANITIZE"):
        pytest.skip("sanitizer builds cannot load into python")
    if not glob.glob(os.path.join(build_dir, "python", "hvd", "_C*.so")):
        pytest.skip("hvd's Python extension is not built in %s" % build_dir)


@pytest.fixture(scope="session")
def hvdrun(build_dir):
    path = os.path.join(build_dir, "hvdrun")
    if not os.access(path, os.X_OK):
        pytest.fail("no hvdrun at %s: build it, or set HVD_BUILD_DIR" % path)
    return path


@pytest.fixture(scope="session")
def build_tool(build_dir):
    """build_tool(NAME) -> path of the built program NAME (hvd-bench,
    hvd-report, ...), or a failure saying it is missing."""
    def find(name):
        path = os.path.join(build_dir, name)
        if not os.access(path, os.X_OK):
            pytest.fail("no %s at %s" % (name, path))
        return path
    return find


@pytest.fixture(scope="session")
def test_program(build_dir):
    """test_program(NAME) -> path of tests/NAME, or a skip saying it is not built."""
    def find(name):
        path = os.path.join(build_dir, "tests", name)
        if not os.access(path, os.X_OK):
            pytest.skip("%s is not built (looked for %s)" % (name, path))
        return path
    return find


@pytest.fixture(scope="session")
def fake_ssh():
    """tests/launcher/fake_ssh: hvdrun's --ssh-command for "other hosts" that
    are this machine's loopback addresses 127.0.0.2, 127.0.0.3 (hvdrun does
    not count them as this machine: no interface holds them)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_ssh")
