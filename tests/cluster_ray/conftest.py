"""The emulated cluster (tests/cluster/hvdcluster.py) made a Ray cluster
once for this directory: `cluster.sh ray up` (head on h0, a node on every
host), `ray down` at the end.  Fails, saying why, where it cannot."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from hvdcluster import build_dir, cluster  # noqa: E402,F401  (fixtures, registered by import)


@pytest.fixture(scope="session")
def ray_cluster(cluster, build_dir):
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"))
    yield from cluster.service("ray", "--cpus", "2", "--python", sys.executable, env=env, timeout=300,
                               clean_first=True)
