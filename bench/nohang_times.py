#!/usr/bin/env python3
"""bench/nohang-times: how long a job that cannot go on takes to end, per
case, in hvd (C and each binding), with torch.distributed's gloo and with
JAX's own multi-process collectives, and with real Horovod
(horovod.torch over Gloo, under horovodrun, bench/nohang_horovod.py) when
HVD_HOROVOD_VENV (default ~/.cache/hvd/venv-horovod, bench/horovod-venv.sh)
has it.

    nohang_times.py BUILD_DIR VENV_PYTHON RUNS CAP [START [ONLY]]

Each case is one hvdrun job, run RUNS times one after another; a run's
time is the slowest rank's "ended ... after T s" (tests/mpi/nohang.c and
tests/nohang/frameworks.py print it, T from the cause: the last
collective that completed); a job one of whose ranks the framework
ended itself (a signal other than hvdrun's SIGKILL) and whose rank said
"rank R: cause at T" (bench/nohang_jax.py: JAX may abort the process)
counts hvdrun's exit too, timed from T, ended by the signal hvdrun names.  A job still waiting CAP + START seconds
after it started (START, 30 by default, for its imports and start-up) is
ended and counted as "> CAP"; env NOHANG_LOG=FILE appends each run's
output there.  ONLY: a regular expression; only the
cases whose "who: case" it finds run.  Prints a Markdown table: median and max
per case, and what ended it.
"""
import os
import re
import socket
import statistics
import subprocess
import sys
import time

LINE = re.compile(r"^\[(\d+)\]<stdout>:rank (\d+): ended (\w+) after ([\d.]+) s")
CAUSE = re.compile(r"^\[\d+\]<stdout>:rank \d+: cause at ([\d.]+)$")
KILLED = re.compile(r"^hvdrun: rank \d+ .*was killed by signal \d+ \(([\w ]+)\)", re.M)
HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = os.path.join(HERE, "..", "tests", "nohang", "frameworks.py")
TCP = {"HOROVOD_SHM_DISABLE": "1"}


def horovod_cases():
    """Real Horovod's cases, each with its launcher: horovodrun --gloo."""
    venv = os.environ.get("HVD_HOROVOD_VENV",
                          os.path.expanduser("~/.cache/hvd/venv-horovod"))
    if not os.path.exists(os.path.join(venv, "bin", "horovodrun")):
        return []
    peer = [os.path.join(venv, "bin", "python"), os.path.join(HERE, "nohang_horovod.py")]

    def launch(np):
        return [os.path.join(venv, "bin", "horovodrun"), "-np", str(np), "-H",
                "localhost:%d" % np, "--gloo"]
    who = "Horovod 0.28.1 (Gloo)"
    # horovodrun forwards the ranks' lines through Python's buffered stdout:
    # unbuffered, they reach the pipe before a job past the cap is killed.
    out = {"PYTHONUNBUFFERED": "1"}
    stall = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"
    return [
        ("a stopped rank (SIGSTOP)", who, 2, peer + ["frozen"], out, launch),
        ("different tensors (desync)", who, 2, peer + ["desync"], out, launch),
        ("different tensors (desync), %s=10" % stall, who, 2, peer + ["desync"],
         dict(out, **{stall: "10"}), launch),
        ("different tensors (desync), HOROVOD_STALL_CHECK_TIME_SECONDS=5, %s=10" % stall, who,
         2, peer + ["desync"], dict(out, HOROVOD_STALL_CHECK_TIME_SECONDS="5", **{stall: "10"}),
         launch),
    ]


