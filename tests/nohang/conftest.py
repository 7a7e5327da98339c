"""tests/nohang: no hang, ever (docs/reliability.md "No hang"), end to end
through hvdrun, its own ctest (`nohang`) beside `launcher`, whose fixtures
it shares: hvdrun, test_program, build_dir, python_extension."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "hvd_launcher_conftest",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher", "conftest.py"))
_launcher = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_launcher)

build_dir = _launcher.build_dir
hvdrun = _launcher.hvdrun
test_program = _launcher.test_program
python_extension = _launcher.python_extension
