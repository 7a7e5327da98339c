"""hvd.torch: horovod.torch's API over hvd (``import hvd.torch as hvd``).

CPU tensors; see mpi_ops (collectives), functions (broadcasting state and
objects), optimizer (DistributedOptimizer), compression and
sync_batch_norm.
"""
from hvd.common.frameworks import require as _require

_require("hvd.torch")  # the framework, in the range this binding serves, or ImportError
from hvd.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvd.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                     global_process_set, remove_process_set)
from hvd.torch.compression import Compression  # noqa: F401
from hvd.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                 broadcast_optimizer_state, broadcast_parameters)
from hvd.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async, allreduce, allreduce_,
    allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier, broadcast, broadcast_,
    broadcast_async, broadcast_async_, ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
    gloo_built, gloo_enabled, grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    grouped_reducescatter, grouped_reducescatter_async, init, is_initialized, join, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
    reducescatter, reducescatter_async, rocm_built, shutdown, size, sparse_allreduce_async,
    start_timeline, stop_timeline, synchronize)
from hvd.torch.optimizer import DistributedOptimizer  # noqa: F401
from hvd.torch.powersgd import PowerSGD  # noqa: F401
from hvd.torch.topk import TopK  # noqa: F401
from hvd.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from hvd.torch import elastic  # noqa: F401,E402  (hvd.elastic.run, TorchState, ...)
