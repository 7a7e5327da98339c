#!/usr/bin/env python3
"""The fault sweep: tests/fault/scenario.c once per failure point.

A build with HVD_FAULT_INJECTION=ON (and ASan+UBSan) has a libhvd.so that
fails, on request, any one of its own allocations and system calls
(tests/fault/fault.c).  This runs the scenario (hvd_init, every kind of
collective, fusion, process sets, hvd_shutdown, then hvd_init again) under
hvdrun with one such failure each time, in one rank, and checks that every
run ends cleanly:

  - hvdrun and every rank exit 0: no crash, no sanitizer report, no leak
    (ASan's leak check at exit), no VIOLATION from the scenario (an error
    without a message, a wrong result);
  - every rank reaches the end of the scenario within --timeout (no hang:
    every wait in hvd has a deadline);
  - phase 2 (the second hvd_init and its allreduce) succeeds on every rank
    unless the fault fired during it: a failed run does not spoil the
    next hvd_init;
  - with --errno eintr or eagain (a signal, a spurious wake-up) every step
    succeeds: a transient failure is retried, never reported.

Failure points, two ways:
  --by calls   every n from 1 until a run makes fewer than n countable
               calls in the armed rank (SQLite's way; the long run);
  --by sites   every call site (the return address in libhvd.so) of every
               wrapped function, failed at its first call: the sites a
               clean run uses, then those that error paths reach, until no
               new site appears.  Every site is failed at least once, in
               far fewer runs (the test command).

Prints one line per run that failed and a summary; exits 1 if any failed.
"""
import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

Report = collections.namedtuple("Report", "rank calls fired site fn sites")


def read_reports(d):
    """The fault.PID files of one run: {rank: Report}."""
    out = {}
    for name in os.listdir(d):
        if not name.startswith("fault."):
            continue
        with open(os.path.join(d, name)) as f:
            lines = f.read().splitlines()
        if not lines:
            continue
        head = lines[0].split()
        kv = dict(zip(head[0::2], head[1::2]))
        sites = {}
        for line in lines[1:]:
            _, off, fn, calls = line.split()
            sites[int(off, 16)] = (fn, int(calls))
        m = re.search(r" site (0x[0-9a-f]+) (\S+)", lines[0])
        rank = kv.get("rank", "-")
        out[rank] = Report(rank, int(kv["calls"]), int(kv["fired"]),
                           int(m.group(1), 16) if m else None, m.group(2) if m else None, sites)
    return out


