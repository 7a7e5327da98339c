"""Per-call microseconds of hvd.torch's allreduce forms on one small CPU
tensor (torch.ones(2)) at np 1, on the fast path (python/_C/fast.c) and
on the general path (mpi_ops._fast_enabled = False) in the same process,
and torch's add_ on the same tensor for scale (a build without the fast
path: its path only, which bench/eager-small-call labels "before:").  Run by
bench/eager-small-call under hvdrun; prints "form,us_per_call" lines:
the median over BATCHES batches of CALLS calls, after one untimed batch
(bench/small_call_timing.py)."""
import sys

import torch

import hvd.torch as hvd
from hvd.torch import mpi_ops
from small_call_timing import per_call_us, report


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    batches = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    torch.set_num_threads(1)
    hvd.init()
    t = torch.ones(2)

    def fewest(n):
        return int(hvd.allreduce(torch.tensor([n]), op=hvd.Min, name="bench.calls"))
    forms = [("allreduce_", lambda: hvd.allreduce_(t)),
             ("allreduce", lambda: hvd.allreduce(t)),
             ("allreduce_async_+synchronize", lambda: hvd.synchronize(hvd.allreduce_async_(t)))]
    paths = (("fast", True), ("general", False))
    if not hasattr(mpi_ops, "_fast_enabled"):  # a build from before the fast path
        paths = (("", False),)
    for path, fast in paths:
        mpi_ops._fast_enabled = fast
        for form, fn in forms:
            report(("%s hvd.torch %s" % (path, form)).strip(),
                   per_call_us(fn, calls, batches, fewest))
    mpi_ops._fast_enabled = True
    if len(paths) == 1:
        return
    report("torch add_", per_call_us(lambda: t.add_(1), calls, batches, fewest))
    hvd.shutdown()


if __name__ == "__main__":
    main()
