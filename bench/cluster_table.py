"""Aggregates bench/compare-cluster's CSVs: per peer and message size the
median busbw over rounds, what each host's link carries, its share of the
link (nominal rate, and one iperf3 stream), and the ratio to OpenMPI's
default, as one Markdown table; writes busbw.png with gnuplot.

busbw is nccl-tests' algbw * 2(n-1)/n: what each rank's link carries in a
bandwidth-optimal allreduce when every rank has a link of its own.  With
several ranks per host they share one, and the least a host must send is
2(C-1)/C of the vector for C hosts: "host link" is algbw * 2(C-1)/C, the
rate at which a host's link is kept busy, and the share of the link
columns are of it (for one rank per host the two are the same).

Usage: cluster_table.py OUT_DIR HOSTS RATE
"""
import os
import re
import subprocess
import sys

from compare_table import human, medians

# (file prefix, ranks per host, label), in the table's order.
PEERS = [
    ("hvd.1", 1, "hvd, auto algorithm"),
    ("mpi.1", 1, "OpenMPI 4.1, default algorithm"),
    ("mpi-ring.1", 1, "OpenMPI 4.1, forced ring"),
    ("hvd.2", 2, "hvd flat, auto (shm within a host, TCP across)"),
    ("hvd-hier.2", 2, "hvd hierarchical"),
    ("mpi.2", 2, "OpenMPI 4.1, default algorithm"),
]


def nominal_gbps(rate):
    """'1gbit' -> 0.125 (GB/s)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg])bit", rate.lower())
    if not m:
        return float("nan")
    return float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8e9


def main():
    out, hosts, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    link = nominal_gbps(rate)
    with open(os.path.join(out, "ceiling.txt")) as f:
        stream = float(f.read().strip())
    print("%d hosts, egress of each shaped to %s (%.3f GB/s nominal); one iperf3 TCP stream: "
          "%.3f GB/s\n" % (hosts, rate, link, stream))
    print("| ranks | peer | size | busbw (GB/s) | host link (GB/s) | of nominal | of one stream "
          "| / OpenMPI default | time (ms) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    series = {}
    for prefix, slots, label in PEERS:
        series[prefix] = medians(os.path.join(out, "%s.r*.csv" % prefix))
    for prefix, slots, label in PEERS:
        base = series["mpi.%d" % slots]
        for size, (t, busbw) in sorted(series[prefix].items()):
            ratio = busbw / base[size][1] if size in base and base[size][1] > 0 else float("nan")
            host = size / (t * 1e-6) / 1e9 * 2 * (hosts - 1) / hosts
            print("| %dx%d | %s | %s | %.4f | %.4f | %.0f%% | %.0f%% | %.2f | %.1f |" % (
                hosts, slots, label, human(size), busbw, host, 100 * host / link,
                100 * host / stream, ratio, t / 1000))
    plot(out, series, stream, hosts)


def plot(out, series, stream, hosts):
    data = os.path.join(out, "busbw.dat")
    with open(data, "w") as f:
        for prefix, slots, label in PEERS:
            f.write("# %s\n" % prefix)
            for size in sorted(series[prefix]):
                f.write("%d %.6f\n" % (size, series[prefix][size][1]))
            f.write("\n\n")
    lines = ["'%s' index %d using 1:2 with linespoints title '%dx%d %s'"
             % (data, i, hosts, slots, label.replace("'", ""))
             for i, (prefix, slots, label) in enumerate(PEERS)]
    lines.append("%f with lines dashtype 2 title 'one iperf3 stream'" % stream)
    script = ("set terminal pngcairo size 1100,700; set output '%s';"
              "set logscale x 2; set format x '2^{%%L}'; set xlabel 'bytes';"
              "set ylabel 'busbw (GB/s)'; set key left bottom; set grid; set yrange [0:*];"
              "set title 'allreduce across %d emulated hosts: hvd and OpenMPI'; plot %s"
              % (os.path.join(out, "busbw.png"), hosts, ", ".join(lines)))
    try:
        subprocess.run(["gnuplot", "-e", script], check=True)
        print("\nplot: %s" % os.path.join(out, "busbw.png"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("\nno plot: gnuplot failed (%s)" % e)


if __name__ == "__main__":
    main()
