"""hvd's exceptions, importable as in horovod.common.exceptions.

HorovodInternalError is the native layer's exception class itself (a
RuntimeError subclass), so ``except HorovodInternalError`` catches what
every collective raises when it fails: a mismatch between ranks, a lost
peer, a deadline that passed.
"""
from hvd._C import HorovodInternalError

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt"]


class HostsUpdatedInterrupt(RuntimeError):
    """Elastic training: hvdrun added or removed hosts.  Raised by
    State.commit() / check_host_updates() on every rank at the same commit;
    hvd.elastic.run re-forms the job and goes on.  skip_sync: only hosts
    were removed, so no new worker needs the state."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts were %s" % ("removed" if skip_sync else "added"))
        self.skip_sync = skip_sync
