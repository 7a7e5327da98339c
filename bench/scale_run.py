"""bench/scale's measurements (docs/scale.md), one CSV row per job.

Usage: scale_run.py BUILD OUT PART
  PART host:   NPS ranks on this host (shared memory), ROUNDS times each
  PART hosts:  HOSTS emulated hosts (tests/cluster/cluster.sh, HVD_CLUSTER_ID's
               cluster, brought up and down here, links shaped to RATE) x
               PER_HOST ranks, from h0; needs root
  PART elastic: an elastic job of 64 workers on 8 emulated hosts (8 each)
               loses its last host ROUNDS times (every process there
               killed): the time from the kill to the survivors' first
               step of the job they form without it; needs root

Each job size, in turn:
  start-up    from hvdrun's start to the first allreduce's return
              (tests/mpi/scale_probe, which also checks every collective,
              and says the most sockets and resident memory of any rank)
  cached      a 1 KiB float32 allreduce through the engine, the tensor in
              the response cache: hvd-bench's median µs and its rounds per
              call (--steps: the sendrecvs and shared-memory syncs)
  full        the same with HOROVOD_CACHE_CAPACITY=0: negotiated in full
  floor       (host) the same processes doing nothing but sleep-and-wake
              rounds (bench/wake_floor.c): the least a round can take when
              the ranks outnumber the cores
  busbw       (hosts) a 16 MiB allreduce's bus bandwidth against the link's

Writes OUT/PART.csv; prints what it runs on stderr.
"""
import csv
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLUSTER = os.path.join(ROOT, "tests", "cluster", "cluster.sh")
FIELDS = ["np", "hosts", "round", "startup_ms", "sockets", "rss_kb", "cached_us",
          "cached_rounds", "full_us", "full_rounds", "floor_us", "busbw_gbps", "ceiling_gbps"]
ENV = {"HOROVOD_START_TIMEOUT": "300", "HOROVOD_GLOO_TIMEOUT_SECONDS": "120"}


def say(*words):
    print("scale:", *words, file=sys.stderr, flush=True)


