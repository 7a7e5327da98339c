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
          "and OpenMPI's `MPI_Allreduce`. Targets: engine at most 3x OpenMPI on shared "
          "memory and 1.5x on TCP, `--direct` no worse than OpenMPI.")
    print()
    print("| path | np | size | hvd engine | hvd --direct | OpenMPI | engine / OpenMPI "
          "| direct / OpenMPI | engine target | direct target |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for path, label in PATHS:
        limit = 3.0 if path == "shm" else 1.5
        for np in nps:
            eng, dire, mpi = (load(out, k, path, np, "lat") for k in ("hvd", "hvd-direct", "mpi"))
            worst_e = worst_d = (0, None)
            for size in sorted(set(eng) & set(dire) & set(mpi)):
                re, rd = eng[size][0] / mpi[size][0], dire[size][0] / mpi[size][0]
                worst_e, worst_d = max(worst_e, (re, size)), max(worst_d, (rd, size))
                if size in LATENCY_ROWS:
                    print("| %s | %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f | | |" % (
                        label, np, human(size), eng[size][0], dire[size][0], mpi[size][0], re, rd))
            if worst_e[1] is None:
                continue
            e = tally.judge(worst_e[0] <= limit, "%s np %s engine %.2fx at %s" % (
                path, np, worst_e[0], human(worst_e[1])))
            d = tally.judge(worst_d[0] <= 1.0, "%s np %s --direct %.2fx at %s" % (
                path, np, worst_d[0], human(worst_d[1])))
            print("| %s | %s | 8 B-4 KiB, worst | | | | %.2f (%s) | %.2f (%s) | <= %.1f: %s "
                  "| <= 1: %s |" % (label, np, worst_e[0], human(worst_e[1]), worst_d[0],
                                     human(worst_d[1]), limit, e, d))
    print()


def bandwidth_table(out, nps, tally):
    print("Bandwidth, busbw (GB/s, nccl-tests' definition), hvd through the engine against "
          "OpenMPI. Targets: shared memory at least 2x OpenMPI; TCP at least 1.5x at np 4 "
          "and at least 1x at np 2.")
    print()
    print("| path | np | size | hvd busbw | OpenMPI busbw | hvd / OpenMPI | target |")
    print("|---|---:|---:|---:|---:|---:|---|")
    series = {}
    for path, label in PATHS:
        for np in nps:
            hvd, mpi = load(out, "hvd", path, np, "bw"), load(out, "mpi", path, np, "bw")
            series[(path, np)] = (hvd, mpi)
            limit = 2.0 if path == "shm" else (1.5 if int(np) >= 4 else 1.0)
            for size in sorted(set(hvd) & set(mpi)):
                ratio = hvd[size][1] / mpi[size][1] if mpi[size][1] > 0 else float("inf")
                verdict = tally.judge(ratio >= limit, "%s np %s busbw %.2fx at %s" % (
                    path, np, ratio, human(size)))
                print("| %s | %s | %s | %.3f | %.3f | %.2f | >= %.1f: %s |" % (
                    label, np, human(size), hvd[size][1], mpi[size][1], ratio, limit, verdict))
    print()
    return series


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


def main():
    out, rounds, before, after, nps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    tally = Tally()
    print("Generated by `bench/compare-openmpi` on %s: %s rounds, medians; load average "
          "before %s, after %s (%d CPUs)." % (datetime.date.today().isoformat(), rounds, before,
                                             after, os.cpu_count()))
    print()
    latency_table(out, nps, tally)
    series = bandwidth_table(out, nps, tally)
    with open(os.path.join(out, "memcpy.csv")) as f:
        ceil = ", ".join("%s: %s GB/s" % (human(int(b)), g)
                         for b, g in (l.strip().split(",") for l in f if l.strip()))
    print("Single-thread memcpy in the same run (the machine's ceiling): %s." % ceil)
    print()
    print("Targets met: %d of %d.%s" % (tally.met, tally.total,
                                         (" Missed: " + "; ".join(tally.missed) + ".")
                                         if tally.missed else ""))
    print()
    plot(out, series)


if __name__ == "__main__":
    main()
