"""Process sets: collectives over a subset of the job's ranks, as Horovod's.

A ProcessSet names some ranks of the job.  It becomes usable once it is
registered with the engine -- passed to ``init(process_sets=[...])`` or to
``add_process_set()``, both collective over the whole job -- and then has a
``process_set_id``.  ``global_process_set`` (id 0) is every rank.

hvd needs no ``HOROVOD_DYNAMIC_PROCESS_SETS``: sets may be added and
removed at any time after init().  Sets are lists of ranks; MPI
communicators are not supported (hvd does not use MPI).
"""
from hvd import _C

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set"]


class ProcessSet:
    """A set of ranks for collectives (``process_set=`` of every op).

    ``ranks`` is the sorted list of the member ranks (job numbering);
    ``process_set_id`` is None until the set is registered.  size(), rank()
    and included() return None while it is not registered.
    """

    def __init__(self, ranks):
        try:
            self.ranks = sorted(int(r) for r in ranks)
        except TypeError:
            raise ValueError(
                "ProcessSet takes a list of ranks; hvd does not support MPI communicators"
            ) from None
        self.process_set_id = None
        self.mpi_comm = None  # Horovod's; hvd's sets are lists of ranks
        self._unnamed = 0

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set (None if not registered)."""
        if self.process_set_id is None:
            return None
        return _C.size() if self.process_set_id == 0 else _C.process_set_size(self.process_set_id)

    def rank(self):
        """This process's rank within the set (None if not registered); a
        rank outside the set gets hvd's error."""
        if self.process_set_id is None:
            return None
        return _C.rank() if self.process_set_id == 0 else _C.process_set_rank(self.process_set_id)

    def included(self):
        """True if this process belongs to the set (None if not registered)."""
        if self.process_set_id is None:
            return None
        if self.process_set_id == 0:
            return True
        return bool(_C.process_set_included(self.process_set_id))

    def _auto_name(self, kind):
        """A name for an unnamed collective on this set.

        hvd generates names for unnamed calls with one counter per process,
        so unnamed calls on a set that only some ranks make would put the
        counters of members and non-members out of step.  Calls on a
        non-global set therefore get names from a counter of their own,
        which every member advances in the same order."""
        self._unnamed += 1
        return "%s.noname.set%d.%d" % (kind, self.process_set_id, self._unnamed)

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

# Registered non-global sets by id, invalidated when hvd shuts down.
_registered = {}


def _register(process_set):
    process_set.process_set_id = _C.add_process_set(process_set.ranks)
    process_set._unnamed = 0
    _registered[process_set.process_set_id] = process_set


def _refuse_duplicate(ranks):
    """ValueError if a registered set (the global one included) has these
    ranks, as Horovod's add_process_set (HOROVOD_PROCESS_SET_ERROR_EXISTING_SET):
    every rank holds the same registry, so every rank raises alike."""
    if _C.is_initialized() and ranks == list(range(_C.size())):
        raise ValueError("Attempted to add a duplicate process set: ranks %s are the global "
                         "process set's" % ranks)
    for ps in _registered.values():
        if ps.ranks == ranks:
            raise ValueError("Attempted to add a duplicate process set: ranks %s are those of "
                             "%s" % (ranks, ps))


def add_process_set(process_set):
    """Registers a new process set (a ProcessSet or a list of ranks) and
    returns it.  Collective: every rank of the job calls it, in the same
    order, with the same ranks."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("%s has already been added" % process_set)
    _refuse_duplicate(process_set.ranks)
    _register(process_set)
    return process_set


def remove_process_set(process_set):
    """Unregisters a process set added before; collective like
    add_process_set().  Returns False if the set was not registered, or is
    the global set (which cannot be removed), as Horovod's."""
    if process_set.process_set_id in (None, 0):
        return False
    _C.remove_process_set(process_set.process_set_id)
    _registered.pop(process_set.process_set_id, None)
    process_set._invalidate()
    return True


def _setup(process_sets):
    """After init(): fills in the global set's ranks and registers the
    sets given to init(process_sets=[...]) ("dynamic" or None: none)."""
    global_process_set.ranks = list(range(_C.size()))
    if process_sets is None or process_sets == "dynamic":
        return
    for ps in process_sets:
        if not isinstance(ps, ProcessSet):
            raise ValueError("init(process_sets=...) takes a list of ProcessSet objects "
                             "or 'dynamic'")
        if ps.process_set_id is None:
            _register(ps)


def _after_elastic_reset():
    """After hvd_elastic_reset(): the native layer added the registered sets
    again with their ids (over their ranks that still exist); the global
    set and the name counters start over with the new job."""
    global_process_set.ranks = list(range(_C.size()))
    global_process_set._unnamed = 0
    for ps in _registered.values():
        ps._unnamed = 0


def _teardown():
    """At shutdown(): sets must be registered again after a new init()."""
    for ps in _registered.values():
        ps._invalidate()
    _registered.clear()
    global_process_set.ranks = []


def ids_and_ranks():
    """{process_set_id: its ranks} of the global set and every set
    registered through this process's add_process_set()/init()."""
    sets = {0: list(range(_C.size()))}
    sets.update({i: list(ps.ranks) for i, ps in sorted(_registered.items())})
    return sets


def checked_id(process_set):
    """process_set's id; ValueError unless it is a registered ProcessSet
    (every binding's process_set= argument)."""
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet, got %s" % type(process_set).__name__)
    set_id = process_set.process_set_id
    if set_id is None:
        raise ValueError("%s is not registered: add it with hvd.add_process_set() or "
                         "hvd.init(process_sets=[...])" % process_set)
    if set_id != 0 and set_id not in _registered:
        _C.process_set_size(set_id)  # ValueError unless the engine knows it
    return set_id


def rank_in_set(process_set, root_rank):
    """root_rank (job numbering, as Horovod's) as a rank within the set."""
    if checked_id(process_set) == 0:
        return int(root_rank)
    try:
        return process_set.ranks.index(int(root_rank))
    except ValueError:
        raise ValueError("root_rank %d is not a member of %s" % (root_rank, process_set)) from None
