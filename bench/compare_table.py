"""Aggregates bench/compare-openmpi's CSVs: per path, job size and message
size, the median over rounds of hvd's and OpenMPI's allreduce, as one
Markdown table, plus the memcpy ceiling; writes busbw.png with gnuplot.

Usage: compare_table.py OUT_DIR NP...
"""
import csv
import glob
import os
import statistics
import subprocess
import sys


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


def table(out, paths, nps):
    print("| path | np | size | hvd busbw (GB/s) | OpenMPI busbw (GB/s) | hvd / OpenMPI "
          "| hvd time (us) | hvd --direct time (us) | OpenMPI time (us) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    series = {}
    for path, label in paths:
        for np in nps:
            hvd = medians(os.path.join(out, "hvd.%s.np%s.r*.csv" % (path, np)))
            direct = medians(os.path.join(out, "hvd-direct.%s.np%s.r*.csv" % (path, np)))
            mpi = medians(os.path.join(out, "mpi.%s.np%s.r*.csv" % (path, np)))
            series[(path, np)] = (hvd, mpi)
            for size in sorted(set(hvd) & set(mpi)):
                ratio = hvd[size][1] / mpi[size][1] if mpi[size][1] > 0 else float("nan")
                d = "%.1f" % direct[size][0] if size in direct else ""
                print("| %s | %s | %s | %.3f | %.3f | %.2f | %.1f | %s | %.1f |" % (
                    label, np, human(size), hvd[size][1], mpi[size][1], ratio, hvd[size][0], d,
                    mpi[size][0]))
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
        print("\nplot: %s" % os.path.join(out, "busbw.png"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("\nno plot: gnuplot failed (%s)" % e)


def main():
    out, nps = sys.argv[1], sys.argv[2:]
    paths = [("shm", "shared memory (hvd: shm; OpenMPI: vader)"),
             ("tcp", "TCP loopback")]
    series = table(out, paths, nps)
    with open(os.path.join(out, "memcpy.csv")) as f:
        ceil = ", ".join("%s: %s GB/s" % (human(int(b)), g)
                         for b, g in (l.strip().split(",") for l in f if l.strip()))
    print("\nsingle-thread memcpy (the machine's ceiling): %s" % ceil)
    plot(out, series)


if __name__ == "__main__":
    main()
