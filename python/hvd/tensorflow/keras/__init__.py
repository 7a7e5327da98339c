"""hvd.tensorflow.keras: the same module as hvd.keras, under
horovod.tensorflow.keras's name."""
from hvd.keras import *  # noqa: F401,F403
from hvd.keras import (DistributedOptimizer, PartialDistributedOptimizer,  # noqa: F401
                       allgather, allreduce, broadcast, broadcast_global_variables, callbacks,
                       elastic, load_model, reducescatter)
