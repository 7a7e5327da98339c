"""Process sets in hvd.tensorflow, as horovod.tensorflow's (facts from
Horovod's test_tensorflow_process_sets.py and _dynamic.py): sets given to
init() (static) and added and removed later (HOROVOD_DYNAMIC_PROCESS_SETS,
which conftest sets; hvd does not need it), every op's process_set=,
eagerly and in a graph, the set's size and membership ops, broadcasts of
variables and objects within a set, and gradients within a set."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from tf_modes import MODES, run


@pytest.fixture
def even_odd():
    """The job re-formed with an even and an odd set given to init(), as
    Horovod's suite sets them up; the plain job again afterwards.  (A
    shutdown stops every rank's engine: the ranks meet in a barrier first,
    as Horovod's suite does in its tearDown.)"""
    n = hvd.size()
    evens, odds = hvd.ProcessSet(range(0, n, 2)), hvd.ProcessSet(range(1, n, 2))
    hvd.barrier()
    hvd.shutdown()
    hvd.init(process_sets=[evens, odds] if n > 1 else [evens])
    yield (evens if hvd.rank() % 2 == 0 else odds)
    hvd.barrier()
    hvd.shutdown()
    hvd.init()


@pytest.mark.parametrize("mode", MODES)
def test_every_op_within_a_set(mode, even_odd):
    ps, me = even_odd, hvd.rank()
    ranks = ps.ranks

    def fn(x):
        f = tf.cast(x, tf.float32)
        out, received = hvd.alltoall(f, splits=[1] * len(ranks), process_set=ps)
        return (hvd.allreduce(f, op=hvd.Sum, process_set=ps),
                hvd.grouped_allreduce([f, f * 2], op=hvd.Sum, process_set=ps),
                hvd.allgather(f, process_set=ps),
                hvd.grouped_allgather([f], process_set=ps)[0],
                hvd.broadcast(f, ranks[-1], process_set=ps),
                out, received,
                hvd.reducescatter(tf.tile(f, [len(ranks)]), op=hvd.Sum, process_set=ps),
                hvd.size_op(process_set_id=ps.process_set_id),
                hvd.process_set_included_op(process_set_id=ps.process_set_id))
    x = np.full([len(ranks)], me, np.int64)
    total, grouped, gathered, ggathered, bcast, out, received, scattered, size, inc = \
        run(mode, fn, x)
    s = float(sum(ranks))
    np.testing.assert_array_equal(total, [s] * len(ranks))
    np.testing.assert_array_equal(grouped[1], [2 * s] * len(ranks))
    np.testing.assert_array_equal(gathered, np.repeat(ranks, len(ranks)))
    np.testing.assert_array_equal(ggathered, gathered)
    np.testing.assert_array_equal(bcast, [ranks[-1]] * len(ranks))
    np.testing.assert_array_equal(out, ranks)
    np.testing.assert_array_equal(received, [1] * len(ranks))
    np.testing.assert_array_equal(scattered, [s] * len(ranks))
    assert int(size) == len(ranks) == ps.size() and int(inc) == 1


def test_membership_and_objects_within_a_set(even_odd):
    ps, me, n = even_odd, hvd.rank(), hvd.size()
    for ranks in (range(0, n, 2), range(1, n, 2)):
        ids = {i for i, r in hvd.mpi_ops._basics._get_process_set_ids_and_ranks().items()
               if i and r == list(ranks)}
        for i in ids:
            assert int(hvd.process_set_included_op(i).numpy()) == int(me in ranks)
    root = ps.ranks[0]
    assert hvd.broadcast_object(("from", me), root_rank=root, process_set=ps) == ("from", root)
    assert hvd.allgather_object(me, process_set=ps) == ps.ranks
    v = tf.Variable([float(me)])
    hvd.broadcast_variables([v], root_rank=ps.ranks[-1], process_set=ps)
    assert v.numpy().tolist() == [float(ps.ranks[-1])]


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_gradients_within_a_set(mode, even_odd):
    ps, me = even_odd, hvd.rank()
    from test_tf_gradients import gradient
    root = ps.ranks[-1]

    def loss(x):
        return (tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum, process_set=ps)) * (me + 1.0)
                + tf.reduce_sum(hvd.allgather(x, process_set=ps)) * (me + 1.0)
                + tf.reduce_sum(hvd.broadcast(x, root, process_set=ps)) * (me + 1.0))
    g, = gradient(mode, loss, np.ones([2], np.float32))
    weights = [r + 1.0 for r in ps.ranks]
    want = sum(weights) + np.mean(weights) + (np.mean(weights) if me == root else 0.0)
    np.testing.assert_allclose(g, [want] * 2, rtol=1e-6)


def test_a_duplicate_set_is_refused():
    """Horovod's: adding a set whose ranks are a registered set's (the
    global one too) raises ValueError on every rank, and changes nothing."""
    n = hvd.size()
    with pytest.raises(ValueError, match="duplicate process set.*global"):
        hvd.add_process_set(list(reversed(range(n))))
    if n > 1:
        first = hvd.add_process_set([0])
        with pytest.raises(ValueError, match="duplicate process set"):
            hvd.add_process_set(hvd.ProcessSet([0]))
        assert hvd.remove_process_set(first) is True
    assert hvd.mpi_ops._basics._get_process_set_ids_and_ranks() == {0: list(range(n))}


def test_dynamic_sets():
    n, me = hvd.size(), hvd.rank()
    if n == 1:
        pytest.skip("every set of one rank is the global set at size 1")  # same on every rank
    assert hvd.mpi_ops._basics._get_process_set_ids_and_ranks() == {0: list(range(n))}
    first = hvd.add_process_set([0])
    rest = hvd.add_process_set(range(1, n)) if n > 1 else None
    sets = [first] + ([rest] if rest else [])
    assert hvd.mpi_ops._basics._get_process_set_ids_and_ranks() == {
        0: list(range(n)), **{s.process_set_id: s.ranks for s in sets}}
    ids = hvd.allgather(tf.constant([first.process_set_id])).numpy()
    assert (ids == first.process_set_id).all()  # the same id on every rank
    assert str(first) == "ProcessSet(process_set_id=%d, ranks=[0], mpi_comm=None)" % \
        first.process_set_id
    assert str(hvd.global_process_set) == \
        "ProcessSet(process_set_id=0, ranks=%s, mpi_comm=None)" % list(range(n))
    mine = first if me == 0 else rest
    got = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, process_set=mine)
    assert got.numpy().tolist() == [float(len(mine.ranks))]
    old = first.process_set_id
    hvd.remove_process_set(first)
    assert first.process_set_id is None
    assert old not in hvd.mpi_ops._basics._get_process_set_ids_and_ranks()
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(tf.constant([1.0]), process_set=first)
    hvd.add_process_set(first)  # added again
    assert first.process_set_id is not None
    for s in sets:
        assert hvd.remove_process_set(s) is True
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.mpi_ops._basics._get_process_set_ids_and_ranks() == {0: list(range(n))}
    fake = hvd.ProcessSet([0])
    fake.process_set_id = 1000  # never registered
    with pytest.raises(ValueError, match="1000 does not exist"):
        hvd.allreduce(tf.constant([1.0]), process_set=fake)
