"""Elastic training with PyTorch, as horovod.torch.elastic:

    import hvd.torch as hvd
    hvd.init()
    model, optimizer = ..., ...
    sampler = hvd.elastic.ElasticSampler(dataset)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler,
                                   epoch=0, batch=0)
    state.register_reset_callbacks([lambda: scale_lr(hvd.size())])

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, data in enumerate(loader, state.batch): ...
                state.sampler.record_batch(state.batch, batch_size)
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0
            state.sampler.set_epoch(state.epoch + 1)

    train(state)

run under `hvdrun -np N --min-np MIN --max-np MAX --host-discovery-script S`.
"""
from hvd import _C
from hvd.common import process_sets as _process_sets
from hvd.common.elastic import ObjectState, run_fn
from hvd.torch import mpi_ops as _mpi_ops
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.elastic.state import TorchState

__all__ = ["run", "ObjectState", "TorchState", "ElasticSampler"]


def _reset():
    """Leaves the job and joins the next one; handles of the old job are
    dropped (their operations failed with it)."""
    _C.elastic_reset()
    _mpi_ops._drop_handles()
    _process_sets._after_elastic_reset()


def run(func):
    """Decorator for a training function func(state, ...): syncs the state
    from rank 0, calls func, and when a worker is lost (HorovodInternalError)
    or hosts change (HostsUpdatedInterrupt) re-forms the job and calls it
    again from the last commit.  Needs hvd.init() first."""
    return run_fn(func, _reset)
