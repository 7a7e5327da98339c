"""Reducing gradients, as horovod.tensorflow's tape and optimizers do:
the allreduce of a list of gradients (grouped or not, over a process set,
only on its members), local variables whose gradients stay local (scaled
by 1/size, as Horovod's scale_local_gradients), and the aggregation of
backward_passes_per_step passes before one allreduce.  Shared by
DistributedGradientTape, the TF1 DistributedOptimizer and the Keras
optimizers (hvd.tensorflow.keras_optimizer)."""
import tensorflow as tf

from hvd.tensorflow.collectives import allreduce, grouped_allreduce
from hvd.tensorflow.mpi_ops import Average, _set_size_of
from hvd.tensorflow.util import _cache, _executing_eagerly, _make_subgraph, refs_to_vars, vars_to_refs

__all__ = ["make_allreduce_grads_fn", "reduce_with_locals", "LocalGradientAggregationHelper"]


def _key(var):
    """A hashable identity of a tf.Variable or a Keras 3 Variable."""
    return var.ref() if hasattr(var, "ref") else id(var)


def _group_layout(present, variables, groups):
    """((index, ...), ...): the gradients' groups, of those present,
    by Horovod's groups=: a number (that many groups of consecutive
    gradients) or lists of variables (a variable in none is a group of its
    own)."""
    idx = [i for i, p in enumerate(present) if p]
    if not isinstance(groups, list):
        n = max(1, min(int(groups), len(idx)))
        size, extra = divmod(len(idx), n)
        out, at = [], 0
        for k in range(n):
            step = size + (1 if k < extra else 0)
            out.append(tuple(idx[at:at + step]))
            at += step
        return tuple(g for g in out if g)
    # By identity: Horovod matches names, which unnamed variables share.
    by_key = {_key(variables[i]): i for i in idx}
    out = []
    for group in groups:
        members = tuple(by_key.pop(_key(v)) for v in group if _key(v) in by_key)
        if members:
            out.append(members)
    return tuple(out) + tuple((i,) for i in by_key.values())


def _reduce(grads, layout, settings, use_generic_names):
    """The allreduced gradients (None stays None); layout: the groups of
    indices to reduce as grouped allreduces, or None."""
    compression, sparse_as_dense, op, predivide, process_set = settings
    pre, post = (1.0 / predivide, predivide) if op == Average else (1.0, 1.0)
    if sparse_as_dense:
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]
    kw = dict(compression=compression, op=op, prescale_factor=pre, postscale_factor=post,
              process_set=process_set, ignore_name_scope=use_generic_names)
    if layout is None:
        return [None if g is None else
                allreduce(g, name="grad_%d" % i if use_generic_names else None, **kw)
                for i, g in enumerate(grads)]
    out = [None] * len(grads)
    for k, idx in enumerate(layout):
        reduced = grouped_allreduce([grads[i] for i in idx],
                                    name="grad_%d" % k if use_generic_names else None, **kw)
        for i, r in zip(idx, reduced):
            out[i] = r
    return out


@_cache
def _cached_allreduce_grads_fn(name, compression, sparse_as_dense, op, predivide, groups,
                               process_set):
    groups = refs_to_vars(groups) if isinstance(groups, tuple) else groups
    settings = (compression, sparse_as_dense, op, predivide, process_set)

    def reduce(grads, layout, use_generic_names):
        with tf.name_scope(name + "_Allreduce"):
            return _reduce(grads, layout, settings, use_generic_names)
    # Eagerly one function: the allreduces are in flight together and fused.
    reduce = _make_subgraph(reduce) if _executing_eagerly() else reduce

    def allreduce_grads(grads, variables=None, use_generic_names=False):
        grads = list(grads)
        # Horovod's _allreduce_cond: a rank outside the set, or a set of
        # one, keeps its own gradients (decided here: membership is fixed).
        if not process_set.included() or _set_size_of(process_set) == 1:
            return grads
        layout = None if groups is None else \
            _group_layout([g is not None for g in grads], variables, groups)
        return reduce(grads, layout, use_generic_names)
    return allreduce_grads


def make_allreduce_grads_fn(name, compression, sparse_as_dense, op, predivide, groups,
                            process_set):
    """fn(grads, variables=None, use_generic_names=False): the gradients
    reduced over process_set (op; Average split by predivide as Horovod's
    gradient_predivide_factor); eagerly one tf.function, made once per
    argument tuple."""
    groups = vars_to_refs(groups) if isinstance(groups, list) else groups
    return _cached_allreduce_grads_fn(name, compression, sparse_as_dense, op, predivide, groups,
                                      process_set)


