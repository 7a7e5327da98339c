"""DistributedOptimizer for Keras 3 on the JAX and PyTorch backends.

Keras 3's trainers on both call the optimizer's apply(): PyTorch's
eagerly with torch tensors, JAX's through stateless_apply() inside the
jit-compiled train step, under a StatelessScope where variables' values
are the step's traced arrays.  The mixin here overrides apply(): the
gradients are reduced by the backend's function (hvd.jax's XLA custom
call inside the step, hvd.torch's grouped allreduce) and then applied by
the optimizer's own apply().  Written with keras.ops only, so one code
serves both backends (TensorFlow's is hvd.tensorflow.keras_optimizer).

backward_passes_per_step = k > 1 (Horovod's): each pass adds its
gradients to sums kept as optimizer variables (so JAX's stateless step
carries them); the k-th pass reduces the sums (divided by k with
average_aggregated_gradients), applies them and clears them.  On the
other passes the optimizer's update is computed and then selected away
(keras.ops.where), as Keras's own gradient accumulation does on JAX: a
variable assigned inside a traced branch would leak out of the JAX step.
The iteration count advances on every pass, as Horovod's.  Every rank
counts the same passes, so every rank takes the same branch and the
reduce, inside keras.ops.cond, stays matched.
"""
import itertools

from keras import ops
from keras.src.utils import tracking  # Keras's own decorator for an optimizer's build()

from hvd import _C
from hvd.common import keras_optimizer as _common

__all__ = ["Keras3Reducing", "Binding"]

# Tensor names, the same on every rank: ranks make their optimizers in the
# same order.  (A name per optimizer, not per step: the engine's response
# cache serves it from the second step on.)
_instances = itertools.count()


class Keras3Reducing:
    """Before a Keras 3 optimizer's class: apply(), which model.fit's
    train step (and stateless_apply, apply_gradients, custom loops)
    calls, reduces the gradients first.  _hvd_reduce(grads, name, op,
    prescale, postscale, compression, process_set) is the backend's."""

    _hvd_settings = None  # a dict of common.keras_optimizer.SETTINGS, set by wrap()
    _hvd_reduce = None    # the backend's reduce of a list of gradients (Binding sets it)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        s = self._hvd_settings
        self._hvd_name = s["name"] or "Distributed%s" % _common.unwrapped_class(
            type(self), Keras3Reducing).__name__
        self._hvd_tensor_name = "keras.%s.%d" % (self._hvd_name, next(_instances))
        self.process_set = s["process_set"]
        self.scale_local_gradients = s["scale_local_gradients"]
        self._hvd_local = set()
        self._hvd_sums = None    # backward_passes_per_step > 1: per trainable variable
        self._hvd_passes = None  # passes summed since the last application

    def register_local_var(self, var):
        """A variable whose gradient stays local (divided by the set's size
        when scale_local_gradients), as Horovod's."""
        self._hvd_local.add(id(var))

    @tracking.no_automatic_dependency_tracking
    def build(self, variables):
        super().build(variables)
        if self._hvd_settings["backward_passes_per_step"] > 1 and self._hvd_sums is None:
            self._hvd_sums = [self.add_variable_from_reference(v, name="hvd_aggregated")
                              for v in variables]
            self._hvd_passes = self.add_variable((), initializer="zeros", dtype="int32",
                                                 name="hvd_passes")

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if trainable_variables is not None and not self.built:
            self.build(list(trainable_variables))
        if not grads or not self.built:  # the base's no-op or its error
            return super().apply(grads, trainable_variables)
        variables = (self._trainable_variables if trainable_variables is None
                     else list(trainable_variables))
        if self._hvd_sums is None:
            return super().apply(self._hvd_allreduce(grads, variables), trainable_variables)
        return self._hvd_aggregate(grads, variables, trainable_variables)

    def _hvd_allreduce(self, grads, variables):
        """grads reduced over the set, except those of local variables:
        they stay local, divided by the set's size when
        scale_local_gradients (Horovod's rule).  None stays None."""
        s, ps = self._hvd_settings, self.process_set
        shared = [i for i, (g, v) in enumerate(zip(grads, variables))
                  if g is not None and id(v) not in self._hvd_local]
        out = list(grads)
        # Horovod's _allreduce_cond: a rank outside the set, or a set of one,
        # keeps its own gradients.
        if shared and ps.included() and ps.size() > 1:
            f = s["gradient_predivide_factor"]
            pre, post = (1.0 / f, f) if s["op"] == _C.AVERAGE else (1.0, 1.0)
            reduced = type(self)._hvd_reduce([grads[i] for i in shared], self._hvd_tensor_name,
                                             s["op"], pre, post, s["compression"], ps)
            for i, r in zip(shared, reduced):
                out[i] = r
        if self.scale_local_gradients and self._hvd_local:
            n = float(ps.size())
            out = [g / n if g is not None and id(v) in self._hvd_local else g
                   for g, v in zip(out, variables)]
        return out

    def _hvd_aggregate(self, grads, variables, trainable_variables):
        s = self._hvd_settings
        k = s["backward_passes_per_step"]
        live = [i for i, g in enumerate(grads) if g is not None]
        accs = [self._hvd_sums[self._get_variable_index(variables[i])] for i in live]
        sums = [a.value + grads[i] for a, i in zip(accs, live)]
        passes = self._hvd_passes.value + 1
        flush = ops.greater_equal(passes, k)

        def reduce():
            reduced = self._hvd_allreduce(sums, [variables[i] for i in live])
            return [r / k for r in reduced] if s["average_aggregated_gradients"] else reduced

        applied = ops.cond(flush, reduce, lambda: list(sums))
        full = list(grads)
        for i, a in zip(live, applied):
            full[i] = a
        # What the optimizer's apply() may change, but for its iteration
        # count (which advances on every pass) and hvd's sums.
        own = {id(v) for v in self._hvd_sums + [self._hvd_passes, self._iterations]}
        kept = list(self._trainable_variables) + [v for v in self.variables if id(v) not in own]
        before = [ops.copy(v.value) for v in kept]
        super().apply(full, trainable_variables)
        for v, old in zip(kept, before):
            v.assign(ops.where(flush, v.value, old))
        for a, total in zip(accs, sums):
            a.assign(ops.where(flush, ops.zeros_like(total), total))
        self._hvd_passes.assign(ops.where(flush, ops.zeros_like(passes), passes))


class Binding:
    """distributed_class, unwrapped_class and distributed_optimizer for a
    backend whose reduce(grads, name, op, prescale, postscale,
    compression, process_set) returns the list of gradients reduced
    together."""

    def __init__(self, reduce):
        self.mixin = type("Keras3Reducing", (Keras3Reducing,),
                          {"_hvd_reduce": staticmethod(reduce)})

    def distributed_class(self, base, settings):
        """The subclass of the Keras optimizer class base that reduces with
        settings (a dict of hvd.common.keras_optimizer.SETTINGS)."""
        return _common.wrap(base, self.mixin, settings)

    def unwrapped_class(self, cls):
        """The Keras class below hvd's subclasses."""
        return _common.unwrapped_class(cls, Keras3Reducing)

    def distributed_optimizer(self, optimizer, **kwargs):
        """A copy of the Keras optimizer (from its config) that reduces its
        gradients over process_set (Average or Sum), as Horovod's keras
        DistributedOptimizer; kwargs: hvd.common.keras_optimizer.settings'."""
        base = self.unwrapped_class(optimizer.__class__)
        return self.distributed_class(base, _common.settings(**kwargs)).from_config(
            optimizer.get_config())
