"""Elastic training with Keras 3, as horovod.tensorflow.keras.elastic:
KerasState and the callbacks that keep it current during model.fit.

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.CommitStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state)]

    @hvd.elastic.run
    def train(state):
        model.fit(..., initial_epoch=state.epoch, callbacks=callbacks)
"""
from hvd.keras import _backend
from hvd.keras._backend import ObjectState, run  # noqa: F401
from hvd.keras._keras import keras

__all__ = ["run", "KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback"]


class KerasState(_backend.KerasState):
    """A Keras model and its optimizer, and plain objects."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, **kwargs)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits the state every batches_per_commit batches and at the end of
    every epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()
        self.batches_remaining = self.batches_per_commit


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps state.batch at the next batch of the epoch to run (0 at an
    epoch's end).  A fit that starts with state.batch > 0 finishes an
    interrupted epoch (its data holds that epoch's remaining batches):
    its batches count from state.batch, so the epoch's count stays exact.
    (Horovod shortens params['steps'] instead; Keras 3's fit loop does
    not read it back.)"""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.first = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.first = self.state.batch

    def on_batch_end(self, batch, logs=None):
        self.state.batch = self.first + batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0
        self.first = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps state.epoch at the next epoch to run (pass it as fit's
    initial_epoch)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
