#!/usr/bin/env python3
"""The peer for bench/nohang-times: the same two broken jobs with
torch.distributed's gloo backend and its defaults, no hvd.

    python nohang_gloo.py desync|frozen

Run under hvdrun (HOROVOD_RANK/SIZE give the rank; rank 0's port comes
from NOHANG_GLOO_PORT).  desync: even ranks all_reduce, odd ranks
all_gather (as the eager TensorFlow case: collectives that cannot pair);
frozen: the last rank stops itself (SIGSTOP) while the others loop on an
all_reduce.  Each rank prints tests/nohang's line, "rank R: ended
EXCEPTION after T s: MESSAGE", when its call fails, or nothing while it
waits (the benchmark then ends the job at its cap).
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def main(mode):
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % os.environ[
        "NOHANG_GLOO_PORT"], rank=rank, world_size=size)
    x = torch.ones(1)
    dist.all_reduce(x)
    t0 = time.monotonic()
    try:
        if mode == "desync":
            if rank % 2 == 0:
                dist.all_reduce(x)
            else:
                dist.all_gather([torch.zeros(1) for _ in range(size)], x)
        else:
            if rank == size - 1:
                os.kill(os.getpid(), signal.SIGSTOP)
            while True:
                dist.all_reduce(x)
                t0 = time.monotonic()
    except Exception as e:  # noqa: BLE001 -- the class is what the table shows
        print("rank %d: ended %s after %.2f s: %s" % (rank, type(e).__name__,
                                                       time.monotonic() - t0,
                                                       " ".join(str(e).split())[:200]), flush=True)
        return 3
    print("rank %d: completed after %.2f s" % (rank, time.monotonic() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
