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
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "nohang"))
from frameworks import completed, ended, frozen  # noqa: E402  (tests/nohang's lines)

import torch
import torch.distributed as dist


def main(mode):
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % os.environ[
        "NOHANG_GLOO_PORT"], rank=rank, world_size=size)
    x = torch.ones(1)
    dist.all_reduce(x)
    if mode != "desync":
        return frozen(lambda: dist.all_reduce(x), rank, size)
    t0 = time.monotonic()
    try:
        if rank % 2 == 0:
            dist.all_reduce(x)
        else:
            dist.all_gather([torch.zeros(1) for _ in range(size)], x)
    except Exception as e:  # noqa: BLE001 -- the class is what the table shows
        return ended(rank, e, t0)
    return completed(rank, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
