"""hvd.tensorflow: horovod.tensorflow's API over hvd
(``import hvd.tensorflow as hvd``), TensorFlow 2.

mpi_ops has the ops and their gradients, collectives the public
collectives over them, functions the broadcasts of variables and objects,
gradient_tape DistributedGradientTape and DistributedOptimizer (gradients
the reduction they share with the Keras optimizers of keras_optimizer),
sync_batch_norm SyncBatchNormalization, util horovod.tensorflow.util's
helpers.  hvd.keras (hvd.tensorflow.keras) is Horovod's Keras API on top.
"""
from hvd.common.frameworks import require as _require

_require("hvd.tensorflow")  # the framework, in the range this binding serves, or ImportError
import tensorflow as tf

from hvd.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvd.tensorflow import mpi_ops, util  # noqa: F401
from hvd.tensorflow.collectives import (allreduce, grouped_allreduce,  # noqa: F401
                                        grouped_reducescatter, reducescatter)
from hvd.tensorflow.compression import Compression  # noqa: F401
from hvd.tensorflow.functions import (allgather_object, broadcast_, broadcast_global_variables,  # noqa: F401,E501
                                      broadcast_object, broadcast_object_fn, broadcast_variables)
from hvd.tensorflow.gradient_tape import (DistributedGradientTape,  # noqa: F401
                                          DistributedOptimizer, PartialDistributedGradientTape)
from hvd.tensorflow.gradients import LocalGradientAggregationHelper  # noqa: F401
from hvd.tensorflow.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, _allreduce, _grouped_allreduce,
    _grouped_reducescatter, _reducescatter, add_process_set, allgather, alltoall, barrier,
    broadcast, ccl_built, check_num_rank_power_of_2, cross_rank, cross_size, cuda_built,
    ddl_built, global_process_set, gloo_built, gloo_enabled, grouped_allgather,
    handle_average_backwards_compatibility, init, is_homogeneous, is_initialized, join,
    local_rank, local_rank_op, local_size, local_size_op, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, process_set_included_op, rank, rank_op,
    remove_process_set, rocm_built, shutdown, size, size_op, start_timeline, stop_timeline)
from hvd.tensorflow.util import (_cache, _executing_eagerly, _make_subgraph,  # noqa: F401
                                 refs_to_vars, vars_to_refs)
from hvd.tensorflow import elastic  # noqa: F401,E402  (hvd.elastic.run, TensorFlowKerasState)

if hasattr(tf.compat.v1.train, "SessionRunHook"):
    from hvd.tensorflow.functions import BroadcastGlobalVariablesHook  # noqa: F401


def __getattr__(name):
    """SyncBatchNormalization derives from the Keras in use (tf.keras),
    which is imported only when it is first asked for."""
    if name == "SyncBatchNormalization":
        from hvd.tensorflow.sync_batch_norm import SyncBatchNormalization
        return SyncBatchNormalization
    raise AttributeError("module 'hvd.tensorflow' has no attribute %r" % name)
