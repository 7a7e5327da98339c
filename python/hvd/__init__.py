"""hvd: distributed data-parallel training, Horovod's API over libhvd.

Frameworks live in subpackages: ``import hvd.torch as hvd``.
"""
from hvd._C import HorovodInternalError  # noqa: F401

__version__ = "0.1.0"
