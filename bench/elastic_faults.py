#!/usr/bin/python3
"""The elastic driver under faults, on emulated hosts (bench/elastic-faults
brings the cluster up and runs this inside it).

  1. hvd-train-fashion-mnist --elastic, undisturbed: its test accuracy;
  2. the same run with KILLS random workers SIGKILLed at random moments:
     per kill the time from the kill to the first step of the new job
     (the trainer prints that moment, wall clock), the steps redone (done
     after the last commit, lost with the worker) and committed steps lost
     (must be 0); the final accuracy against run 1;
  3. a host taken out of the discovery listing, then put back: the time
     from the first discovery run that lists it again (hvdrun --verbose
     says so) to the first step of the job it is in;
  4. a 100 MB state (tests/mpi/elastic_worker with ELASTIC_STATE_MB):
     recovery after kills, and what commit, restore and sync cost
     (bench/elastic_state_cost.c).

Prints Markdown tables and a summary.  Usage (as bench/elastic-faults does):
  elastic_faults.py --build DIR --cluster tests/cluster/cluster.sh --esc PATH
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--build", required=True)
ap.add_argument("--cluster", required=True)
ap.add_argument("--esc", required=True, help="the built elastic_state_cost")
ap.add_argument("--hosts", type=int, default=4)
ap.add_argument("--kills", type=int, default=20)
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--seed", type=int, default=42)
ap.add_argument("--commit-interval", type=int, default=10)
ap.add_argument("--state-mb", type=int, default=100)
args = ap.parse_args()
random.seed(args.seed)

CLUSTER = args.cluster
SSH_CFG = subprocess.run([CLUSTER, "ssh-config"], capture_output=True, text=True,
                         check=True).stdout.strip()
HVDRUN = os.path.join(args.build, "hvdrun")
TRAINER = os.path.join(args.build, "hvd-train-fashion-mnist")
WORKER = os.path.join(args.build, "tests", "elastic_worker")
HOSTS = ["h%d" % i for i in range(args.hosts)]
work = tempfile.mkdtemp(prefix="hvd-elastic-bench.")
listing = os.path.join(work, "hosts")
script = os.path.join(work, "discover.sh")
with open(script, "w") as f:
    f.write("#!/bin/sh\ncat %s\n" % listing)
os.chmod(script, 0o755)


def put(hosts):
    with open(listing + ".new", "w") as f:
        f.write("".join("%s:1\n" % h for h in hosts))
    os.replace(listing + ".new", listing)


class Job:
    """hvdrun in h0; every line of its output stamped with its arrival."""

    def __init__(self, argv, env=None):
        e = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="10", **(env or {}))
        cmd = [CLUSTER, "exec", "h0", HVDRUN, "--verbose", "--ssh-command",
               "ssh -F %s" % SSH_CFG, "-np", str(len(HOSTS)), "--min-np", "2",
               "--host-discovery-script", script, "--blacklist-cooldown-range", "1", "2",
               *argv]
        self.p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, bufsize=1)
        self.lines = []  # (arrival, text)
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append((time.time(), line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, pattern, after=0.0, timeout=60.0):
        """The first line matching pattern that arrived after `after`:
        (arrival, match), or None."""
        end = time.time() + timeout
        rx = re.compile(pattern)
        with self.cond:
            while True:
                for t, line in self.lines:
                    m = rx.search(line)
                    if m and t >= after:
                        return t, m
                if self.p.poll() is not None and not self.reader.is_alive():
                    return None
                if time.time() > end:
                    return None
                self.cond.wait(0.2)

    def running(self):
        return self.p.poll() is None

    def finish(self):
        self.p.wait(timeout=900)
        self.reader.join()
        return "\n".join(line for _, line in self.lines)


def worker_pids(host, program):
    pids = subprocess.run([CLUSTER, "pids", host], capture_output=True, text=True).stdout.split()
    found = []
    for pid in pids:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read().split(b"\0")[0].endswith(program.encode()):
                    found.append(int(pid))
        except OSError:
            pass
    return found


def accuracy(text):
    m = re.findall(r"test_accuracy=([0-9.]+)", text)
    return float(m[-1]) if m else None


TRAIN = [TRAINER, "--elastic", "--epochs", str(args.epochs), "--seed", str(args.seed),
         "--commit-interval", str(args.commit_interval)]


def kill_random(job, program, events, kills, gen_pattern, resumed_pattern):
    """Kills a random worker `kills` times, each once the job recovered
    from the last; events get (recovery s, steps redone, committed lost)."""
    generation = 1
    job.wait_for(r"hvdrun: elastic: job 1 formed", timeout=120)
    for k in range(kills):
        time.sleep(random.uniform(1.5, 3.5))
        if not job.running():
            break
        hosts = [h for h in HOSTS if worker_pids(h, program)]
        if not hosts:
            continue
        host = random.choice(hosts)
        victims = worker_pids(host, os.path.basename(program))
        if not victims:
            continue
        t_kill = time.time()
        os.kill(victims[0], 9)
        got = job.wait_for(gen_pattern % r"(\d+)", after=t_kill, timeout=60)
        if not got:
            break
        t_first, m = got
        g = int(m.group(1))
        first = float(m.group(2))
        failed = [int(x) for x in re.findall(r"step (\d+) failed", "\n".join(
            line for t, line in job.lines if t >= t_kill and t <= t_first))]
        res = job.wait_for(resumed_pattern % g, after=t_kill, timeout=5)
        resumed = int(res[1].group(1)) if res else None
        redone = lost = None
        if failed and resumed is not None:
            done = max(failed) - 1
            committed = done - done % args.commit_interval
            redone = done - resumed
            lost = max(0, committed - resumed)
        events.append((k + 1, host, first - t_kill, redone, lost, g))
        generation = g
    return generation


def table(events, title):
    print("\n%s\n" % title)
    print("| kill | host | recovery (s) | steps redone | committed steps lost | job |")
    print("|---:|---|---:|---:|---:|---:|")
    for k, host, rec, redone, lost, g in events:
        print("| %d | %s | %.3f | %s | %s | %d |" % (k, host, rec, redone, lost, g))


# ---- 1. undisturbed ----
put(HOSTS)
print("elastic faults: %d hosts, trainer %s, commit every %d steps, seed %d" % (
    len(HOSTS), " ".join(TRAIN[1:]), args.commit_interval, args.seed), flush=True)
base = Job(TRAIN)
base_text = base.finish()
base_acc = accuracy(base_text)
print("undisturbed: test_accuracy=%s (exit %d)" % (base_acc, base.p.returncode), flush=True)

# ---- 2. random kills ----
job = Job(TRAIN)
events = []
kill_random(job, TRAINER, events, args.kills,
            r"elastic: generation %s: first step done at ([0-9.]+)",
            r"elastic: generation %d: \d+ ranks, from step (\d+)")
text = job.finish()
acc = accuracy(text)
table(events, "Kills (hvd-train-fashion-mnist --elastic, cnn):")
recs = [e[2] for e in events]

# ---- 3. a host out and back ----
job = Job(TRAIN[:3] + ["1"] + TRAIN[4:])
time.sleep(4)
t_out = time.time()
put(HOSTS[:-1])
out = job.wait_for(r"generation (\d+): %d ranks" % (len(HOSTS) - 1), after=t_out, timeout=60)
time.sleep(2)
t_back = time.time()
put(HOSTS)
disc = job.wait_for(r"hvdrun: elastic: discovery: %d usable slots" % len(HOSTS), after=t_back,
                    timeout=30)
joined = job.wait_for(r"elastic: generation (\d+): %d ranks" % len(HOSTS), after=t_back,
                      timeout=60)
first = job.wait_for(r"elastic: generation %s: first step done at ([0-9.]+)" %
                     (joined[1].group(1) if joined else "-1"), after=t_back, timeout=60)
job.finish()
host_add = (float(first[1].group(1)) - disc[0]) if disc and first else None

# ---- 4. a 100 MB state ----
big = Job([WORKER], {"ELASTIC_STATE_MB": str(args.state_mb), "ELASTIC_STEPS": "600",
                     "ELASTIC_STEP_MS": "20"})
big_events = []
kill_random(big, WORKER, big_events, 5, r"first step of job %s at ([0-9.]+)",
            r"job %d size \d+ rank 0 worker \S+ step (\d+)")
big.finish()
cost = subprocess.run([CLUSTER, "exec", "h0", HVDRUN, "--ssh-command", "ssh -F %s" % SSH_CFG,
                       "-np", str(len(HOSTS)), "-H", ",".join(h + ":1" for h in HOSTS),
                       args.esc, str(args.state_mb), "5"], capture_output=True, text=True)
cost_line = re.search(r"state_mb=.*", cost.stdout)
table(big_events, "Kills with a %d MB state (tests/mpi/elastic_worker):" % args.state_mb)

# ---- summary ----
print("\nSummary:")
if recs:
    print("- recovery after a kill: median %.3f s, max %.3f s over %d kills (target: median < 1, "
          "max < 2)" % (statistics.median(recs), max(recs), len(recs)))
lost = [e[4] for e in events if e[4] is not None]
print("- committed steps lost: %s; steps redone: %s in all" % (
    sum(lost) if lost else "n/a", sum(e[3] for e in events if e[3] is not None)))
print("- final accuracy: %s disturbed vs %s undisturbed (target: within 0.01)" % (acc, base_acc))
print("- a host listed again: first step of its job %s s after the discovery run that listed "
      "it (target < 2 s)" % ("%.3f" % host_add if host_add is not None else "n/a"))
big_recs = [e[2] for e in big_events]
if big_recs:
    print("- %d MB state: recovery median %.3f s, max %.3f s over %d kills" % (
        args.state_mb, statistics.median(big_recs), max(big_recs), len(big_recs)))
print("- %s" % (cost_line.group(0) if cost_line else "state cost: failed: %s" % cost.stderr[-500:]))