class Job:
    """hvdrun here, or inside h0 of the cluster against its ssh."""

    def __init__(self, build, hosts=None, per_host=0, ssh_config=None):
        self.build, self.hosts, self.per_host, self.ssh_config = build, hosts, per_host, ssh_config

    def argv(self, np, prog):
        argv = [os.path.join(self.build, "hvdrun"), "-np", str(np)]
        if self.hosts:
            argv += ["-H", ",".join("h%d:%d" % (h, self.per_host) for h in range(self.hosts)),
                     "--ssh-command", "ssh -F %s" % self.ssh_config]
        argv += prog
        return [CLUSTER, "exec", "h0"] + argv if self.hosts else argv

    def run(self, np, prog, timeout=1800, **env):
        e = dict(os.environ, **ENV, **env)
        p = subprocess.run(self.argv(np, prog), env=e, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            sys.exit("scale: %s failed (exit %d):\n%s%s" % (" ".join(prog), p.returncode,
                                                            p.stdout[-2000:], p.stderr[-2000:]))
        return p.stdout


def rank0(text, prefix):
    """Rank 0's line that starts with prefix, without hvdrun's tag."""
    for line in text.splitlines():
        if line.startswith("[0]<stdout>:" + prefix):
            return line[len("[0]<stdout>:"):]
    sys.exit("scale: no line '%s' from rank 0 in:\n%s" % (prefix, text[-2000:]))


def words(line):
    w = line.split()
    return {w[i]: w[i + 1] for i in range(1, len(w) - 1, 2)}


def startup(job, np):
    t0 = time.time()
    out = job.run(np, [os.path.join(job.build, "tests", "scale_probe")])
    times, state = words(rank0(out, "scale_probe: init_ms")), words(rank0(out, "scale_probe: sockets"))
    return {"startup_ms": "%.0f" % (int(times["first_unix_ms"]) - t0 * 1000),
            "sockets": state["sockets"], "rss_kb": state["rss_kb"]}


def bench(job, np, size, prefix, **env):
    """hvd-bench's allreduce of `size`: (µs, rounds per call, busbw GB/s)."""
    iters = "20" if np <= 64 else "5"
    out = job.run(np, [os.path.join(job.build, "hvd-bench"), "--op", "allreduce", "--min-bytes",
                       size, "--max-bytes", size, "--iters", iters, "--batches", "3", "--csv",
                       "--steps"], **env)
    row = rank0(out, "allreduce,").split(",")
    return {prefix + "_us": row[2], prefix + "_rounds": row[5]}, row[4]


def floor(np):
    exe = os.path.join(os.environ.get("OUT", "."), "wake_floor")
    out = subprocess.run([exe, str(np), "20" if np > 64 else "100"], capture_output=True,
                         text=True, check=True, timeout=600).stdout
    return "%.2f" % float(out.strip().split(",")[2])


def host_part(build, rounds, out_rows):
    job = Job(build)
    for r in range(1, rounds + 1):
        for np in [int(n) for n in os.environ.get("NPS", "16 32 64 128 256 512").split()]:
            say("host round %d/%d: %d ranks" % (r, rounds, np))
            row = {"np": np, "hosts": 1, "round": r, **startup(job, np)}
            row.update(bench(job, np, "1K", "cached")[0])
            row.update(bench(job, np, "1K", "full", HOROVOD_CACHE_CAPACITY="0")[0])
            row["floor_us"] = floor(np)
            out_rows.append(row)


def cluster(*args, timeout=600):
    p = subprocess.run([CLUSTER, *args], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("scale: cluster.sh %s failed:\n%s%s" % (" ".join(args), p.stdout, p.stderr))
    return p.stdout.strip()


def hosts_part(build, rounds, out_rows):
    per_host, rate = int(os.environ.get("PER_HOST", "2")), os.environ.get("RATE", "1gbit")
    ceiling = float(rate.rstrip("gbit") or 1) / 8  # GB/s of one link
    for nhosts in [int(h) for h in os.environ.get("HOSTS", "4 8 16 32 64").split()]:
        cluster("down")
        say("cluster of %d hosts (%s links)" % (nhosts, rate))
        cluster("up", str(nhosts), "--rate", rate, timeout=1800)
        try:
            job, np = Job(build, nhosts, per_host, cluster("ssh-config")), nhosts * per_host
            for r in range(1, rounds + 1):
                say("hosts round %d/%d: %d x %d ranks" % (r, rounds, nhosts, per_host))
                row = {"np": np, "hosts": nhosts, "round": r, **startup(job, np)}
                row.update(bench(job, np, "1K", "cached")[0])
                row.update(bench(job, np, "1K", "full", HOROVOD_CACHE_CAPACITY="0")[0])
                row["busbw_gbps"] = bench(job, np, "16M", "big")[1]
                row["ceiling_gbps"] = "%.3f" % ceiling
                out_rows.append(row)
        finally:
            cluster("down")


def lose_a_host(build, config, listing):
    """One elastic job that loses h7 once it committed step 20: seconds
    from the kill to the first step of the job formed without it."""
    argv = [CLUSTER, "exec", "h0", os.path.join(build, "hvdrun"), "--ssh-command",
            "ssh -F %s" % config, "-np", "64", "--min-np", "48", "--host-discovery-script",
            listing, os.path.join(build, "tests", "elastic_worker")]
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="5", HOROVOD_START_TIMEOUT="120",
               ELASTIC_STEP_MS="40", ELASTIC_STEPS="100")
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    killed, after = None, None
    for line in p.stdout:
        if killed is None and line.startswith("[0]<stdout>:commit 20 "):
            for pid in cluster("pids", "h7").split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            killed = time.time()
        if line.startswith("[0]<stdout>:first step of job 2 at "):
            after = float(line.split()[-1])
    if p.wait() != 0 or killed is None or after is None:
        sys.exit("scale: the elastic job failed (exit %d)" % p.returncode)
    return after - killed


def elastic_part(build, rounds, out_rows):
    listing = os.path.join(os.environ["OUT"], "elastic_hosts.sh")
    with open(listing, "w") as f:
        f.write("#!/bin/sh\n" + "".join("echo h%d:8\n" % h for h in range(8)))
    os.chmod(listing, 0o755)
    cluster("down")
    cluster("up", "8", timeout=1800)
    try:
        config = cluster("ssh-config")
        for r in range(1, rounds + 1):
            say("elastic round %d/%d: 64 workers on 8 hosts, h7 lost" % (r, rounds))
            out_rows.append({"round": r, "goes_on_s": "%.2f" % lose_a_host(build, config, listing)})
    finally:
        cluster("down")


def main():
    build, out, part = sys.argv[1:4]
    rounds = int(os.environ.get("ROUNDS", "3"))
    rows = []
    {"host": host_part, "hosts": hosts_part, "elastic": elastic_part}[part](build, rounds, rows)
    with open(os.path.join(out, part + ".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, ["round", "goes_on_s"] if part == "elastic" else FIELDS)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
