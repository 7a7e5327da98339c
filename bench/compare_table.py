"""Aggregates bench/compare-openmpi's CSVs: per path, job size and message
size, the median over rounds of hvd's and OpenMPI's allreduce; prints the
latency and bandwidth tables with their ratios, each against the speed
issue's target, the memcpy ceiling and the load; writes busbw.png.

Usage: compare_table.py OUT_DIR ROUNDS LOAD_BEFORE LOAD_AFTER NP...
"""
import csv
import datetime
import glob
import os
import statistics
import subprocess
import sys

PATHS = [("shm", "shared memory"), ("tcp", "TCP loopback")]
LATENCY_ROWS = (8, 64, 512, 4096)  # printed; the targets are judged on every size


def medians(pattern):
    """{bytes: (median time_us, median busbw)} over the rounds' files."""
    times, busbws = {}, {}
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for row in csv.DictReader(f):
                size = int(row["bytes"])
                times.setdefault(size, []).append(float(row["time_us"]))
                busbws.setdefault(size, []).append(float(row["busbw_GBps"]))
    return {s: (statistics.median(times[s]), statistics.median(busbws[s])) for s in times}


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def load(out, kind, path, np, rng):
    return medians(os.path.join(out, "%s.%s.np%s.%s.r*.csv" % (kind, path, np, rng)))


class Tally:
    def __init__(self):
        self.met, self.total, self.missed = 0, 0, []

    def judge(self, ok, what):
        self.total += 1
        self.met += ok
        if not ok:
            self.missed.append(what)
        return "met" if ok else "**missed**"


