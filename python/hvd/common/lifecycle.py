"""init() and shutdown() as every binding has them (horovod.common's
HorovodBasics): join the job, register the process sets, leave at exit.
A binding passes hooks to run after init and before shutdown (its own
per-job state)."""
import atexit

from hvd import _C
from hvd.common import process_sets as _process_sets

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
