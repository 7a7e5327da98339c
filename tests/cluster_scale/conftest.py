"""The emulated cluster (tests/cluster/hvdcluster.py) with 16 hosts, up
once for this directory's session: more hosts than hvdrun starts itself
(--launch-fanout 8), so that its agents start the rest."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from hvdcluster import build_dir, cluster_session  # noqa: E402,F401  (fixture, registered by import)

HOSTS = 16


@pytest.fixture(scope="session")
def cluster():
    yield from cluster_session(HOSTS)
