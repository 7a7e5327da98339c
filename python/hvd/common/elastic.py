"""Elastic training, independent of the framework: horovod.common.elastic's
State, ObjectState and run_fn over hvd.

A State is what a training function must not lose when workers come and
go.  commit() saves it and checks for host updates (HostsUpdatedInterrupt
on every rank at the same commit); restore() goes back to the last commit;
sync() gives every rank rank 0's.  run_fn() wraps a training function: it
syncs, calls it, and when it raises HorovodInternalError (a worker was
lost) restores the state; after either exception it re-forms the job
(hvd leaves it and joins the next one) and calls the function again.

Beyond Horovod: commits are counted the same way on every rank, and a
sync over ranks that all hold the same commit (after a lost worker, with
no new one) sends nothing, so recovery does not grow with the model.
"""
import functools

import numpy as np

from hvd import _C
from hvd.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["State", "ObjectState", "run_fn"]


def _allreduce_max(values, name):
    """Element-wise max over the job of a few int64 values (through hvd._C
    directly, so that every framework's elastic states share this)."""
    buf = np.array(values, dtype=np.int64)
    addr = buf.ctypes.data
    _C.allreduce_async(addr, addr, buf.size, (buf.size,), _C.INT64, _C.MAX, name, 0, 1.0, 1.0,
                       buf).wait()
    return buf.tolist()


class State:
    """What a training function must not lose; subclasses say how to save,
    restore and sync it.

    bcast_object: broadcasts a picklable object from rank 0 (the
    framework's broadcast_object)."""

    def __init__(self, bcast_object):
        self._bcast_object = bcast_object
        self._reset_callbacks = []
        self._commits = 0        # counted alike on every rank; 0: never committed
        self._host_stamp = 0     # the last host update every rank agreed on
        self._removed_only = False

    def register_reset_callbacks(self, callbacks):
        """Functions to call after every change of membership (before the
        state is synced), e.g. to scale the learning rate by hvd.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state, then checks for host updates (raises
        HostsUpdatedInterrupt on every rank when hosts changed).  Every
        rank commits at the same steps.  A commit copies the state: commit
        every few steps rather than every step."""
        self.save()
        self._commits += 1
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt, on every rank at once, when hvdrun
        announced that hosts were added or removed since the last check."""
        stamp, added, removed = _C.elastic_updates()
        stamp, added, removed = self._allreduce_max([stamp, added, removed],
                                                    "hvd.elastic.host_updates")
        if stamp <= self._host_stamp:
            return
        self._host_stamp = stamp
        self._removed_only = not added
        raise HostsUpdatedInterrupt(skip_sync=not added)

    def sync(self):
        """Makes every rank's state rank 0's (and saves it).  When every
        rank holds the same commit, nothing else is sent, but what a sync
        derives from the state is derived again (_settle: an
        ElasticSampler splits what is left of its epoch over the job)."""
        most, least = self._allreduce_max([self._commits, -self._commits],
                                          "hvd.elastic.commits")
        if most == -least and most > 0:
            self._settle()
            return
        self._sync()
        self._commits = self._bcast_object(self._commits)
        self.save()

    def _allreduce_max(self, values, name):
        """Element-wise max over the job of a few integers."""
        return _allreduce_max(values, name)

    def save(self):
        """Saves the state in memory (called by commit)."""
        raise NotImplementedError()

    def restore(self):
        """Goes back to what the last commit saved."""
        raise NotImplementedError()

    def _sync(self):
        """Sends rank 0's state to every rank."""
        raise NotImplementedError()

    def _settle(self):
        """What a sync does beyond sending, when every rank holds the same
        commit (called on every rank at once)."""

    def reset(self):
        """Called after a change of membership, before the reset callbacks."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and
    exposed as attributes (state.epoch, state.batch)."""

    def __init__(self, bcast_object=None, **kwargs):
        if bcast_object is None:
            from hvd.torch.functions import broadcast_object as bcast_object
        self._saved_state = dict(kwargs)
        self._set_attrs()
        super().__init__(bcast_object)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def _sync(self):
        if self._saved_state:
            ObjectState.save(self)  # the plain objects only; subclasses save the rest
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def run_fn(func, reset):
    """Wraps func(state, *args, **kwargs) for elastic training; reset()
    leaves the job and joins the next one (raising when there is none:
    hvdrun ended the job)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset()
            state.on_reset()

    return wrapper

