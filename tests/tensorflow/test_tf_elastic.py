"""hvd.tensorflow.elastic and hvd.keras.elastic in a job whose membership
does not change: TensorFlowKerasState's commit, restore and sync, run()'s
recovery through a new job (hvd_elastic_reset under hvdrun) after a
simulated lost worker -- HorovodInternalError, or the tf.errors.UnknownError
a broken job's collective raises -- and the Keras callbacks that keep the
state current in model.fit.  A worker killed mid-epoch under hvdrun's
elastic driver: tests/cluster_keras/test_keras_elastic.py."""
import numpy as np
import tensorflow as tf

import hvd.keras as hvdk
import hvd.tensorflow as hvd
from hvd.keras._keras import keras  # Keras 3, or tf-keras 2 (TF_USE_LEGACY_KERAS=1)
from hvd.common.exceptions import HorovodInternalError


def model_of(rank):
    keras.utils.set_random_seed(200 + rank)
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    return m


def same_everywhere(m):
    mine = [w.tobytes() for w in m.get_weights()]
    return all(d == mine for d in hvd.allgather_object(mine))


def test_keras_state_commit_restore_sync():
    m = model_of(hvd.rank())
    state = hvd.elastic.TensorFlowKerasState(m, epoch=0)
    state.sync()  # rank 0's weights everywhere
    assert same_everywhere(m)
    np.testing.assert_array_equal(m.get_weights()[0], model_of(0).get_weights()[0])
    committed = [w.copy() for w in m.get_weights()]
    state.epoch = 3
    state.commit()
    m.set_weights([w + 1.0 for w in m.get_weights()])
    state.epoch = 4
    state.restore()
    assert state.epoch == 3
    for got, want in zip(m.get_weights(), committed):
        np.testing.assert_array_equal(got, want)


def test_run_recovers_from_an_unknown_error_through_a_new_job():
    n = hvd.size()
    m = model_of(hvd.rank())
    state = hvd.elastic.TensorFlowKerasState(m, step=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        while state.step < 4:
            state.step += 1
            if state.step % 2 == 0:
                state.commit()
            if state.step == 3 and len(calls) == 1:
                # What a collective of a broken job raises.
                raise tf.errors.UnknownError(None, None, "HorovodAllreduce: a peer was lost")
            if state.step == 3 and len(calls) == 2:
                raise HorovodInternalError("a worker was lost (simulated)")
        return state.step

    assert train(state) == 4
    assert calls == [0, 2, 2]
    assert hvd.size() == n
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum)  # the new job works, named or not
    np.testing.assert_array_equal(got.numpy(), [n, n])


def test_keras_callbacks_keep_the_state_current():
    n, me = hvd.size(), hvd.rank()
    m = model_of(0)
    m.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    state = hvdk.elastic.KerasState(m, batch=0, epoch=0)
    commits = []
    state.register_reset_callbacks([])
    real_commit = state.commit

    def commit():
        commits.append((state.epoch, state.batch))
        real_commit()
    state.commit = commit
    x = np.ones((4 * 3, 3), np.float32) * (me + 1)
    y = np.zeros((4 * 3, 2), np.float32)

    @hvdk.elastic.run
    def train(state):
        m.fit(x, y, batch_size=4, epochs=2, initial_epoch=state.epoch, verbose=0, shuffle=False,
              callbacks=[hvdk.elastic.UpdateBatchStateCallback(state),
                         hvdk.elastic.UpdateEpochStateCallback(state),
                         hvdk.elastic.CommitStateCallback(state, batches_per_commit=2)])
    train(state)
    assert (state.epoch, state.batch) == (2, 0)
    # Every 2 batches (after batch 2 of each epoch), then at each epoch's end.
    assert commits == [(0, 2), (1, 0), (1, 2), (2, 0)]
    assert same_everywhere(m)
