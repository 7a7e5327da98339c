"""horovod.keras.callbacks for Keras 3 (or tf-keras 2, hvd.keras._keras):
broadcast the initial state, average the metrics, warm up and schedule the
learning rate, keep the best model.  Collectives go through hvd.keras's
seam (hvd.keras._backend), so the callbacks serve every Keras backend; a
callback that touches variables mid-epoch first puts back the state
Keras's JAX trainer holds outside them (_keras.attach_state)."""
import numpy as np

from hvd.keras import _backend
from hvd.keras._keras import attach_state, keras


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Makes every rank start from root_rank's model: its weights at the
    start of training and (as Horovod, once the optimizer has built them in
    the first step) the model's and the optimizer's after the first batch.
    local_variables (or register_local_var()) are left alone."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_vars = set()
        for var in local_variables or []:
            self.register_local_var(var)

    def register_local_var(self, var):
        """A variable this callback does not broadcast (worker local)."""
        from hvd.keras import _key
        self._local_vars.add(_key(var))

    def _broadcast(self):
        from hvd.keras import model_variables
        attach_state(self.model)
        _backend.broadcast_variables(model_variables(self.model, self._local_vars),
                                     self.root_rank)

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
                avg = _backend.allreduce(np.float64(value), op=_backend.Average)
                logs[key] = _backend.scalar_value(avg)


def _get_lr(model):
    attach_state(model)
    return _backend.scalar_value(model.optimizer.learning_rate)


def _set_lr(model, lr):
    attach_state(model)
    opt = model.optimizer
    if hasattr(opt.learning_rate, "assign"):
        opt.learning_rate.assign(lr)
    else:
        opt.learning_rate = lr


def _momentum(opt):
    """The optimizer's momentum coefficient (0 without one)."""
    value = getattr(opt, "momentum", 0.0)
    return _backend.scalar_value(value) if value is not None else 0.0


def _velocities(opt):
    """The momentum slots (velocities) of an optimizer with a momentum:
    Keras 3's and tf-keras's SGD (momentums) and RMSprop (_momentums), a
    legacy OptimizerV2's "momentum" slots.  Empty before they are built."""
    if not _momentum(opt):
        return []
    for attr in ("momentums", "_momentums"):
        slots = getattr(opt, attr, None)
        if slots:
            return [_backend.as_native(v) for v in slots]
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
        v.assign(v * float(factor))


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
            return 1.0 / _backend.size() * (epoch * (_backend.size() - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """ModelCheckpoint that keeps the best model only (save_best_only), as
    Horovod's; give it the filepath Keras needs (Horovod's leaves it to be
    set later, with filepath=None)."""

    def __init__(self, filepath=None, monitor="val_loss", verbose=0, save_weights_only=False,
                 mode="auto", save_freq="epoch"):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)
