"""Running a TensorFlow function the three ways Horovod's suite does
(run_all_in_graph_and_eager_modes): eagerly, traced into a tf.function,
and built into a TensorFlow 1 graph run in a tf.compat.v1.Session."""
import numpy as np
import tensorflow as tf

MODES = ["eager", "function", "graph"]


def run(mode, fn, *args):
    """fn(*tensors) in `mode`; args are numpy arrays (or tensors, eager
    modes only).  The results as numpy, in fn's structure."""
    if mode == "graph":
        with tf.Graph().as_default():
            out = fn(*[tf.constant(a) for a in args])
            with tf.compat.v1.Session() as session:
                return session.run(out)
    args = [tf.constant(a) if isinstance(a, np.ndarray) else a for a in args]
    out = fn(*args) if mode == "eager" else tf.function(fn)(*args)
    return tf.nest.map_structure(lambda t: t.numpy(), out)
