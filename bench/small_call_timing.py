"""What bench/eager-small-call's Python parts share: per-call microseconds
of a call, the median over batches, after one untimed batch."""
import time


def per_call_us(fn, calls, batches, fewest=int, batch_s=0.5):
    """(median, best, CPU) over `batches` batches of `calls` calls of
    fn(), in us per call, after one untimed batch: the median and the best
    batch's wall-clock time (on a loaded machine the best is the steadier),
    and the median batch's CPU time of the whole process (every thread:
    what a call costs the machine, whoever waits for a core).  A call slow
    enough that a batch would take over batch_s seconds gets fewer calls a
    batch (at least 20), so that a slow path is timed in about the time of
    a fast one; fewest(n) is the least n of the job's ranks (an allreduce
    with Min), so that every rank makes as many calls."""
    def batch(n):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e6, (time.process_time() - c0) / n * 1e6

    first = batch(min(calls, 20))[0]
    calls = fewest(max(min(calls, 20), min(calls, int(batch_s * 1e6 / max(first, 1e-3)))))
    batch(calls)  # untimed
    timed = [batch(calls) for _ in range(batches)]
    wall = sorted(w for w, _ in timed)
    cpu = sorted(c for _, c in timed)
    return wall[batches // 2], wall[0], cpu[batches // 2]


def report(label, us):
    """A "label,median,best,cpu" line: per_call_us()'s result."""
    print("%s,%.2f,%.2f,%.2f" % ((label,) + tuple(us)), flush=True)
