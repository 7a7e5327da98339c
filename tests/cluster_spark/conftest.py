"""The emulated cluster (tests/cluster/hvdcluster.py) made a Spark
standalone cluster once for this directory: `cluster.sh spark up` (master
on h0, a worker on every host), `spark down` at the end.  Fails, saying
why, where it cannot."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from hvdcluster import build_dir, cluster  # noqa: E402,F401  (fixtures, registered by import)


@pytest.fixture(scope="session")
def spark_cluster(cluster, build_dir):
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"))
    cluster.cmd("spark", "down")  # whatever a crashed run left behind
    r = subprocess.run([cluster.script, "spark", "up", "--cores", "2", "--python", sys.executable],
                       env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail("cluster.sh spark up failed (exit %d):\n%s%s"
                    % (r.returncode, r.stdout, r.stderr), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.cmd("spark", "down")
