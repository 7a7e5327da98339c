"""horovod.keras.callbacks for Keras 3 (or tf-keras 2, hvd.keras._keras): broadcast the initial state,
average the metrics, warm up and schedule the learning rate."""
import numpy as np
import tensorflow as tf

import hvd.tensorflow as _hvd
from hvd.tensorflow._keras_optimizer import as_tf_variable
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


def _get_lr(model):
    return float(np.asarray(tf.convert_to_tensor(model.optimizer.learning_rate)))


def _set_lr(model, lr):
    opt = model.optimizer
    if hasattr(opt.learning_rate, "assign"):
        opt.learning_rate.assign(lr)
    else:
        opt.learning_rate = lr


def _momentum(opt):
    """The optimizer's momentum coefficient (0 without one)."""
    value = getattr(opt, "momentum", 0.0)
    return float(np.asarray(tf.convert_to_tensor(value))) if value is not None else 0.0


def _velocities(opt):
    """The momentum slots (velocities) of an optimizer with a momentum:
    Keras 3's and tf-keras's SGD (momentums) and RMSprop (_momentums), a
    legacy OptimizerV2's "momentum" slots.  Empty before they are built."""
    if not _momentum(opt):
        return []
    for attr in ("momentums", "_momentums"):
        slots = getattr(opt, attr, None)
        if slots:
            return [as_tf_variable(v) for v in slots]
    slots = getattr(opt, "_slots", None) or {}
    return [per_var["momentum"] for per_var in slots.values() if "momentum" in per_var]


def _correct_momentum(opt, factor):
    """Horovod's momentum correction (Goyal et al.): for the batch where
    the lr goes from old to new, Horovod multiplies the momentum by
    new/old and restores it after the batch.  The momentum coefficient is
    a constant of Keras 3's compiled step, so the same update is made by
    multiplying the velocities by new/old before the batch (momentum *
    (v * new/old) is (momentum * new/old) * v); nothing to restore."""
    for v in _velocities(opt):
        v.assign(v * tf.cast(factor, v.dtype))


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """lr = initial_lr * multiplier(epoch) for start_epoch <= epoch <
    end_epoch; multiplier is a number or a function of the epoch
    (fractional, within the epoch, when staircase is False and
    steps_per_epoch is known).  momentum_correction: each lr change from
    old to new scales the momentum's effect on that batch by new/old, as
    Horovod's (see _correct_momentum)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        if not self._in_range(epoch):
            return
        old = _get_lr(self.model)
        new = self.initial_lr * self.multiplier(epoch)
        _set_lr(self.model, new)
        if self.momentum_correction and old != 0 and new != old:
            _correct_momentum(self.model.optimizer, new / old)

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase or not self.steps_per_epoch:
            self._adjust(epoch)

    def on_batch_begin(self, batch, logs=None):
        if not self.staircase and self.steps_per_epoch:
            self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_lr(self.model)


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
