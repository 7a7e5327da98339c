"""horovod.keras.callbacks for Keras 3 (or tf-keras 2, hvd.keras._keras): broadcast the initial state,
average the metrics, warm up and schedule the learning rate."""
import numpy as np
import tensorflow as tf

import hvd.tensorflow as _hvd
from hvd.keras._keras import keras


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Makes every rank start from root_rank's model: its weights at the
    start of training, and (as Horovod, once the optimizer has built them
    in the first step) the optimizer's variables after the first batch."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.broadcast_done = False

    def _broadcast(self):
        from hvd.keras import _variables
        _hvd.broadcast_variables(_variables(self.model), self.root_rank)

    def on_train_begin(self, logs=None):
        self._broadcast()

    def on_batch_end(self, batch, logs=None):
        if not self.broadcast_done:
            self._broadcast()
            self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces the epoch's metrics in logs by their average over the
    ranks (put it before the callbacks that read them)."""

    def __init__(self, device=""):
        super().__init__()

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        for key in sorted(logs):
            value = logs[key]
            if isinstance(value, (int, float, np.floating, np.integer)) or (
                    hasattr(value, "shape") and np.ndim(value) == 0):
                avg = _hvd.allreduce(tf.constant(float(value), tf.float64), op=_hvd.Average,
                                     name="metric.%s" % key)
                logs[key] = float(avg.numpy())


def _set_lr(model, lr):
    opt = model.optimizer
    if hasattr(opt.learning_rate, "assign"):
        opt.learning_rate.assign(lr)
    else:
        opt.learning_rate = lr


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """lr = initial_lr * multiplier(epoch) for start_epoch <= epoch <
    end_epoch; multiplier is a number or a function of the epoch
    (fractional, within the epoch, when staircase is False and
    steps_per_epoch is known).  momentum_correction is accepted and not
    applied (Keras 3 optimizers keep momentum apart from the lr)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        if self._in_range(epoch):
            _set_lr(self.model, self.initial_lr * self.multiplier(epoch))

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase or not self.steps_per_epoch:
            self._adjust(epoch)

    def on_batch_begin(self, batch, logs=None):
        if not self.staircase and self.steps_per_epoch:
            self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(np.asarray(self.model.optimizer.learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Goes from initial_lr / size() to initial_lr over warmup_epochs
    (Goyal et al.; Horovod's formula), batch by batch when steps_per_epoch
    is given."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            return 1.0 / _hvd.size() * (epoch * (_hvd.size() - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose
