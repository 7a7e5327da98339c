"""What the fast-path tests of the bindings share (test_torch_fastpath,
test_tf_fastpath, test_jax_fastpath): a binding's fast path switched off
for a block, a block's count of fast calls asserted, and one call made on
both paths."""
import contextlib


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


def both_paths(hvd, mpi_ops, outcome, call, ops, factors):
    """[(outcome(call(**kw)) on the fast path, the same on the general
    path)] for every op (by its name in the binding hvd) and every
    (prescale, postscale) in factors: compared after every rank made its
    calls."""
    results = []
    for opname in ops:
        for pre, post in factors:
            kw = dict(op=getattr(hvd, opname), prescale_factor=pre, postscale_factor=post)
            fast = outcome(lambda: call(**kw))
            with general_path(mpi_ops):
                general = outcome(lambda: call(**kw))
            results.append((fast, general))
    return results
