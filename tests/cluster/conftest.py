"""Offers the session-scoped `cluster` fixture (see hvdcluster.py) to the
tests in this directory."""

from hvdcluster import cluster  # noqa: F401  (a fixture, registered by import)