def cases(build, venv):
    nohang = os.path.join(build, "tests", "nohang")
    gloo = os.path.join(HERE, "nohang_gloo.py")
    jax = os.path.join(HERE, "nohang_jax.py")
    return horovod_cases() + [
        ("different tensors (desync)", "hvd, C", 2, [nohang, "desync"], {}),
        ("different tensors (desync)", "hvd, C", 4, [nohang, "desync"], {}),
        ("different orders", "hvd, C", 4, [nohang, "order"], {}),
        ("different tensors (desync)", "hvd.torch", 2, [venv, FRAMEWORKS, "torch", "desync"], {}),
        ("different tensors, jax.jit", "hvd.jax", 2, [venv, FRAMEWORKS, "jax", "desync"], {}),
        ("different tensors, tf.function", "hvd.tensorflow", 2,
         [venv, FRAMEWORKS, "tensorflow", "graph"], {}),
        ("allreduce against allgather, eager", "hvd.tensorflow", 2,
         [venv, FRAMEWORKS, "tensorflow", "desync"], {}),
        ("allreduce against allgather", "torch.distributed gloo", 2,
         [venv, gloo, "desync"], {}),
        ("gathers of different sizes", "JAX (jax.distributed, Gloo)", 2,
         [venv, jax, "desync"], {}),
        ("a stopped rank (SIGSTOP), shared memory", "hvd, C", 2, [nohang, "frozen"], {}),
        ("a stopped rank (SIGSTOP), TCP", "hvd, C", 3, [nohang, "frozen"], TCP),
        ("a rank whose engine thread is stuck, TCP", "hvd, C", 3, [nohang, "stuck"], TCP),
        ("a stopped rank (SIGSTOP)", "torch.distributed gloo", 2, [venv, gloo, "frozen"], {}),
        ("a stopped rank (SIGSTOP)", "JAX (jax.distributed, Gloo)", 2, [venv, jax, "frozen"],
         {}),
    ]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(build, np, argv, knobs, cap, start, launch=None):
    """(seconds or None past the cap, the exception or code named); launch(np):
    the launcher's argv (hvdrun -np NP by default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(knobs, NOHANG_GLOO_PORT=str(free_port()), OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(build, "python"))
    launcher = launch(np) if launch else [os.path.join(build, "hvdrun"), "-np", str(np)]
    p = subprocess.Popen(launcher + argv, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=cap + start)
        ended_at = time.monotonic()
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        ended_at = None
    if os.environ.get("NOHANG_LOG"):  # every run's output, to read what it printed
        with open(os.environ["NOHANG_LOG"], "a") as f:
            f.write("==== %s\n%s\n---- stderr\n%s\n" % (" ".join(launcher + argv), out, err))
    ended = [(float(m.group(4)), m.group(3)) for m in map(LINE.match, out.splitlines()) if m]
    causes = [float(m.group(1)) for m in map(CAUSE.match, out.splitlines()) if m]
    # A rank that the framework ended itself (hvdrun's own SIGKILL of the
    # stopped rank aside): the job's end, from the cause.
    aborted = [k for k in KILLED.findall(err) if k != "Killed"]
    if causes and ended_at is not None and aborted:
        ended.append((ended_at - min(causes), "process %s" % aborted[0].lower()))
    if not ended or max(ended)[0] > cap:
        return None, "not ended"
    return max(ended)


def shown(seconds, cap):
    return "> %g" % cap if seconds == float("inf") else "%.2f" % seconds


def main():
    build, venv, runs, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    start = float(sys.argv[5]) if len(sys.argv) > 5 else 30
    only = re.compile(sys.argv[6] if len(sys.argv) > 6 else "")
    load = os.getloadavg()
    print("Generated by `bench/nohang-times` on %s (%d CPUs): %d runs a case, cap %g s; load "
          "average before %.2f %.2f %.2f.\n" % (time.strftime("%Y-%m-%d"), os.cpu_count(),
                                                 runs, cap, *load))
    print("| case | who | np | median (s) | max (s) | ended by |")
    print("|---|---|---:|---:|---:|---|")
    for what, who, np, argv, knobs, *launch in cases(build, venv):
        if not only.search("%s: %s" % (who, what)):
            continue
        got = [one_run(build, np, argv, knobs, cap, start, *launch) for _ in range(runs)]
        times = sorted(float("inf") if t is None else t for t, _ in got)
        names = sorted({n for _, n in got})
        med, max_ = (shown(times[len(times) // 2], cap), shown(times[-1], cap))
        print("| %s | %s | %d | %s | %s | %s |" % (what, who, np, med, max_, ", ".join(names)),
              flush=True)
    print("\nLoad average after: %.2f %.2f %.2f." % os.getloadavg())


if __name__ == "__main__":
    main()
