"""Broadcasting variables and Python objects, as horovod.tensorflow.functions.

Objects travel pickled with cloudpickle (the standard pickle where it is
missing), as a uint8 tensor: its length first, then its bytes.  In graph
mode (a tf.compat.v1 graph) the collectives run in the session given, or
the default one, as Horovod's do."""
import io

import numpy as np
import tensorflow as tf

try:
    import cloudpickle as _pickle
except ImportError:  # pragma: no cover
    import pickle as _pickle

from hvd.common.process_sets import global_process_set
from hvd.tensorflow.mpi_ops import _set_size_of, allgather, broadcast, rank
from hvd.tensorflow.util import _executing_eagerly

__all__ = ["broadcast_variables", "broadcast_", "broadcast_global_variables",
           "broadcast_object", "broadcast_object_fn", "allgather_object"]


@tf.function
def _assign_broadcasts(variables, root_rank, process_set):
    for var in variables:
        var.assign(broadcast(var, root_rank, process_set=process_set))


def _tf_variables(variables):
    """variables as tf.Variables: Keras 3's keras.Variable holds one (its
    .value) and would enter a tf.function as a tensor, which cannot be
    assigned."""
    return [v if isinstance(v, tf.Variable) or not isinstance(getattr(v, "value", None),
                                                              tf.Variable) else v.value
            for v in variables]


def _assigned(variables, root_rank, process_set, name=None):
    """In a graph: each variable assigned root_rank's value; the assigns'
    results (the new values), which run the broadcasts when evaluated."""
    out = []
    for i, var in enumerate(variables):
        sub = None if name is None else "%s.%d" % (name, i)
        out.append(var.assign(broadcast(var, root_rank, name=sub, process_set=process_set)))
    return out


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to variables on every rank of the set.
    Eagerly the broadcasts run as one tf.function, so they are in flight
    together (and fused); in a graph, returns the op that runs them.
    inplace: Horovod's in-place broadcast (hvd assigns the broadcast values
    either way; see broadcast_)."""
    variables = _tf_variables(variables)
    if not variables:
        return None
    if _executing_eagerly():
        return _assign_broadcasts(variables, root_rank, process_set)
    return tf.group(*_assigned(variables, root_rank, process_set))


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Horovod's in-place broadcast: root_rank's values assigned to the
    variables (resource or reference variables); returns their new
    values.  hvd broadcasts into a new buffer and assigns it, rather than
    broadcasting into the variable's own memory (docs/tensorflow.md)."""
    variables = list(variables)
    if _executing_eagerly():
        if variables:
            _assign_broadcasts(variables, root_rank, process_set)
        return [tf.convert_to_tensor(v) for v in variables]
    return _assigned(variables, root_rank, process_set, name)


def broadcast_global_variables(root_rank):
    """Broadcasts every global variable of the default graph from
    root_rank (TensorFlow 1 graphs; eagerly there are none: RuntimeError,
    as Horovod's)."""
    if _executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution. "
                           "Please use `hvd.broadcast_variables(<model/optimizer variables>)` "
                           "instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


if hasattr(tf.compat.v1.train, "SessionRunHook"):
    class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
        """Broadcasts every global variable from root_rank when a session is
        created (TensorFlow 1 graphs; MonitoredTrainingSession), as Horovod's."""

        def __init__(self, root_rank, device=""):
            super().__init__()
            self.root_rank = root_rank
            self.device = device
            self.bcast_op = None

        def begin(self):
            if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
                with tf.device(self.device):
                    self.bcast_op = broadcast_global_variables(self.root_rank)

        def after_create_session(self, session, coord):
            session.run(self.bcast_op)


def _value(t, session):
    """t's value as numpy: eagerly, or run in session (the default one)."""
    if _executing_eagerly():
        return t.numpy()
    return (session or tf.compat.v1.get_default_session()).run(t)


def _to_bytes(obj):
    buf = io.BytesIO()
    _pickle.dump(obj, buf)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's obj on every rank of the set."""
    name = name or type(obj).__name__
    me = rank() == root_rank
    payload = _to_bytes(obj) if me else None
    length = np.array([payload.shape[0] if me else 0], np.int64)
    length = _value(broadcast(tf.constant(length), root_rank, name=name + ".sz",
                              process_set=process_set), session)
    if not me:
        payload = np.zeros([int(length[0])], np.uint8)
    payload = _value(broadcast(tf.constant(payload), root_rank, name=name + ".t",
                               process_set=process_set), session)
    return obj if me else _pickle.loads(payload.tobytes())


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts its argument from root_rank (Horovod's)."""
    def _bcast(obj):
        return broadcast_object(obj, root_rank, session, name or "broadcast_object_fn",
                                process_set)
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every rank's obj (of the set), in rank order."""
    name = name or type(obj).__name__
    payload = _to_bytes(obj)
    sizes = _value(allgather(tf.constant([payload.shape[0]], tf.int64), name=name + ".sz",
                             process_set=process_set), session)
    gathered = _value(allgather(tf.constant(payload), name=name + ".t",
                                process_set=process_set), session)
    out, pos = [], 0
    for n in sizes[:_set_size_of(process_set)]:
        out.append(_pickle.loads(gathered[pos:pos + n].tobytes()))
        pos += n
    return out
