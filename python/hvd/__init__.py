"""hvd: distributed data-parallel training, Horovod's API over libhvd.

Frameworks live in subpackages: ``import hvd.torch as hvd``.
``hvd.run(fn, np=4)`` runs a Python function on every rank of a job
(hvd.runner); hvd.spark and hvd.ray run it on Spark's and Ray's workers.
"""
from hvd._C import HorovodInternalError  # noqa: F401
from hvd.runner import run  # noqa: F401

__version__ = "0.1.0"
