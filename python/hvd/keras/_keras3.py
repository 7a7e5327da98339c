"""What hvd.keras's seam gives alike on Keras 3's JAX and PyTorch
backends (hvd.keras._backend_jax and _backend_torch add the collectives
of their binding): the helpers over Keras variables, the wrapped
optimizer (hvd.keras._optimizer) and the elastic KerasState.  Keras's
own Variables are the native ones here: a collective takes their
values and assigns the result."""
from keras import ops

from hvd.common.keras_optimizer import default_settings  # noqa: F401
from hvd.keras._keras import attach_state
from hvd.keras._optimizer import Binding

__all__ = ["as_native", "optimizer_variables", "optimizer_built", "build_optimizer",
           "scalar_value", "default_settings", "Binding", "keras_state_class"]


def as_native(v):
    """The variable a collective takes: the Keras Variable itself."""
    return v


def optimizer_variables(opt):
    return list(opt.variables)


def optimizer_built(opt):
    return bool(opt.built)


def build_optimizer(opt, variables):
    """Makes the optimizer's slots now (once)."""
    if not opt.built:
        opt.build(variables)


def scalar_value(x):
    """A Python float of a scalar tensor, Keras variable or number."""
    return float(ops.convert_to_numpy(x.value if hasattr(x, "value") else x))


def keras_state_class(object_state, broadcast_variables, broadcast_object):
    """KerasState over the binding's ObjectState, broadcast_variables and
    broadcast_object
    (hvd.keras.elastic derives its KerasState from it): a Keras model,
    its optimizer (model.optimizer by default; built now, so a worker
    that joins holds the same variables) and plain objects.  A commit
    copies every variable's value to host memory; restore assigns them
    back; sync broadcasts rank 0's."""

    class KerasState(object_state):
        def __init__(self, model, optimizer=None, **kwargs):
            self.model = model
            self.optimizer = optimizer if optimizer is not None else getattr(
                model, "optimizer", None)
            if self.optimizer is not None and getattr(model, "built", False):
                build_optimizer(self.optimizer, model.trainable_variables)
            self._saved_values = self._values()
            super().__init__(bcast_object=broadcast_object, **kwargs)

        def _variables(self):
            attach_state(self.model)
            vs = list(self.model.variables)
            if self.optimizer is not None:
                vs += optimizer_variables(self.optimizer)
            return vs

        def _values(self):
            return [ops.convert_to_numpy(v.value) for v in self._variables()]

        def save(self):
            self._saved_values = self._values()
            super().save()

        def restore(self):
            for v, value in zip(self._variables(), self._saved_values):
                v.assign(value)
            super().restore()

        def _sync(self):
            broadcast_variables(self._variables(), root_rank=0)
            super()._sync()

    return KerasState
