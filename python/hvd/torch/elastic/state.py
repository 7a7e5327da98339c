"""TorchState: a model, an optimizer, a learning-rate scheduler, an
ElasticSampler and plain objects, saved at commit, restored after a lost
worker and sent from rank 0 to new workers (horovod.torch.elastic's)."""
import copy

import torch

from hvd.common.elastic import ObjectState
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.functions import (allgather_object, broadcast_object,
                                 broadcast_optimizer_state, broadcast_parameters)

__all__ = ["TorchState"]


class _Handler:
    """How one kind of value is saved, restored and synced.  always_sync:
    its sync changes more than what rank 0 sends (so it runs even when
    every rank holds the same commit and nothing else is sent)."""

    always_sync = False

    def __init__(self, value):
        self.value = value
        self._saved = self._snapshot()

    def _snapshot(self):
        return copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved = self._snapshot()

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(),
                                                    name="hvd.elastic.%s" % type(self).__name__))

    def set_value(self, value):
        self.value = value
        self.save()

    def reset(self):
        """After a change of membership, before the reset callbacks."""


class _ModelHandler(_Handler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_Handler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)
        # hvd.PowerSGD's Q and step counts (a DistributedOptimizer's compressor)
        compression = getattr(self.value, "_compression", None)
        if hasattr(compression, "sync_state"):
            compression.sync_state(broadcast_object)


class _SamplerHandler(_Handler):
    # Loading a state re-splits what is left of the epoch over the job's
    # workers (Horovod's load_state_dict -> reset()): a sync must do it even
    # when every rank holds the same commit, or a resumed epoch would deal
    # the processed samples again.
    always_sync = True

    def sync(self):
        # Rank 0's epoch and count, as Horovod's (broadcast_object); and the
        # indices marked one by one (record_indices) on any worker.
        states = allgather_object(self.value.state_dict(), name="hvd.elastic.sampler.sync")
        state = dict(states[0])
        state["processed_indices"] = set().union(*(s["processed_indices"] for s in states))
        self.value.load_state_dict(state)

    def save(self):
        # The indices every worker has processed, so that a new job
        # re-shards only what is left of the epoch.
        state = self.value.state_dict()
        state["processed_indices"] = set().union(*allgather_object(
            self.value.processed_indices, name="hvd.elastic.sampler.processed"))
        self._saved = state

    def reset(self):
        # Hosts were removed right after a commit (nothing restored or
        # synced): split what every worker had processed over the new job.
        self.value.load_state_dict(self._saved)


_HANDLERS = [
    (torch.nn.Module, _ModelHandler),
    (torch.optim.Optimizer, _OptimizerHandler),
    (torch.optim.lr_scheduler._LRScheduler, _Handler),
    (ElasticSampler, _SamplerHandler),
]


def _handler_for(value):
    for kind, handler in _HANDLERS:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """State of a PyTorch training process.  model, optimizer and any
    keyword argument that is a Module, Optimizer, LR scheduler or
    ElasticSampler are saved through their state_dict() and synced with
    broadcast_parameters / broadcast_optimizer_state / broadcast_object;
    the other keyword arguments are plain objects (ObjectState).  Each is
    an attribute of the state (state.model, state.epoch)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for key, value in kwargs.items():
            handler = _handler_for(value)
            if handler is not None:
                handlers[key] = handler
            else:
                plain[key] = value
        object.__setattr__(self, "_handlers", handlers)
        for key, handler in handlers.items():
            object.__setattr__(self, key, handler.value)
        super().__init__(bcast_object=broadcast_object, **plain)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def _sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super()._sync()

    def _settle(self):
        for handler in self._handlers.values():
            if handler.always_sync:
                handler.sync()

    def reset(self):
        for handler in self._handlers.values():
            handler.reset()
