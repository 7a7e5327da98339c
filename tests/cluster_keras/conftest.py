"""The emulated cluster (tests/cluster/hvdcluster.py), brought up once for
this directory's tests, which run hvd.keras workers from the venv."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from hvdcluster import build_dir, cluster  # noqa: E402,F401  (fixtures, registered by import)
