"""What the fast-path tests of the bindings share (test_torch_fastpath,
test_tf_fastpath, test_jax_fastpath): a binding's fast path switched off
for a block, a block's count of fast calls asserted, and one call made on
both paths."""
import contextlib

# (op, prescale, postscale): every op, and factors that are not float32
# numbers (0.1, 1/3: TensorFlow's op rounds its attributes to float32)
CASES = [("Sum", 1.0, 1.0), ("Sum", 0.1, 1 / 3), ("Average", 0.5, 3), ("Min", 1.0, 1.0),
         ("Max", 1.0, 1.0), ("Product", 1.0, 1.0)]


@contextlib.contextmanager
def general_path(mpi_ops, general=True):
    """Every call of the block the general way (mpi_ops._fast_enabled
    off), when general; the fast path on again after it."""
    mpi_ops._fast_enabled = not general
    try:
        yield
    finally:
        mpi_ops._fast_enabled = True


@contextlib.contextmanager
def counted(fast_calls, expected):
    """Asserts that the block made `expected` fast calls (fast_calls():
    hvd._C's counter)."""
    before = fast_calls()
    yield
    assert fast_calls() - before == expected


def both_paths(hvd, mpi_ops, outcome, call, cases):
    """[(outcome(call(**kw)) on the fast path, the same on the general
    path)] for every (op's name in the binding hvd, prescale, postscale)
    in cases: compared after every rank made its calls."""
    results = []
    for opname, pre, post in cases:
        kw = dict(op=getattr(hvd, opname), prescale_factor=pre, postscale_factor=post)
        fast = outcome(lambda: call(**kw))
        with general_path(mpi_ops):
            general = outcome(lambda: call(**kw))
        results.append((fast, general))
    return results


def assert_paths_agree(hvd, mpi_ops, outcome, call, same):
    """same(fast, general) for both_paths()' every case, at least one of
    which must succeed."""
    pairs = both_paths(hvd, mpi_ops, outcome, call, CASES)
    for fast, general in pairs:
        same(fast, general)
    assert any(f[0] == "ok" for f, _ in pairs), pairs
