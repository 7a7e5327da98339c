"""An elastic hvd.keras job (test_keras_elastic.py starts it under hvdrun's
elastic driver, with KERAS_BACKEND tensorflow, jax or torch): model.fit
with KerasState and the elastic callbacks,
EPOCHS epochs of STEPS batches.  The worker on h2 kills itself (SIGKILL)
once, mid-epoch, right after batch KILL_AT[1] of epoch KILL_AT[0]; the
others go on from their last commit, and a new worker may join.

Prints 'start epoch E batch B size N' each time training (re)starts and
'done epoch E batch B iterations I size N same S' at the end (S: every
rank holds the same weights, bit for bit)."""
import os
import signal
import socket

import numpy as np
import keras

import hvd.keras as hvd

if keras.backend.backend() == "tensorflow":  # three hosts share two cores
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
elif keras.backend.backend() == "torch":
    import torch

    torch.set_num_threads(1)

EPOCHS, STEPS, BATCH = 3, 6, 4
KILL_AT = (1, 3)

hvd.init()
keras.utils.set_random_seed(5)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)),
              loss="mse")
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def shard(start):
    """This rank's samples of batches start..STEPS-1 of every epoch."""
    x, y = [], []
    for b in range(start, STEPS):
        g = np.random.default_rng(1000 * b + hvd.rank())
        x.append(g.standard_normal((BATCH, 4)).astype(np.float32))
        y.append(g.standard_normal((BATCH, 3)).astype(np.float32))
    return np.concatenate(x), np.concatenate(y)


class KillOnce(keras.callbacks.Callback):
    """SIGKILL to this worker if on h2, after KILL_AT, the first time."""

    def on_train_batch_end(self, batch, logs=None):
        if (state.epoch, state.batch) != (KILL_AT[0], KILL_AT[1] + 1):
            return
        if socket.gethostname() != "h2":
            return
        try:
            os.close(os.open(os.environ["KILL_MARKER"], os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


class CheckCount(keras.callbacks.Callback):
    """state.batch must count the epoch's batches done, those of an
    interrupted epoch's first part included (a fit that finishes an epoch
    starts at its batch `first`)."""

    def on_train_batch_end(self, batch, logs=None):
        want = first + batch + 1
        if state.batch != want:
            raise AssertionError("epoch %d: state.batch is %d after batch %d, not %d"
                                 % (state.epoch, state.batch, batch, want))


# The state is updated before it is committed.
callbacks = [hvd.elastic.UpdateBatchStateCallback(state),
             hvd.elastic.UpdateEpochStateCallback(state),
             CheckCount(),
             KillOnce(),
             hvd.elastic.CommitStateCallback(state)]


first = 0  # the batch of the epoch that the running fit's data starts at


def fit(start, epochs):
    global first
    first = start
    x, y = shard(start)
    model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, initial_epoch=state.epoch,
              epochs=epochs, callbacks=callbacks)


@hvd.elastic.run
def train(state):
    print("start epoch %d batch %d size %d" % (state.epoch, state.batch, hvd.size()), flush=True)
    if state.batch:  # the rest of the interrupted epoch first
        fit(state.batch, state.epoch + 1)
    if state.epoch < EPOCHS:
        fit(0, EPOCHS)


train(state)
digests = hvd.allgather_object([w.tobytes() for w in model.get_weights()])
print("done epoch %d batch %d iterations %d size %d same %s"
      % (state.epoch, state.batch, int(keras.ops.convert_to_numpy(model.optimizer.iterations)), hvd.size(),
         all(d == digests[0] for d in digests)), flush=True)
