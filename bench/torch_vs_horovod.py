#!/usr/bin/env python3
"""hvd.torch against real Horovod's horovod.torch (0.28.1, Gloo, CPU;
bench/horovod-venv.sh): allreduce_ of float32, op sum, in place, at np 2 on
this host, each under its own launcher, the same program for both.

    torch_vs_horovod.py BUILD_DIR [ROUNDS]   (the driver; env NP=2 BATCHES=7)
    torch_vs_horovod.py rank MODULE BATCHES  (each rank, run by the driver)

The driver runs ROUNDS rounds (3 by default), each one job of hvd.torch at
its defaults (hvdrun: shared memory on one host), one of hvd.torch over TCP
(HOROVOD_SHM_DISABLE=1) and one of horovod.torch (horovodrun --gloo:
Gloo's TCP over loopback), in turn, all with Horovod's venv python.  A
rank times, per size, BATCHES batches of CALLS calls back to back (after
one untimed call and a barrier each); a batch's time is its slowest
rank's, per call; a job reports the median batch; the table shows the
median over the rounds.  Prints a Markdown table.
"""
import importlib
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_bench_common import human  # noqa: E402

SIZES = [8, 4 << 10, 1 << 20, 16 << 20]
VENV = os.environ.get("HVD_HOROVOD_VENV", os.path.expanduser("~/.cache/hvd/venv-horovod"))


def calls_for(nbytes):
    return 200 if nbytes <= 4 << 10 else 20 if nbytes <= 1 << 20 else 3


def rank_main(module, batches):
    import torch
    hvd = importlib.import_module(module)
    torch.set_num_threads(1)
    hvd.init()
    for nbytes in SIZES:
        t, name, calls = torch.ones(nbytes // 4), "bench.%d" % nbytes, calls_for(nbytes)
        hvd.allreduce_(t, op=hvd.Sum, name=name)  # untimed
        mine = []
        for _ in range(batches):
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                hvd.allreduce_(t, op=hvd.Sum, name=name)
            mine.append((time.perf_counter() - t0) / calls)
        slowest = [max(b) for b in zip(*hvd.allgather_object(mine))]
        if hvd.rank() == 0:
            print("RESULT " + json.dumps([nbytes, statistics.median(slowest)]), flush=True)
    hvd.shutdown()


def job(build, who, np, batches):
    """{bytes: median seconds per call} of one job."""
    py = os.path.join(VENV, "bin", "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.path.join(build, "python"))
    if who == "horovod.torch":
        launcher = [os.path.join(VENV, "bin", "horovodrun"), "-np", str(np), "-H",
                    "localhost:%d" % np, "--gloo"]
    else:
        launcher = [os.path.join(build, "hvdrun"), "-np", str(np)]
        if who.endswith("TCP"):
            env["HOROVOD_SHM_DISABLE"] = "1"
    module = "horovod.torch" if who == "horovod.torch" else "hvd.torch"
    out = subprocess.run(launcher + [py, os.path.abspath(__file__), "rank", module,
                                     str(batches)], env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=600)
    got = dict(json.loads(line.split("RESULT ", 1)[1]) for line in out.stdout.splitlines()
               if "RESULT " in line)
    if len(got) != len(SIZES):
        sys.exit("%s failed (%d):\n%s\n%s" % (who, out.returncode, out.stdout[-2000:],
                                              out.stderr[-2000:]))
    return got


def main():
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    np, batches = int(os.environ.get("NP", "2")), int(os.environ.get("BATCHES", "7"))
    whos = ["hvd.torch", "hvd.torch, TCP", "horovod.torch"]
    load = os.getloadavg()
    runs = {w: [] for w in whos}
    for _ in range(rounds):
        for w in whos:
            runs[w].append(job(build, w, np, batches))
    med = {w: {n: statistics.median(r[n] for r in runs[w]) for n in SIZES} for w in whos}
    print("np %d on one host, float32, op sum, in place, %d CPUs, %s; median over %d "
          "alternating rounds of each job's median of %d batches (per call, slowest rank); "
          "load average before %.2f %.2f %.2f, after %.2f %.2f %.2f.\n"
          % (np, os.cpu_count(), time.strftime("%Y-%m-%d"), rounds, batches, *load,
             *os.getloadavg()))
    print("| size | hvd.torch, shm (ms) | hvd.torch, TCP (ms) | horovod.torch, Gloo (ms) "
          "| horovod/hvd shm | horovod/hvd TCP |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in SIZES:
        h, t, g = (med[w][n] * 1e3 for w in whos)
        print("| %s | %.3f | %.3f | %.3f | %.2f | %.2f |" % (human(n), h, t, g, g / h, g / t))


if __name__ == "__main__":
    if sys.argv[1] == "rank":
        rank_main(sys.argv[2], int(sys.argv[3]))
    else:
        main()
