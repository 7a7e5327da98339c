#!/usr/bin/env python3
"""The JAX peer for bench/nohang-times: the same two broken jobs with JAX's
own multi-process collectives (jax.distributed, Gloo for the CPU
collectives, multihost_utils.process_allgather), no hvd.

    python nohang_jax.py desync|frozen

Run under hvdrun (HOROVOD_RANK/SIZE give the rank, rank 0's coordinator
port comes from NOHANG_GLOO_PORT).  desync: even ranks gather one float,
odd ranks three (collectives that cannot pair: JAX matches them by call
order, not by name); frozen: the last rank stops itself (SIGSTOP) while the
others loop on a gather.  Each rank prints tests/nohang's line, "rank R:
ended EXCEPTION after T s: MESSAGE", when its call raises; JAX may instead
end the process itself (abort), so the rank that sets the cause up first
prints "rank R: cause at T" (time.monotonic(), the machine's clock), from
which bench/nohang_times.py times the job's end.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "nohang"))
from frameworks import completed, ended, frozen  # noqa: E402  (tests/nohang's lines)

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402


def cause(rank):
    print("rank %d: cause at %.3f" % (rank, time.monotonic()), flush=True)


def main(mode):
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize("127.0.0.1:%s" % os.environ["NOHANG_GLOO_PORT"],
                               num_processes=size, process_id=rank)
    gather = multihost_utils.process_allgather
    x = np.ones(1, np.float32)
    gather(x)
    if mode != "desync":
        return frozen(lambda: gather(x), rank, size, before_stop=lambda: cause(rank))
    if rank == 0:
        cause(rank)
    t0 = time.monotonic()
    try:
        gather(x if rank % 2 == 0 else np.ones(3, np.float32))
    except Exception as e:  # noqa: BLE001 -- the class is what the table shows
        return ended(rank, e, t0)
    return completed(rank, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
