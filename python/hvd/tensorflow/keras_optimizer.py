"""What hvd needs to know of a Keras optimizer and its variables,
whichever Keras made them (Keras 3, tf-keras 2's optimizer or its legacy
OptimizerV2); imports no Keras itself, and so lets hvd.tensorflow wrap a
Keras optimizer without importing hvd.keras (which imports hvd.tensorflow).
"""
import tensorflow as tf

from hvd.common import keras_optimizer as _common
from hvd.common.keras_optimizer import default_settings  # noqa: F401
from hvd.tensorflow.gradients import (LocalGradientAggregationHelper, _key,
                                      make_allreduce_grads_fn, reduce_with_locals)


def optimizer_variables(opt):
    """An optimizer's variables: a property in Keras 3 and tf-keras's
    optimizer, a method in tf-keras's legacy OptimizerV2."""
    vs = opt.variables
    return list(vs() if callable(vs) else vs)


def optimizer_built(opt):
    """Whether the optimizer has made its slots (Keras 3: built; tf-keras:
    _built; a legacy OptimizerV2 makes them, and its iteration count, at
    its first step)."""
    if hasattr(opt, "built"):
        return bool(opt.built)
    if hasattr(opt, "build"):
        return bool(getattr(opt, "_built", False))
    return bool(optimizer_variables(opt))


def build_optimizer(opt, variables):
    """Makes the optimizer's slots now (Keras 3 and tf-keras optimizers;
    a legacy OptimizerV2 through its _create_all_weights)."""
    if optimizer_built(opt):
        return
    if hasattr(opt, "build"):
        opt.build(variables)
    elif hasattr(opt, "_create_all_weights"):
        opt._create_all_weights(variables)


def as_tf_variable(v):
    """The tf.Variable of a Keras 3 Variable (its .value), or v itself when
    it is one already (tf-keras 2's; a tf.Variable's .value is a method)."""
    return v if isinstance(v, tf.Variable) else getattr(v, "value", v)


# ---- DistributedOptimizer around a Keras optimizer ----
#
# The subclass (hvd.common.keras_optimizer.wrap) mixes in what Horovod's
# keras DistributedOptimizer adds: on tf-keras 2 (its optimizer and the
# legacy OptimizerV2), as Horovod, compute_gradients() (what minimize()
# and model.fit's train step call) and get_gradients() reduce the
# gradients; on Keras 3, which has neither, apply() does.


def _is_keras3(cls):
    """A Keras 3 optimizer class, not one of tf-keras 2's."""
    return hasattr(cls, "stateless_apply")


class _Reducing:
    """What both Keras generations' distributed optimizers share: the
    reduce of gradients with local variables, and the aggregation helper."""

    _hvd_settings = None  # a dict of common.keras_optimizer.SETTINGS, set by wrap()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        s = self._hvd_settings
        base = next(c for c in type(self).__mro__[1:] if not issubclass(c, _Reducing))
        self._hvd_name = s["name"] or "Distributed%s" % base.__name__
        self._allreduce_grads = make_allreduce_grads_fn(
            self._hvd_name, s["compression"], s["sparse_as_dense"], s["op"],
            s["gradient_predivide_factor"], s["groups"], s["process_set"])
        self.process_set = s["process_set"]
        self.scale_local_gradients = s["scale_local_gradients"]
        self._local_vars = set()
        self._agg_helper = None
        if s["backward_passes_per_step"] > 1:
            self._agg_helper = LocalGradientAggregationHelper(
                s["backward_passes_per_step"], self._allreduce_grads, s["sparse_as_dense"],
                s["average_aggregated_gradients"], self.process_set, self.scale_local_gradients)

    def register_local_var(self, var):
        """A variable whose gradient stays local (divided by the set's size
        when scale_local_gradients), as Horovod's."""
        (self._agg_helper._local_vars if self._agg_helper else self._local_vars).add(_key(var))

    def _allreduce(self, grads, variables):
        """The gradients to apply: reduced over the set, or, aggregating,
        the sums so far (reduced on every N-th pass)."""
        if self._agg_helper:
            return self._agg_helper.compute_gradients(tuple(grads), tuple(variables))
        return reduce_with_locals(self._allreduce_grads, grads, variables, self._local_vars,
                                  self.process_set, self.scale_local_gradients)

    def _hvd_apply(self, grads, apply):
        """apply(), or when aggregating, apply() on every N-th pass and the
        iteration count advanced on the others (Horovod's)."""
        if not self._agg_helper:
            return apply()
        return self._agg_helper.apply_gradients(grads, apply,
                                                lambda: self.iterations.assign_add(1))


class _TfKerasMixin(_Reducing):
    """Before a tf-keras 2 optimizer's class (its optimizer or a legacy
    OptimizerV2), as Horovod's keras optimizer."""

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        base = super()
        tape = tf.GradientTape() if tape is None else tape
        if hasattr(base, "_compute_gradients"):  # the legacy OptimizerV2
            pairs = base._compute_gradients(loss, var_list, grad_loss, tape=tape)
        else:
            pairs = base.compute_gradients(loss, var_list, tape=tape)
        if not pairs:  # nothing to train
            return pairs
        grads, variables = zip(*pairs)
        return list(zip(self._allreduce(grads, variables), variables))

    def get_gradients(self, loss, params):
        return self._allreduce(super().get_gradients(loss, params), params)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        base = super().apply_gradients
        return self._hvd_apply([g for g, _ in grads_and_vars],
                               lambda: base(grads_and_vars, *args, **kwargs))


class _Keras3Mixin(_Reducing):
    """Before a Keras 3 optimizer's class: apply(), which model.fit's train
    step, apply_gradients() and custom loops call, reduces first."""

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = (self._trainable_variables if trainable_variables is None
                     else list(trainable_variables))
        if not self.built:  # not inside the aggregation's tf.cond
            self.build(variables)
        grads = self._allreduce(grads, variables)
        base = super().apply
        return self._hvd_apply(grads, lambda: base(grads, trainable_variables))


def distributed_class(base, settings):
    """The subclass of the Keras optimizer class base that reduces with
    settings (a dict of hvd.common.keras_optimizer.SETTINGS)."""
    return _common.wrap(base, _Keras3Mixin if _is_keras3(base) else _TfKerasMixin, settings)


def unwrapped_class(cls):
    """The Keras class below hvd's subclasses."""
    return _common.unwrapped_class(cls, _Reducing)


def distributed_optimizer(optimizer, **kwargs):
    """A copy of the Keras optimizer (from its config) that reduces its
    gradients over process_set (Average or Sum), as Horovod's keras
    DistributedOptimizer; kwargs: hvd.common.keras_optimizer.settings'."""
    base = unwrapped_class(optimizer.__class__)
    return distributed_class(base, _common.settings(**kwargs)).from_config(
        optimizer.get_config())
