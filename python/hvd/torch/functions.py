"""Broadcasting model and optimizer state, and Python objects, as
horovod.torch.functions.

Objects travel pickled with cloudpickle, as in Horovod (Debian's
python3-cloudpickle), so lambdas and locally defined classes go through
too; where cloudpickle is not installed, with the standard pickle, which
takes everything else.
"""
import collections
import io

import torch

try:
    import cloudpickle as _pickle
except ImportError:  # pragma: no cover - cloudpickle is a dependency where packaged
    import pickle as _pickle

from hvd.common.process_sets import global_process_set
from hvd.torch.mpi_ops import _allgather_async, broadcast_, broadcast_async_, rank, synchronize

__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
           "allgather_object"]


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites parameters with root_rank's, in place.

    params: a dict (``model.state_dict()``; broadcast in the order of its
    sorted names) or a list/iterable of tensors or (name, tensor) pairs
    (``model.parameters()``, ``model.named_parameters()``)."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        # Both parameters() and named_parameters(); Horovod takes lists only.
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = [broadcast_async_(p, root_rank, name, process_set=process_set)
               for name, p in params]
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Overwrites the optimizer's state and hyper-parameters with
    root_rank's: tensors (momentum buffers, Adam's moments and step) by
    broadcast, scalars (lr, betas, a float 'step') as one pickled object.

    A new optimizer has no state yet: it is first initialised with a step
    on zero gradients (a DistributedOptimizer steps without communicating),
    as Horovod does."""
    from hvd.torch.optimizer import _DistributedMixin

    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()
    if not state_dict["state"]:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
                    if isinstance(optimizer, torch.optim.SparseAdam):
                        p.grad = p.grad.to_sparse()
        if isinstance(optimizer, _DistributedMixin):
            super(_DistributedMixin, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()
    # Still no state: a stateless optimizer, nothing to broadcast.
    if not state_dict["state"]:
        return

    tensors = []
    scalars = {}
    assign = {}
    occurrences = collections.defaultdict(int)

    def assign_option(index, key):
        def set_value(v):
            optimizer.param_groups[index][key] = v
        return set_value

    def assign_state(pid, key):
        def set_value(v):
            state_dict["state"][pid][key] = v
        return set_value

    for index, group in enumerate(state_dict["param_groups"]):
        # Hyper-parameters (lr, momentum, betas...) are scalars.
        for key, value in group.items():
            if key != "params":
                name = "%s.%d" % (key, index)
                scalars[name] = value
                assign[name] = assign_option(index, key)
        for pid in group["params"]:
            if pid not in state_dict["state"]:
                continue  # no gradient yet (requires_grad=False): no state
            for key, value in state_dict["state"][pid].items():
                # A state name recurs for every parameter: number them.
                occurrences[key] += 1
                name = "%s.%d" % (key, occurrences[key])
                if torch.is_tensor(value):
                    # state_dict() holds the optimizer's own tensors, so an
                    # in-place broadcast updates the optimizer.
                    tensors.append((name, value))
                else:
                    scalars[name] = value
                    assign[name] = assign_state(pid, key)

    broadcast_parameters(tensors, root_rank, process_set=process_set)
    scalars = broadcast_object(scalars, root_rank, name="optimizer.scalars",
                               process_set=process_set)
    # state_dict()'s per-parameter state dicts are the optimizer's own, its
    # param_groups copies: the assignments write to the optimizer.
    for name, value in scalars.items():
        assign[name](value)


def _to_bytes(obj):
    buf = io.BytesIO()
    _pickle.dump(obj, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _from_bytes(t):
    return _pickle.loads(t.numpy().tobytes())


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's obj (pickled and broadcast) on every process.

    name defaults to the object's type name."""
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name + ".sz", process_set)
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + ".t", process_set)
    return obj if rank() == root_rank else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every process's obj (pickled and allgathered),
    in rank order.  name defaults to the object's type name."""
    if name is None:
        name = type(obj).__name__
    # One allgather: its frames carry each rank's length.
    gathered, lengths = synchronize(_allgather_async(_to_bytes(obj), name, process_set))
    objects, pos = [], 0
    for n in lengths:
        objects.append(_from_bytes(gathered[pos:pos + n]))
        pos += n
    return objects
