"""hvd.keras's seam (hvd.keras._backend) on TensorFlow: Keras 3's
TensorFlow backend, or tf-keras 2 (TF_USE_LEGACY_KERAS=1), over
hvd.tensorflow; the Keras optimizers are wrapped by
hvd.tensorflow.keras_optimizer, which hvd.tensorflow's own
DistributedOptimizer also uses for them."""
import tensorflow as tf  # (hvd.keras._keras checked its version first)

import hvd.tensorflow as _hvd
from hvd.tensorflow import (Adasum, Average, Compression, Max, Min, Product,  # noqa: F401
                            ProcessSet, Sum, add_process_set, allgather_object, barrier,
                            broadcast_object, broadcast_variables, ccl_built, cross_rank,
                            cross_size, cuda_built, ddl_built, global_process_set, gloo_built,
                            gloo_enabled, init, is_homogeneous, is_initialized, join, local_rank,
                            local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                            nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
                            start_timeline, stop_timeline)
from hvd.tensorflow.elastic import ObjectState, run  # noqa: F401
from hvd.tensorflow.elastic import TensorFlowKerasState as KerasState  # noqa: F401
from hvd.tensorflow.keras_optimizer import (build_optimizer, default_settings,  # noqa: F401
                                            distributed_class, distributed_optimizer,
                                            optimizer_built, optimizer_variables,
                                            unwrapped_class)
from hvd.tensorflow.keras_optimizer import as_tf_variable as as_native  # noqa: F401


def _constant(value, name):
    return tf.constant(value, name=name) if name else tf.constant(value)


def allreduce(value, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
              compression=Compression.none):
    return _hvd.allreduce(_constant(value, name), op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, compression=compression)


def allgather(value, name=None):
    return _hvd.allgather(_constant(value, name))


def broadcast(value, root_rank, name=None):
    return _hvd.broadcast(_constant(value, name), root_rank)


def reducescatter(value, name=None, op=Average):
    return _hvd.reducescatter(_constant(value, name), op=op)


def scalar_value(x):
    """A Python float of a scalar tensor, variable or number."""
    import numpy as np
    return float(np.asarray(tf.convert_to_tensor(x)))
