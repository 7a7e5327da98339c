"""hvd.tensorflow.keras: the same module as hvd.keras (Keras 3 on the
TensorFlow backend), under horovod.tensorflow.keras's name."""
from hvd.keras import *  # noqa: F401,F403
from hvd.keras import (DistributedOptimizer, allgather, allreduce, broadcast,  # noqa: F401
                       broadcast_global_variables, callbacks, elastic, load_model,
                       reducescatter)
