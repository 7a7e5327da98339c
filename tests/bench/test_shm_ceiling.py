"""bench/shm-ceiling (hvd's shm allreduce against the memcpy ceiling,
without OpenMPI) at np 2: it runs, measures hvd-bench at 16 and 64 MiB
and the copy loops, and prints a row per size whose ceiling is what
compare_table.ceiling gives for the copy rate in that row, and whose
ratio is hvd's busbw over it.  No timing is asserted."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from compare_table import ceiling  # noqa: E402

ROW = re.compile(r"\| 2 \| (16|64) MiB \| (\d+\.\d+) \| (\d+\.\d+) \| (\d+\.\d+) \| (\d+\.\d+) \|")


def test_table_at_np2(tmp_path):
    env = dict(os.environ, NPS="2", OUT=str(tmp_path))
    p = subprocess.run([os.path.join(ROOT, "bench", "shm-ceiling"), BUILD], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "CPUs; load average before" in p.stdout
    rows = [ROW.fullmatch(l) for l in p.stdout.splitlines()]
    rows = [m for m in rows if m]
    assert [m.group(1) for m in rows] == ["16", "64"], p.stdout
    for m in rows:
        busbw, copy, ceil, ratio = (float(m.group(k)) for k in (2, 3, 4, 5))
        assert busbw > 0 and copy > 0
        assert abs(ceil - ceiling(copy, 2)) <= 0.01 + 0.01 * ceil  # rounded to 1 and 2 places
        assert abs(ratio - busbw / ceil) <= 0.01