def _scaled(grad, size):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / float(size), grad.indices, grad.dense_shape)
    return grad / float(size)


def reduce_with_locals(allreduce_grads, grads, variables, local_keys, process_set,
                       scale_local_gradients, use_generic_names=False):
    """grads reduced by allreduce_grads, except those of the variables
    whose _key is in local_keys: they stay local, divided by the set's
    size when scale_local_gradients (Horovod's rule, horovod#3695)."""
    grads, variables = list(grads), list(variables)
    shared = [i for i, v in enumerate(variables) if _key(v) not in local_keys]
    reduced = allreduce_grads([grads[i] for i in shared], [variables[i] for i in shared],
                              use_generic_names)
    out = list(grads)
    for i, r in zip(shared, reduced):
        out[i] = r
    if scale_local_gradients and local_keys:
        size = _set_size_of(process_set)
        out = [g if i in shared or g is None else _scaled(g, size) for i, g in enumerate(out)]
    return out


class LocalGradientAggregationHelper:
    """Horovod's backward_passes_per_step: each pass's gradients are added
    to local sums; on every N-th pass the sums are reduced (divided by N
    when average_aggregated_gradients) and applied, and cleared.
    `counter` counts the passes since the last application (0 right after
    one), so every rank takes the same branch.  Works eagerly, inside a
    tf.function and in a TF1 graph."""

    def __init__(self, backward_passes_per_step, allreduce_func, sparse_as_dense,
                 average_aggregated_gradients, process_set, scale_local_gradients=True):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.backward_passes_per_step = backward_passes_per_step
        self.allreduce_grads = allreduce_func
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_vars = set()
        self._sums = {}
        with tf.init_scope():
            self.counter = tf.Variable(0, trainable=False, name="hvd_aggregation_counter")

    def register_local_var(self, var):
        self._local_vars.add(_key(var))

    def _sum_of(self, i, grad):
        if i not in self._sums:
            with tf.init_scope():
                self._sums[i] = tf.Variable(tf.zeros(grad.shape, grad.dtype), trainable=False,
                                            name="hvd_aggregated_%d" % i)
        return self._sums[i]

    def compute_gradients(self, grads, variables):
        """The gradients to apply: on the N-th pass the reduced sums, on the
        others the sums so far (which apply_gradients does not apply)."""
        sums = []
        for i, g in enumerate(grads):
            if isinstance(g, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    raise ValueError("IndexedSlices are not supported when "
                                     "`backward_passes_per_step` > 1 and `sparse_as_dense` is "
                                     "False.")
                g = tf.convert_to_tensor(g)
            # (a tensor: eagerly assign_add gives a variable-like handle)
            sums.append(None if g is None else tf.identity(self._sum_of(i, g).assign_add(g)))
        with tf.control_dependencies([s for s in sums if s is not None]):
            count = self.counter.assign_add(1)
        live = [i for i, s in enumerate(sums) if s is not None]

        def flush():
            reduced = reduce_with_locals(self.allreduce_grads, [sums[i] for i in live],
                                         [variables[i] for i in live], self._local_vars,
                                         self.process_set, self.scale_local_gradients)
            if self.average_aggregated_gradients:
                reduced = [r / self.backward_passes_per_step for r in reduced]
            with tf.control_dependencies(reduced):
                clear = [self._sums[i].assign(tf.zeros_like(self._sums[i])) for i in live]
                clear.append(self.counter.assign(0))
            with tf.control_dependencies(clear):
                return [tf.identity(r) for r in reduced]

        def keep():
            return [tf.identity(sums[i]) for i in live]
        picked = tf.cond(tf.equal(count, self.backward_passes_per_step), flush, keep)
        out = [None] * len(grads)
        for i, g in zip(live, picked):
            out[i] = g
        return out

    def apply_gradients(self, grads, apply, count_pass):
        """apply() on the pass that reduced (counter back at 0), else
        count_pass() (the optimizer's iteration count still advances, as
        Horovod's).  The counter is read after grads (compute_gradients'
        result) exist: a TensorFlow 1 graph orders nothing by itself."""
        def after(op, value):
            # A TensorFlow 1 cond runs only what its result depends on.
            with tf.control_dependencies([op] if op is not None else []):
                return tf.constant(value)

        def skip():
            return after(count_pass(), False)

        def run():
            return after(apply(), True)
        with tf.control_dependencies([g for g in grads if g is not None]):
            applying = tf.equal(self.counter.read_value(), 0)
        return tf.cond(applying, run, skip)
