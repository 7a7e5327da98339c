"""hvd's exceptions, importable as in horovod.common.exceptions.

HorovodInternalError is the native layer's exception class itself (a
RuntimeError subclass), so ``except HorovodInternalError`` catches what
every collective raises when it fails: a mismatch between ranks, a lost
peer, a deadline that passed.
"""
from hvd._C import HorovodInternalError

__all__ = ["HorovodInternalError"]
