"""The one seam between hvd.keras and the framework binding under Keras:
what hvd.keras needs of it, all here, taken from the module for the Keras
backend in use (keras.backend.backend(), which KERAS_BACKEND sets; tf-keras
2 is TensorFlow's):

    tensorflow  hvd.keras._backend_tf     over hvd.tensorflow (its op library)
    jax         hvd.keras._backend_jax    over hvd.jax (XLA custom calls)
    torch       hvd.keras._backend_torch  over hvd.torch

Only the chosen module is imported, so Keras on JAX or PyTorch runs
without TensorFlow.  NAMES lists what each module gives:
the job (init, rank, ...) and process sets; reduction ops and
Compression; distributed_optimizer / distributed_class / unwrapped_class /
default_settings (wrapping a Keras optimizer); broadcast_variables(vars,
root_rank, process_set); the value collectives (allreduce, allgather,
broadcast, reducescatter of a tensor-like, giving the backend's tensor,
as Horovod's keras functions do eagerly); variable helpers
(as_native, optimizer_variables, optimizer_built, build_optimizer,
scalar_value); the elastic state and run.
"""
import importlib

from hvd.keras._keras import backend as _keras_backend

NAMES = (
    # the job, process sets, reduction ops, compression
    "Adasum", "Average", "Compression", "Max", "Min", "Product", "ProcessSet", "Sum",
    "add_process_set", "allgather_object", "barrier", "broadcast_object", "ccl_built",
    "cross_rank", "cross_size", "cuda_built", "ddl_built", "global_process_set", "gloo_built",
    "gloo_enabled", "init", "is_homogeneous", "is_initialized", "join", "local_rank",
    "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank",
    "remove_process_set", "rocm_built", "shutdown", "size", "start_timeline", "stop_timeline",
    # the optimizer
    "distributed_optimizer", "distributed_class", "unwrapped_class", "default_settings",
    # collectives on the backend's tensors and variables
    "allreduce", "allgather", "broadcast", "reducescatter", "broadcast_variables",
    # variables
    "as_native", "optimizer_variables", "optimizer_built", "build_optimizer", "scalar_value",
    # elastic
    "ObjectState", "KerasState", "run",
)

MODULES = {"tensorflow": "hvd.keras._backend_tf", "jax": "hvd.keras._backend_jax",
           "torch": "hvd.keras._backend_torch"}
BINDINGS = {"tensorflow": "hvd.tensorflow", "jax": "hvd.jax", "torch": "hvd.torch"}

BACKEND = _keras_backend()
if BACKEND not in MODULES:
    raise ImportError("hvd.keras: Keras's backend is %r (KERAS_BACKEND); hvd.keras serves %s"
                      % (BACKEND, ", ".join(sorted(MODULES))))
try:
    _module = importlib.import_module(MODULES[BACKEND])
except ImportError as e:
    raise ImportError("hvd.keras on Keras's %s backend needs %s, which does not import: %s"
                      % (BACKEND, BINDINGS[BACKEND], e), name=e.name) from e
globals().update({name: getattr(_module, name) for name in NAMES})