class Sweep:
    def __init__(self, args):
        self.a = args
        self.runs = 0
        self.failures = []
        self.forced = set()  # (site, fn) that fired
        self.times = []  # (seconds, what) of every run

    def command(self):
        scenario = os.path.join(self.a.build, "fault_scenario")
        if self.a.np == 1:
            return [scenario]
        return [os.path.join(self.a.build, "hvdrun"), "-np", str(self.a.np), scenario]

    def run(self, fault_env):
        """One run of the scenario; (problems, reports, output)."""
        self.runs += 1
        tmp = tempfile.mkdtemp(prefix="hvd-fault-")
        rep, sync = os.path.join(tmp, "reports"), os.path.join(tmp, "sync")
        os.mkdir(rep)
        os.mkdir(sync)
        env = dict(os.environ)
        env.update({
            "HVD_FAULT_REPORT": rep,
            "HVD_FAULT_SYNC_DIR": sync,
            "HVD_FAULT_ERRNO": self.a.errno,
            "HOROVOD_GLOO_TIMEOUT_SECONDS": str(self.a.hvd_timeout),
            "HOROVOD_START_TIMEOUT": str(self.a.hvd_timeout * 2),
            # A rank whose enqueue failed never submits that tensor; the
            # others wait for it until the stall inspector gives up, as
            # they would for a program whose ranks went different ways.
            "HOROVOD_STALL_CHECK_TIME_SECONDS": str(self.a.hvd_timeout),
            "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": str(self.a.hvd_timeout * 2),
            "ASAN_OPTIONS": "detect_leaks=1",
            "UBSAN_OPTIONS": "print_stacktrace=1",
        })
        if self.a.np > 1:
            env["HVD_FAULT_RANK"] = str(self.a.rank)
        if self.a.persist:
            env["HVD_FAULT_PERSIST"] = "1"
        env.update(fault_env)
        problems = []
        # Its own process group, so that a hung job goes down whole.
        p = subprocess.Popen(self.command(), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=self.a.timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            rc = None
            problems.append("hang: still running after %d s" % self.a.timeout)
        out = out.decode(errors="replace")
        reports = read_reports(rep)
        shutil.rmtree(tmp, ignore_errors=True)
        if rc not in (0, None):
            problems.append("exit status %d" % rc)
        for pat in ("VIOLATION", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                    "runtime error:", "Assertion"):
            if pat in out:
                problems.append(pat.rstrip(":"))
        errors = re.findall(r"step \S+: error .*", out)
        if self.a.errno != "hard" and errors:
            # EINTR and EAGAIN are transient: retried, never an error.
            problems.append("%s became an error: %s" % (self.a.errno.upper(), errors[0]))
        ends = re.findall(r"fault: phase 2 (clean|faulted), (ok|failed)", out)
        if rc is not None and len(ends) != self.a.np:
            problems.append("%d of %d ranks reached the end" % (len(ends), self.a.np))
        elif all(c == "clean" for c, _ in ends) and any(r == "failed" for _, r in ends):
            problems.append("phase 2 failed although no fault fired during it")
        return problems, reports, out

    def armed(self, reports):
        key = "-" if self.a.np == 1 else str(self.a.rank)
        return reports.get(key)

    def judge(self, what, fault_env):
        t0 = time.time()
        problems, reports, out = self.run(fault_env)
        self.times.append((time.time() - t0, what))
        r = self.armed(reports)
        if r is None:
            problems.append("no fault report from the armed process")
        elif r.fired:
            self.forced.add((r.site, r.fn))
        if problems:
            where = "%s 0x%x" % (r.fn, r.site) if r and r.fired else "not fired"
            self.failures.append((what, where, problems, out))
            env = " ".join("%s=%s" % kv for kv in sorted(fault_env.items()))
            print("FAIL %s (%s): %s\n  again: HVD_FAULT_ERRNO=%s HVD_FAULT_RANK=%s %s %s"
                  % (what, where, "; ".join(problems), self.a.errno, self.a.rank, env,
                     " ".join(self.command())), flush=True)
            if self.a.verbose:
                print(out)
        return r

    def census(self):
        """A run with no fault: the armed rank's calls and sites."""
        problems, reports, out = self.run({})
        r = self.armed(reports)
        if problems or r is None:
            print(out)
            sys.exit("fault sweep: the scenario fails without a fault: %s" % "; ".join(problems))
        return r

    def by_calls(self):
        clean = self.census()
        n = 0
        while True:
            n += 1
            r = self.judge("call %d" % n, {"HVD_FAULT_AT": str(n)})
            if r is not None and not r.fired and r.calls < n:
                return clean, n - 1  # this run made fewer than n calls: done

    def by_sites(self):
        clean = self.census()
        todo = collections.OrderedDict((s, fn) for s, (fn, _) in sorted(clean.sites.items()))
        done = set()
        while todo:
            site, fn = todo.popitem(last=False)
            done.add(site)
            r = self.judge("site 0x%x (%s)" % (site, fn), {"HVD_FAULT_SITE": "0x%x:1" % site})
            for s, (f, _) in sorted((r.sites if r else {}).items()):
                if s not in done and s not in todo:
                    todo[s] = f  # reached only on an error path: fail it too
        return clean, len(done)

    def symbolize(self, sites):
        """'function file:line' for each site offset (addr2line)."""
        lib = os.path.join(self.a.build, "libhvd.so")
        addrs = ["0x%x" % (s - 1) for s in sites]  # the call, not the return
        p = subprocess.run(["addr2line", "-f", "-s", "-e", lib] + addrs,
                           stdout=subprocess.PIPE, check=False)
        lines = p.stdout.decode().splitlines()
        return ["%s %s" % (lines[2 * i], lines[2 * i + 1]) for i in range(len(sites))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-fault")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rank", type=int, default=0, help="the rank the fault is armed in")
    ap.add_argument("--errno", default="hard", choices=["hard", "eintr", "eagain"])
    ap.add_argument("--by", default="sites", choices=["sites", "calls"])
    ap.add_argument("--persist", action="store_true",
                    help="every countable call after the first failure fails too")
    ap.add_argument("--timeout", type=int, default=90, help="seconds a run may take")
    ap.add_argument("--hvd-timeout", type=int, default=2,
                    help="HOROVOD_GLOO_TIMEOUT_SECONDS of the ranks")
    ap.add_argument("--list", action="store_true", help="print every site forced")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    s = Sweep(a)
    start = time.time()
    clean, points = s.by_calls() if a.by == "calls" else s.by_sites()
    where = "alone" if a.np == 1 else "np %d, fault in rank %d" % (a.np, a.rank)
    if a.persist:
        where += ", persistent"
    print("fault sweep (%s, %s, by %s): a clean run makes %d countable calls from %d sites; "
          "%d runs, %d failure points forced (%d distinct sites), %d handled, %d not "
          "(%.0f s)" % (where, a.errno, a.by, clean.calls, len(clean.sites), s.runs, points,
                        len(s.forced), points - len(s.failures), len(s.failures),
                        time.time() - start))
    if a.list:
        print("  slowest runs: " + ", ".join("%s %.1f s" % (w, t) for t, w in
                                               sorted(s.times, reverse=True)[:8]))
        forced = sorted(s.forced)
        for (site, fn), place in zip(forced, s.symbolize([x for x, _ in forced])):
            print("  0x%x %-14s %s" % (site, fn, place))
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
