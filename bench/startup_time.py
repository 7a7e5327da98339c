"""How long hvdrun takes to start a job on several hosts, against what one
ssh connection takes on its own; run on a host of the emulated cluster by
bench/compare-cluster.

Usage: startup_time.py HVDRUN SSH_CONFIG HOSTS NP [REPS]
  HOSTS: hvdrun's -H (h0:2,h1:2,...); the ssh reference goes to the second host.

For each of REPS runs (median printed): `ssh -F SSH_CONFIG HOST true`; and
hvdrun -np NP -H HOSTS running `echo up`, timed from its start to the first
rank's line, to every rank's line (the whole job has started), and to its
exit.
"""
import statistics
import subprocess
import sys
import time


def ssh_once(config, host):
    t0 = time.monotonic()
    subprocess.run(["ssh", "-F", config, host, "true"], check=True, timeout=60,
                   stdin=subprocess.DEVNULL)
    return time.monotonic() - t0


def hvdrun_once(hvdrun, config, hosts, np):
    t0 = time.monotonic()
    p = subprocess.Popen([hvdrun, "-np", str(np), "-H", hosts, "--ssh-command",
                          "ssh -F %s" % config, "sh", "-c", "echo up"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    first = every = None
    seen = 0
    for line in p.stdout:
        if line.endswith("<stdout>:up\n"):
            seen += 1
            now = time.monotonic() - t0
            first = first if first is not None else now
            every = now if seen == np else every
    if p.wait(timeout=60) != 0 or seen != np:
        sys.exit("hvdrun failed (exit %d, %d of %d ranks)" % (p.returncode, seen, np))
    return first, every, time.monotonic() - t0


def main():
    hvdrun, config, hosts, np = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    reps = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    other = hosts.split(",")[1].split(":")[0]
    ssh = statistics.median(ssh_once(config, other) for _ in range(reps))
    runs = [hvdrun_once(hvdrun, config, hosts, np) for _ in range(reps)]
    first, every, done = (statistics.median(r[i] for r in runs) for i in range(3))
    print("one ssh connection (ssh %s true): %.3f s" % (other, ssh))
    print("hvdrun -np %d -H %s: first rank's line after %.3f s, every rank's after %.3f s "
          "(%.3f s beyond one ssh connection), the job over after %.3f s (median of %d)"
          % (np, hosts, first, every, every - ssh, done, reps))


if __name__ == "__main__":
    main()
