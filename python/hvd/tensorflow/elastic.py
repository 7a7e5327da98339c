"""Elastic training with TensorFlow, as horovod.tensorflow.elastic:

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        ...  # state.commit() every few steps

run under `hvdrun -np N --min-np MIN --max-np MAX --host-discovery-script S`.
The framework-free part (commit, restore, sync, run_fn) is hvd.common.elastic,
shared with hvd.torch.
"""
import tensorflow as tf

from hvd import _C
from hvd.common import process_sets as _process_sets
from hvd.common.elastic import ObjectState as _ObjectState
from hvd.common.elastic import run_fn
from hvd.common.exceptions import HorovodInternalError
from hvd.tensorflow import mpi_ops as _mpi_ops
from hvd.tensorflow.keras_optimizer import (as_tf_variable, build_optimizer,
                                               optimizer_variables)
from hvd.tensorflow.functions import broadcast_object, broadcast_variables

__all__ = ["run", "ObjectState", "TensorFlowKerasState", "TensorFlowState"]


class ObjectState(_ObjectState):
    """Plain Python objects (state.epoch, state.batch), broadcast with
    hvd.tensorflow's broadcast_object."""

    def __init__(self, bcast_object=None, **kwargs):
        super().__init__(bcast_object or broadcast_object, **kwargs)


class TensorFlowState(ObjectState):
    """A list of tf.Variables (or Keras variables) and plain objects."""

    def __init__(self, variables=None, **kwargs):
        self.variables = list(variables or [])
        self._saved_values = self._values()
        super().__init__(**kwargs)

    def _values(self):
        return [tf.identity(v).numpy() for v in self.variables]

    def save(self):
        self._saved_values = self._values()
        super().save()

    def restore(self):
        for v, value in zip(self.variables, self._saved_values):
            v.assign(value)
        super().restore()

    def _sync(self):
        broadcast_variables([as_tf_variable(v) for v in self.variables], root_rank=0)
        super()._sync()


class TensorFlowKerasState(TensorFlowState):
    """A Keras model, its optimizer (model.optimizer by default; its
    variables once it has built them) and plain objects."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self._build_optimizer()
        super().__init__(self._all_variables(), **kwargs)

    def _build_optimizer(self):
        """Builds a Keras optimizer's slots (momentum, ...) now rather than
        at its first step, so that a worker that joins a running job holds
        the same variables as the ranks it syncs from."""
        if self.optimizer is not None and getattr(self.model, "built", False):
            build_optimizer(self.optimizer, self.model.trainable_variables)

    def _all_variables(self):
        vs = list(self.model.variables)
        if self.optimizer is not None:
            vs += optimizer_variables(self.optimizer)
        return vs

    def save(self):
        self.variables = self._all_variables()  # the optimizer may have built its own since
        super().save()

    def _sync(self):
        self.variables = self._all_variables()
        super()._sync()


def _reset():
    """Leaves the job and joins the next one."""
    _C.elastic_reset()
    _process_sets._after_elastic_reset()
    _mpi_ops._native.hvd_tf_reset_names()


def run(func):
    """Decorator for a training function func(state, ...): syncs the state
    from rank 0, calls it, and when a worker is lost or hosts change
    re-forms the job and calls it again from the last commit.  A
    collective of a broken job fails with tf.errors.UnknownError (as
    Horovod's ops do); it counts as HorovodInternalError here."""
    def wrapper(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.UnknownError as e:
            raise HorovodInternalError(str(e)) from e
    return run_fn(wrapper, _reset)
