"""hvd.jax: Horovod's API for JAX (``import hvd.jax as hvd``), which
Horovod itself does not have.

    import hvd.jax as hvd
    hvd.init()
    params = hvd.broadcast_parameters(params, root_rank=0)
    opt = hvd.DistributedOptimizer(optax.sgd(0.01 * hvd.size()))

    @jax.jit
    def step(params, state, batch):
        grads = jax.grad(loss)(params, batch)
        updates, state = opt.update(grads, state, params)   # averaged over ranks
        return optax.apply_updates(params, updates), state

The collectives are XLA custom calls on hvd's engine (python/_jax), the
same eagerly and inside jax.jit, with Horovod's gradients; see
docs/jax.md.  CPU arrays.
"""
from hvd.common.frameworks import require as _require

_require("hvd.jax")  # the framework, in the range this binding serves, or ImportError
from hvd.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvd.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                     global_process_set, remove_process_set)
from hvd.jax.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, allgather, allreduce, alltoall, barrier, broadcast,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    grouped_allreduce, init, is_initialized, join, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, reducescatter, rocm_built, shutdown,
    size, start_timeline, stop_timeline)
from hvd.jax.compression import Compression  # noqa: F401,E402
from hvd.jax.functions import (allgather_object, allreduce_gradients,  # noqa: F401,E402
                               broadcast_object, broadcast_optimizer_state,
                               broadcast_parameters)
from hvd.jax.optimizer import DistributedOptimizer  # noqa: F401,E402
from hvd.jax import elastic  # noqa: F401,E402  (hvd.elastic.run, JaxState)
