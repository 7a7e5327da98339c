"""hvd.tensorflow's collectives: every op eagerly, inside tf.function and in
a TensorFlow 1 graph (a session), exact against numpy references computed
from every rank's input (facts from Horovod's test_tensorflow.py: values,
dtypes, shapes, Horovod's splits)."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from rank_data import rank_input
from tf_modes import MODES, run

DTYPES = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16, tf.bfloat16,
          tf.float32, tf.float64]


def cast(x, dtype):
    return tf.cast(x, dtype) if dtype != tf.bool else tf.not_equal(x, 0)


def as_f64(a):
    return np.asarray(a, np.float64) if np.asarray(a).dtype != np.bool_ else np.asarray(a)


def inputs(shape, seed, n=None):
    return [rank_input(shape, np.int64, r, seed) for r in range(n or hvd.size())]


def rows_of(dim0, n):
    """Horovod's reducescatter split: rank r gets dim0 // n rows, one more
    when r < dim0 % n."""
    return [dim0 // n + (1 if r < dim0 % n else 0) for r in range(n)]


@pytest.mark.parametrize("dtype", DTYPES + [tf.bool])
def test_allreduce_sum_every_dtype(dtype):
    ins = inputs((3, 4), 1)
    if dtype == tf.bool:  # Sum of booleans is their logical or
        got = run("eager", lambda x: hvd.allreduce(tf.equal(x % 2, 1), op=hvd.Sum),
                  ins[hvd.rank()])
        want = np.any(np.array(ins) % 2 == 1, axis=0)
    else:
        got = run("eager", lambda x: hvd.allreduce(tf.cast(x, dtype), op=hvd.Sum),
                  ins[hvd.rank()])
        want = np.sum(ins, axis=0)
    assert got.dtype == dtype.as_numpy_dtype and got.shape == (3, 4)
    np.testing.assert_array_equal(as_f64(got), as_f64(want))


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_ops_scales_compression(mode):
    ins = inputs((6,), 2)

    def fn(x):
        f = tf.cast(x, tf.float32)
        return (hvd.allreduce(f), hvd.allreduce(x, op=hvd.Min), hvd.allreduce(x, op=hvd.Max),
                hvd.allreduce(x, op=hvd.Product),
                hvd.allreduce(f, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25),
                hvd.allreduce(f, average=False, compression=hvd.Compression.fp16))
    avg, mn, mx, prod, scaled, comp = run(mode, fn, ins[hvd.rank()])
    np.testing.assert_allclose(avg, np.mean(ins, axis=0), rtol=1e-6)
    np.testing.assert_array_equal(mn, np.min(ins, axis=0))
    np.testing.assert_array_equal(mx, np.max(ins, axis=0))
    np.testing.assert_array_equal(prod, np.prod(ins, axis=0))
    np.testing.assert_array_equal(scaled, np.sum(ins, axis=0) * 0.5)
    assert comp.dtype == np.float32
    np.testing.assert_array_equal(comp, np.sum(ins, axis=0))


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_of_two_dtypes_and_indexed_slices(mode):
    a, b, v = inputs((4,), 3), inputs((2, 3), 4), inputs((2, 3), 5)
    n, me = hvd.size(), hvd.rank()

    def fn(x, y, z):
        sl = tf.IndexedSlices(tf.cast(z, tf.float32), tf.constant([me, me + 1]),
                              tf.constant([n + 1, 3]))
        out = hvd.grouped_allreduce([tf.cast(x, tf.float32), y, sl], op=hvd.Sum)
        avg = hvd.grouped_allreduce([sl])[0]
        return out[0], out[1], out[2].values, out[2].indices, avg.values
    ga, gb, values, idx, avg_values = run(mode, fn, a[me], b[me], v[me])
    np.testing.assert_array_equal(ga, np.sum(a, axis=0))
    assert gb.dtype == np.int64
    np.testing.assert_array_equal(gb, np.sum(b, axis=0))
    np.testing.assert_array_equal(values, np.concatenate(v))  # allgathered, as Horovod
    np.testing.assert_array_equal(idx, [i for r in range(n) for i in (r, r + 1)])
    np.testing.assert_allclose(avg_values, np.concatenate(v) / n, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_of_indexed_slices_is_an_allgather(mode):
    n, me = hvd.size(), hvd.rank()
    vals = [rank_input((r + 1, 2), np.float32, r, 6) for r in range(n)]

    def fn(x):
        sl = tf.IndexedSlices(x, tf.range(me + 1), tf.constant([n, 2]))
        s, a = hvd.allreduce(sl, op=hvd.Sum), hvd.allreduce(sl)
        return s.values, s.indices, a.values, tf.convert_to_tensor(a)
    values, idx, avg, dense = run(mode, fn, vals[me])
    np.testing.assert_array_equal(values, np.concatenate(vals))
    np.testing.assert_array_equal(idx, [i for r in range(n) for i in range(r + 1)])
    np.testing.assert_allclose(avg, np.concatenate(vals) / n, rtol=1e-6)
    want = np.zeros((n, 2))
    for r in range(n):
        want[:r + 1] += vals[r] / n
    np.testing.assert_allclose(dense, want, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [tf.int8, tf.float16, tf.float64])
def test_allgather_of_different_first_dimensions(mode, dtype):
    n, me = hvd.size(), hvd.rank()
    ins = [rank_input((r + 1, 2, 3), np.int64, r, 7) for r in range(n)]
    got = run(mode, lambda x: hvd.allgather(cast(x, dtype)), ins[me])
    assert got.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(as_f64(got), np.concatenate(ins))


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allgather_and_empty_allgather(mode):
    n, me = hvd.size(), hvd.rank()
    a = [rank_input((r + 1, 2), np.int64, r, 8) for r in range(n)]
    b = [rank_input((2,), np.int64, r, 9) for r in range(n)]

    def fn(x, y):
        ga, gb = hvd.grouped_allgather([tf.cast(x, tf.float32), tf.cast(y, tf.float32)])
        return ga, gb, hvd.allgather(tf.zeros([0, 3]))
    ga, gb, empty = run(mode, fn, a[me], b[me])
    np.testing.assert_array_equal(ga, np.concatenate(a))
    np.testing.assert_array_equal(gb, np.concatenate(b))
    assert empty.shape == (0, 3)


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_from_every_root(mode):
    n, me = hvd.size(), hvd.rank()
    ins = inputs((2, 3), 10)

    def fn(x):
        return [hvd.broadcast(cast(x, dt), root)
                for root in range(n) for dt in (tf.int16, tf.bfloat16, tf.bool)]
    got = run(mode, fn, ins[me])
    for k, g in enumerate(got):
        root, dt = divmod(k, 3)
        want = ins[root] if dt < 2 else ins[root] != 0
        np.testing.assert_array_equal(as_f64(g), as_f64(want))


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_with_splits_equal_parts_and_empty(mode):
    n, me = hvd.size(), hvd.rank()
    # Rank r sends (r + d) % 3 rows to rank d (some none at all); a row
    # says (sender, row).
    splits = [[(r + d) % 3 for d in range(n)] for r in range(n)]
    rows = [np.array([[100 * r + i, -i] for i in range(sum(splits[r]))], np.int64).reshape(-1, 2)
            for r in range(n)]

    def fn(x, s, e):
        out, received = hvd.alltoall(tf.cast(x, tf.int32), splits=s)
        return out, received, hvd.alltoall(e), hvd.alltoall(tf.zeros([0, 2]))
    out, received, equal, empty = run(mode, fn, rows[me], np.array(splits[me], np.int32),
                                      np.arange(2 * n, dtype=np.float64) + 10 * me)
    want = [rows[r][sum(splits[r][:me]):sum(splits[r][:me + 1])] for r in range(n)]
    np.testing.assert_array_equal(out.reshape(-1, 2), np.concatenate(want))
    np.testing.assert_array_equal(received, [splits[r][me] for r in range(n)])
    np.testing.assert_array_equal(equal, [10 * r + 2 * me + k for r in range(n) for k in range(2)])
    assert empty.shape == (0, 2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim0", [4, 5])
def test_reducescatter_horovods_split(mode, dim0):
    n, me = hvd.size(), hvd.rank()
    ins = inputs((dim0, 3), 11)
    rows = rows_of(dim0, n)
    start = sum(rows[:me])

    def fn(x):
        f = tf.cast(x, tf.float32)
        return (hvd.reducescatter(f, op=hvd.Sum), hvd.reducescatter(f),
                hvd.reducescatter(f, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0))
    total, avg, scaled = run(mode, fn, ins[me])
    want = np.sum(ins, axis=0)[start:start + rows[me]]
    np.testing.assert_array_equal(total, want)
    np.testing.assert_allclose(avg, want / n, rtol=1e-6)
    np.testing.assert_array_equal(scaled, want * 2.0)


@pytest.mark.parametrize("mode", MODES)
def test_grouped_reducescatter(mode):
    n, me = hvd.size(), hvd.rank()
    c, d = inputs((5, 2), 12), inputs((2 * n,), 13)
    rc, rd = run(mode, lambda x, y: hvd.grouped_reducescatter(
        [tf.cast(x, tf.int32), tf.cast(y, tf.int32)], op=hvd.Sum), c[me], d[me])
    rows = rows_of(5, n)
    start = sum(rows[:me])
    np.testing.assert_array_equal(rc, np.sum(c, axis=0)[start:start + rows[me]])
    np.testing.assert_array_equal(rd, np.sum(d, axis=0)[2 * me:2 * me + 2])


@pytest.mark.parametrize("mode", MODES)
def test_queries(mode):
    got = run(mode, lambda: (hvd.size_op(), hvd.rank_op(), hvd.local_size_op(),
                             hvd.local_rank_op(), hvd.process_set_included_op()))
    assert [int(v) for v in got] == [hvd.size(), hvd.rank(), hvd.local_size(),
                                     hvd.local_rank(), 1]


def test_join_and_barrier():
    hvd.barrier()
    assert int(hvd.join().numpy()) in range(hvd.size())
    # A rank that joins early: the others' allreduces count it as zeros.
    if hvd.rank() == 0:
        last = hvd.join()
    else:
        got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.join")
        np.testing.assert_array_equal(got.numpy(), [hvd.size() - 1] * 2)
        last = hvd.join()
    assert int(last.numpy()) in range(hvd.size())


def test_more_collectives_than_threads():
    """TensorFlow has one inter-op thread here (conftest).  A step holds 24
    allreduces; each rank makes its inputs ready in a different order
    (chains of multiplications by a variable, long for the first tensors on
    even ranks and for the last on odd ones).  A kernel that held the
    thread while waiting for the others would wait forever on the first
    tensor it reached; hvd's kernels return after enqueueing."""
    n = 24
    one = tf.Variable(1.0)
    flip = hvd.rank() % 2 == 1

    @tf.function
    def step(xs):
        outs = []
        for i, x in enumerate(xs):
            for _ in range((n - i) if not flip else (i + 1)):
                x = x * one
            outs.append(hvd.allreduce(x, op=hvd.Sum, name="many.%d" % i))
        return outs
    xs = [tf.fill([7], float(i + hvd.rank())) for i in range(n)]
    outs = step(xs)
    s = hvd.size()
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o.numpy(), [s * i + s * (s - 1) / 2] * 7)
