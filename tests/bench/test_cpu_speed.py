"""bench/cpu_speed.c (the core's speed, which bench/compare-openmpi
measures before every job) builds the way the script builds it and prints
one positive number; compare_table.cpu_line summarises such numbers, and
says nothing when the run has none.  No timing is asserted."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from compare_table import cpu_line  # noqa: E402


def test_builds_and_prints_ns_per_iteration(tmp_path):
    exe = str(tmp_path / "cpu_speed")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "cpu_speed.c")],
                   check=True)
    out = subprocess.run([exe], capture_output=True, text=True, check=True, timeout=60).stdout
    lines = out.split()
    assert len(lines) == 1, out
    assert float(lines[0]) > 0


def test_summary(tmp_path):
    (tmp_path / "cpu.csv").write_text("1.20\n2.40\n1.10\n1.30\n\n")
    assert cpu_line(str(tmp_path)) == (
        "The core's speed before each of the 4 jobs (`bench/cpu_speed.c`, a fixed loop): "
        "1.10-2.40 ns per iteration, median 1.30; the slowest 2.18x the fastest.")


def test_no_file_no_line(tmp_path):
    assert cpu_line(str(tmp_path)) is None
    (tmp_path / "cpu.csv").write_text("")
    assert cpu_line(str(tmp_path)) is None
