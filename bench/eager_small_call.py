"""Per-call microseconds of hvd.tensorflow's and hvd.jax's eager
allreduce of one small CPU tensor (2 float32) on the fast path
(python/_C/fast.c's eager_allreduce) and on the general path
(mpi_ops._fast_enabled = False) in the same process, and the framework's
own eager add of the same tensor for scale: TensorFlow's tf.add(t, t) and
t + t, JAX's x + x with block_until_ready (the result computed, as
allreduce returns it).  A build without the fast path: its path only
(which bench/eager-small-call labels "before:").  Run by
bench/eager-small-call under hvdrun:

    eager_small_call.py tf|jax [CALLS [BATCHES]]

prints "form,us_per_call" lines (bench/small_call_timing.py)."""
import os
import sys

from small_call_timing import per_call_us, report


def allreduce_rows(binding, mpi_ops, allreduce, calls, batches, fewest):
    """Times allreduce() on each path of the build; True when the build
    has the fast path (a general path to compare with)."""
    fast_path = hasattr(mpi_ops, "_fast_enabled")  # not in a build from before it
    for path, fast in (("fast", True), ("general", False)) if fast_path else (("", False),):
        mpi_ops._fast_enabled = fast
        report(("%s %s allreduce" % (path, binding)).strip(),
               per_call_us(allreduce, calls, batches, fewest))
    if fast_path:
        mpi_ops._fast_enabled = True
    return fast_path


def tensorflow(calls, batches):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    import hvd.tensorflow as hvd
    from hvd.tensorflow import mpi_ops
    hvd.init()
    t = tf.ones(2)

    def fewest(n):
        return int(hvd.allreduce(tf.constant([n]), op=hvd.Min, name="bench.calls")[0])
    if allreduce_rows("hvd.tensorflow", mpi_ops, lambda: hvd.allreduce(t), calls, batches,
                      fewest):
        report("TensorFlow tf.add", per_call_us(lambda: tf.add(t, t), calls, batches, fewest))
        report("TensorFlow t + t", per_call_us(lambda: t + t, calls, batches, fewest))
    hvd.shutdown()


def jax(calls, batches):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax.numpy as jnp
    import hvd.jax as hvd
    from hvd.jax import mpi_ops
    hvd.init()
    x = jnp.ones(2, jnp.float32)

    def fewest(n):
        return int(hvd.allreduce(jnp.asarray([n], jnp.int32), op=hvd.Min, name="bench.calls")[0])
    if allreduce_rows("hvd.jax", mpi_ops, lambda: hvd.allreduce(x), calls, batches, fewest):
        report("JAX x + x (block_until_ready)",
               per_call_us(lambda: (x + x).block_until_ready(), calls, batches, fewest))
    hvd.shutdown()


def main():
    which = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    batches = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    {"tf": tensorflow, "jax": jax}[which](calls, batches)


if __name__ == "__main__":
    main()
