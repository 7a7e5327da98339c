"""What bench/eager-small-call's Python parts share: per-call microseconds
of a call, the median over batches, after one untimed batch."""
import time


def per_call_us(fn, calls, batches, batch_s=0.5):
    """(median, best) over `batches` batches of `calls` calls of fn(), in
    us per call, after one untimed batch (on a loaded machine the best
    batch is the steadier of the two); a call slow enough that a batch
    would take over batch_s seconds gets fewer calls a batch (at least
    20), so that a slow path is timed in about the time of a fast one."""
    def batch(n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e6

    first = batch(min(calls, 20))
    calls = max(min(calls, 20), min(calls, int(batch_s * 1e6 / max(first, 1e-3))))
    batch(calls)  # untimed
    us = sorted(batch(calls) for _ in range(batches))
    return us[batches // 2], us[0]


def report(label, us):
    """A "label,median,best" line: per_call_us()'s result."""
    print("%s,%.2f,%.2f" % ((label,) + tuple(us)), flush=True)
