"""Helpers horovod.tensorflow.util has and its users' code imports
(``from horovod.tensorflow.util import _executing_eagerly``): whether
TensorFlow runs eagerly here, a function traced once per argument tuple
and mode, and variables as hashable references and back."""
import tensorflow as tf
from tensorflow.python.eager import context

__all__ = ["_executing_eagerly", "_make_subgraph", "_cache", "vars_to_refs", "refs_to_vars"]


def _executing_eagerly():
    """True when ops run eagerly here (False inside a tf.function or a
    tf.compat.v1 graph)."""
    return context.executing_eagerly()


def _make_subgraph(f):
    """f as one TensorFlow function (its ops in flight together)."""
    return tf.function(f)


def _cache(f):
    """f(*args) computed once per (args, eager or not); args are hashable."""
    results = {}

    def cached(*args):
        key = (args, _executing_eagerly())
        if key not in results:
            results[key] = f(*args)
        return results[key]
    return cached


def vars_to_refs(variables):
    """A variable (or nested lists of them) as hashable references."""
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    return variables.ref()


def refs_to_vars(refs):
    """The inverse of vars_to_refs."""
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()