def latency_table(out, nps, tally):
    print("Latency, time per allreduce (µs): hvd through the engine (blocking "
          "`hvd_allreduce`, default settings), hvd's collective layer alone (`--direct`) "
          "and OpenMPI's `MPI_Allreduce`; the engine's own cost per call is the first "
          "minus the second. Targets: engine at most 1.5x OpenMPI on shared memory and "
          "1.2x on TCP; `--direct` no slower than OpenMPI on shared memory (on TCP shown, "
          "not judged).")
    print()
    print("| path | np | size | hvd engine | hvd --direct | engine's own | OpenMPI "
          "| engine / OpenMPI | direct / OpenMPI | engine target | direct target |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for path, label in PATHS:
        limit = 1.5 if path == "shm" else 1.2
        for np in nps:
            eng, dire, mpi = (load(out, k, path, np, "lat") for k in ("hvd", "hvd-direct", "mpi"))
            worst_e = worst_d = (0, None)
            own = []
            for size in sorted(set(eng) & set(dire) & set(mpi)):
                re, rd = eng[size][0] / mpi[size][0], dire[size][0] / mpi[size][0]
                worst_e, worst_d = max(worst_e, (re, size)), max(worst_d, (rd, size))
                own.append(eng[size][0] - dire[size][0])
                if size in LATENCY_ROWS:
                    print("| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | | |" % (
                        label, np, human(size), eng[size][0], dire[size][0],
                        eng[size][0] - dire[size][0], mpi[size][0], re, rd))
            if worst_e[1] is None:
                continue
            e = tally.judge(worst_e[0] <= limit, "%s np %s engine %.2fx at %s" % (
                path, np, worst_e[0], human(worst_e[1])))
            d = ""
            if path == "shm":
                d = "<= 1: " + tally.judge(worst_d[0] <= 1.0, "%s np %s --direct %.2fx at %s" % (
                    path, np, worst_d[0], human(worst_d[1])))
            print("| %s | %s | 8 B-4 KiB, worst | | | median %.1f | | %.2f (%s) | %.2f (%s) "
                  "| <= %.1f: %s | %s |" % (label, np, statistics.median(own), worst_e[0],
                                            human(worst_e[1]), worst_d[0], human(worst_d[1]),
                                            limit, e, d))
    print()


def ceiling(copy_gbps, np):
    """The shared-memory allreduce's busbw ceiling (docs/algorithms.md): each
    rank must read its slice from all n buffers and write it (S(n+1)/n), then
    read the n-1 other slices and write them (2S(n-1)/n): S(3n-1)/n bytes of
    traffic, n ranks on min(n, cpus) cores that together copy copy_gbps
    (a copied byte is read once and written once)."""
    n = int(np)
    seconds_per_gb = (3 * n - 1) / (2 * copy_gbps)  # per GB of S, all n ranks' traffic
    return 2 * (n - 1) / n / seconds_per_gb


def bandwidth_table(out, nps, tally, copy):
    print("Bandwidth, busbw (GB/s, nccl-tests' definition), hvd through the engine against "
          "OpenMPI, and on shared memory against the ceiling the machine's copy bandwidth "
          "allows (docs/algorithms.md: the bytes an allreduce must move, at the rate "
          "min(np, CPUs) concurrent memcpy loops reach in the same run). Targets: shared "
          "memory at 16 and 64 MiB at least 2.5x OpenMPI and at least half the ceiling; "
          "TCP (the previous round's) at least 1.5x OpenMPI at np 4 and 1x at np 2.")
    print()
    print("| path | np | size | hvd busbw | OpenMPI busbw | hvd / OpenMPI | ceiling "
          "| hvd / ceiling | target |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    series = {}
    for path, label in PATHS:
        for np in nps:
            hvd, mpi = load(out, "hvd", path, np, "bw"), load(out, "mpi", path, np, "bw")
            series[(path, np)] = (hvd, mpi)
            for size in sorted(set(hvd) & set(mpi)):
                ratio = hvd[size][1] / mpi[size][1] if mpi[size][1] > 0 else float("inf")
                ceil, share, verdict = "", "", ""
                if path == "shm" and size in copy:
                    c = ceiling(copy[size], np)
                    ceil, share = "%.2f" % c, "%.2f" % (hvd[size][1] / c)
                    ok_mpi = tally.judge(ratio >= 2.5, "shm np %s busbw %.2fx OpenMPI at %s" % (
                        np, ratio, human(size)))
                    ok_ceil = tally.judge(hvd[size][1] >= c / 2, "shm np %s busbw %.2f of the "
                                          "ceiling at %s" % (np, hvd[size][1] / c, human(size)))
                    verdict = ">= 2.5x: %s; >= 0.5 ceiling: %s" % (ok_mpi, ok_ceil)
                elif path == "tcp":
                    limit = 1.5 if int(np) >= 4 else 1.0
                    verdict = ">= %.1f: %s" % (limit, tally.judge(
                        ratio >= limit, "tcp np %s busbw %.2fx at %s" % (np, ratio, human(size))))
                print("| %s | %s | %s | %.3f | %.3f | %.2f | %s | %s | %s |" % (
                    label, np, human(size), hvd[size][1], mpi[size][1], ratio, ceil, share,
                    verdict))
    print()
    return series


def copy_rates(out):
    """{bytes: GB/s}: the single loop's, and the concurrent loops' sum."""
    def read(path):
        with open(path) as f:
            return {int(b): float(g) for b, g in (l.strip().split(",") for l in f if l.strip())}
    one = read(os.path.join(out, "memcpy.csv"))
    together = {}
    for path in glob.glob(os.path.join(out, "memcpy.par*.csv")):
        for b, g in read(path).items():
            together[b] = together.get(b, 0.0) + g
    return one, together or one


def cpu_line(out):
    """The core's speed before each job (bench/cpu_speed.c's ns per
    iteration in cpu.csv), summarised; None without the file."""
    try:
        with open(os.path.join(out, "cpu.csv")) as f:
            ns = sorted(float(l) for l in f if l.strip())
    except OSError:
        return None
    if not ns:
        return None
    return ("The core's speed before each of the %d jobs (`bench/cpu_speed.c`, a fixed loop): "
            "%.2f-%.2f ns per iteration, median %.2f; the slowest %.2fx the fastest." % (
                len(ns), ns[0], ns[-1], ns[len(ns) // 2], ns[-1] / ns[0]))


def plot(out, series):
    data = os.path.join(out, "busbw.dat")
    blocks = []
    with open(data, "w") as f:
        for (path, np), (hvd, mpi) in series.items():
            for name, points in (("hvd", hvd), ("OpenMPI", mpi)):
                f.write("# %s %s np %s\n" % (name, path, np))
                for size in sorted(points):
                    f.write("%d %.6f\n" % (size, points[size][1]))
                f.write("\n\n")
                blocks.append("%s %s np %s" % (name, path, np))
    plots = ", ".join("'%s' index %d using 1:2 with linespoints title '%s'" % (data, i, t)
                      for i, t in enumerate(blocks))
    script = ("set terminal pngcairo size 1100,700; set output '%s';"
              "set logscale x 2; set format x '2^{%%L}'; set xlabel 'bytes';"
              "set ylabel 'busbw (GB/s)'; set key left top; set grid;"
              "set title 'allreduce busbw: hvd and OpenMPI on this host'; plot %s"
              % (os.path.join(out, "busbw.png"), plots))
    try:
        subprocess.run(["gnuplot", "-e", script], check=True)
        print("plot: %s" % os.path.join(out, "busbw.png"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("no plot: gnuplot failed (%s)" % e)
        png = os.path.join(out, "busbw.png")
        if os.path.exists(png):  # pngcairo leaves a truncated file behind
            os.remove(png)


def main():
    out, rounds, before, after, nps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    tally = Tally()
    print("Generated by `bench/compare-openmpi` on %s: %s rounds, medians; load average "
          "before %s, after %s (%d CPUs)." % (datetime.date.today().isoformat(), rounds, before,
                                             after, os.cpu_count()))
    cpu = cpu_line(out)
    if cpu:
        print()
        print(cpu)
    print()
    latency_table(out, nps, tally)
    one, together = copy_rates(out)
    series = bandwidth_table(out, nps, tally, together)
    print("memcpy in the same run: one loop %s; %d loops at once, together %s." % (
        ", ".join("%s: %.2f GB/s" % (human(b), g) for b, g in sorted(one.items())),
        len(glob.glob(os.path.join(out, "memcpy.par*.csv"))) or 1,
        ", ".join("%s: %.2f GB/s" % (human(b), g) for b, g in sorted(together.items()))))
    print()
    print("Targets met: %d of %d.%s" % (tally.met, tally.total,
                                         (" Missed: " + "; ".join(tally.missed) + ".")
                                         if tally.missed else ""))
    print()
    plot(out, series)


if __name__ == "__main__":
    main()
