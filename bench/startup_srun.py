"""hvd_init's start-up under srun, run inside a host of the emulated
cluster by bench/startup-srun.

Usage: startup_srun.py BUILD_DIR HOSTS SLOTS REPS

Each run is `srun -N HOSTS --ntasks-per-node=SLOTS launch_probe` (plain, and
with --mpi=pmix); every task prints the wall-clock time it started and the
time its hvd_init returned (tests/mpi/launch_probe.c).  Printed, medians
over REPS runs: from the last task's start to the last hvd_init's return
(the target: under 1 s), and srun's whole run.
"""
import os
import re
import statistics
import subprocess
import sys
import time

LINE = re.compile(r"start_ns (\d+) init_ns (\d+)")


def once(build, hosts, slots, mpi):
    env = dict(os.environ)
    env["_HOROVOD_SECRET_KEY"] = subprocess.run(
        [os.path.join(build, "hvdrun"), "--make-secret"], capture_output=True, text=True,
        check=True).stdout.strip()
    argv = ["srun", *mpi, "-N", str(hosts), "--ntasks-per-node=%d" % slots,
            os.path.join(build, "tests", "launch_probe")]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    took = time.monotonic() - t0
    got = [tuple(map(int, m.groups())) for m in LINE.finditer(r.stdout)]
    if r.returncode != 0 or len(got) != hosts * slots:
        sys.exit("srun failed (exit %d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    last_start = max(s for s, _ in got)
    last_init = max(i for _, i in got)
    return (last_init - last_start) / 1e9, took


def main():
    build, hosts, slots, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    for name, mpi in (("srun", []), ("srun --mpi=pmix", ["--mpi=pmix"])):
        runs = [once(build, hosts, slots, mpi) for _ in range(reps)]
        init = statistics.median(r[0] for r in runs)
        whole = statistics.median(r[1] for r in runs)
        print("%s -N %d --ntasks-per-node=%d: hvd_init returned %.3f s after the last task "
              "started (median of %d; worst %.3f s), the whole srun %.3f s" % (
                  name, hosts, slots, init, reps, max(r[0] for r in runs), whole))


if __name__ == "__main__":
    main()
