"""Joining and leaving the job, and process-set arithmetic, shared by the
framework bindings (hvd.tensorflow, hvd.jax; hvd.torch keeps its own copy
for now).

init() and shutdown() are horovod.common's (HorovodBasics): init joins the
job its launcher started (hvdrun, mpirun, srun; alone without one) and
registers process sets; shutdown runs at exit.  A binding passes hooks to
run after init and before shutdown (its own per-job state).  The set_*
helpers turn a ProcessSet into what the native layer takes, with
Horovod's errors.
"""
import atexit

from hvd import _C
from hvd.common import process_sets as _process_sets

__all__ = ["init", "shutdown", "on_init", "on_shutdown", "set_id", "set_size", "set_rank",
           "set_rank_of"]

_atexit_registered = False
_after_init = []
_before_shutdown = []


def on_init(fn):
    """Runs fn() after every init() (a binding's per-job state)."""
    _after_init.append(fn)


def on_shutdown(fn):
    """Runs fn() at every shutdown()."""
    _before_shutdown.append(fn)


def init(comm=None, process_sets=None):
    """Joins the job its launcher started: hvdrun, mpirun, srun (a job of one
    process without any).  comm: None (the whole job), an mpi4py
    communicator, or a list of the job's ranks that form a job of their
    own.  process_sets: ProcessSet objects to register now, or
    "dynamic"/None.  Calling init() again is harmless."""
    global _atexit_registered
    if comm is None:
        _C.init()
    elif isinstance(comm, (list, tuple, range)):
        _C.init_ranks([int(r) for r in comm])
    elif hasattr(comm, "py2f"):
        _C.init_comm(comm.py2f())
    else:
        raise ValueError("init(comm=...) takes an mpi4py communicator or a list of ranks, "
                         "not %r" % type(comm).__name__)
    if not _atexit_registered:
        atexit.register(shutdown)
        _atexit_registered = True
    _process_sets._setup(process_sets)
    for fn in _after_init:
        fn()


def shutdown():
    """Leaves the job; init() may be called again afterwards."""
    for fn in _before_shutdown:
        fn()
    _C.shutdown()
    _process_sets._teardown()


# The process-set helpers live with the sets (process_sets.py); the
# bindings reach them under these names.
set_id = _process_sets.checked_id
set_rank_of = _process_sets.rank_in_set


def set_size(process_set):
    return _C.size() if set_id(process_set) == 0 else process_set.size()


def set_rank(process_set):
    return _C.rank() if set_id(process_set) == 0 else process_set.rank()
