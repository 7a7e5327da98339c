"""Joining and leaving the job, the job's shape, the timeline, and
process-set arithmetic, shared by the framework bindings (hvd.torch,
hvd.tensorflow, hvd.jax, hvd.mxnet).

init() and shutdown() are horovod.common's (HorovodBasics): init joins the
job its launcher started (hvdrun, mpirun, srun; alone without one) and
registers process sets; shutdown runs at exit.  A binding passes hooks to
run after init and before or after shutdown (its own per-job state).  The set_*
helpers turn a ProcessSet into what the native layer takes, with
Horovod's errors.
"""
import atexit
import ctypes
import os

from hvd import _C
from hvd.common import process_sets as _process_sets

__all__ = ["init", "shutdown", "on_init", "on_shutdown", "after_shutdown", "set_id",
           "set_size", "set_rank", "set_rank_of", "is_homogeneous", "start_timeline",
           "stop_timeline", "capi_address"]

_atexit_registered = False
_after_init = []
_before_shutdown = []
_after_shutdown = []


def on_init(fn):
    """Runs fn() after every init() (a binding's per-job state)."""
    _after_init.append(fn)


def on_shutdown(fn):
    """Runs fn() at every shutdown(), before the job is left."""
    _before_shutdown.append(fn)


def after_shutdown(fn):
    """Runs fn() at every shutdown(), once the job is left (what the
    shutdown failed is complete by then)."""
    _after_shutdown.append(fn)


def init(comm=None, process_sets=None):
    """Joins the job its launcher started: hvdrun, mpirun, srun (a job of one
    process without any).

    comm: None (the whole job); an mpi4py communicator (the job of its ranks;
    needs a build with MPI; every rank of it calls init); or a list of ranks
    of the job, which become ranks 0, 1, ... of a job of their own (under
    MPI, a sub-communicator of MPI_COMM_WORLD that only they need to call;
    otherwise every rank of the job calls init with the same list, and a
    rank it leaves out gets ValueError).
    process_sets: ProcessSet objects to register now (every rank passes the
    same list), or "dynamic"/None.  Calling init() again is harmless.
    shutdown() runs at exit, as in Horovod."""
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
    for fn in _after_shutdown:
        fn()
    _process_sets._teardown()


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return _C.size() == _C.local_size() * _C.cross_size()


def start_timeline(file_path, mark_cycles=False):
    """Starts recording hvd's timeline to file_path (see HOROVOD_TIMELINE)."""
    _C.start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    _C.stop_timeline()


def capi_address():
    """The address of hvd._C's table of libhvd's API (python/_C/hvd_capi.h),
    which a binding's own library takes to drive this process's engine."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(_C._capi, b"hvd._C._capi")


# The process-set helpers live with the sets (process_sets.py); the
# bindings reach them under these names.
set_id = _process_sets.checked_id
set_rank_of = _process_sets.rank_in_set


def set_size(process_set):
    return _C.size() if set_id(process_set) == 0 else process_set.size()


def set_rank(process_set):
    return _C.rank() if set_id(process_set) == 0 else process_set.rank()
