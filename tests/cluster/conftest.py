"""Offers the session-scoped `cluster`, `slurm` and `build_dir` fixtures
(see hvdcluster.py) to the tests in this directory."""

from hvdcluster import build_dir, cluster, slurm  # noqa: F401  (fixtures, registered by import)
