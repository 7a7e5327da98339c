"""bench/scale's tables and plot (docs/scale.md): the medians of
scale_run.py's rows per job size, for this host and for emulated hosts,
and scale.png (gnuplot).

Usage: scale_table.py OUT_DIR
  prints Markdown; writes OUT_DIR/scale.png and says where ("plot: ...")
"""
import csv
import os
import statistics
import subprocess
import sys


def medians(path):
    """{np: {field: median}} of the rows of one part, rows in job order."""
    if not os.path.exists(path):
        return {}
    by_np = {}
    for row in csv.DictReader(open(path)):
        by_np.setdefault(int(row["np"]), []).append(row)
    out = {}
    for np, rows in by_np.items():
        out[np] = {}
        for field in rows[0]:
            values = [float(r[field]) for r in rows if r[field] not in ("", None)]
            if values:
                out[np][field] = statistics.median(values)
    return out


# The columns both tables share, after their own first ones: (heading, cell of a row's medians).
COMMON = [
    ("start-up to the first allreduce (s)", lambda m: "%.1f" % (m["startup_ms"] / 1e3)),
    ("cached 1 KiB: µs", lambda m: "%.0f" % m["cached_us"]),
    ("rounds", lambda m: "%.2f" % m["cached_rounds"]),
    ("full: µs", lambda m: "%.0f" % m["full_us"]),
    ("rounds", lambda m: "%.2f" % m["full_rounds"]),
]
STATE = [
    ("sockets a rank", lambda m: "%d" % m["sockets"]),
    ("resident MiB a rank", lambda m: "%.1f" % (m["rss_kb"] / 1024)),
]
HOST = [("ranks", lambda m: "%d" % m["np"])] + COMMON + [
    ("floor: µs a round", lambda m: "%.0f" % m["floor_us"]),
    ("cached / (rounds x floor)",
     lambda m: "%.1f" % (m["cached_us"] / (max(m["cached_rounds"], 1) * m["floor_us"]))),
] + STATE
HOSTS = [("hosts", lambda m: "%d" % m["hosts"]), ("ranks", lambda m: "%d" % m["np"])] + COMMON + [
    ("16 MiB busbw (GB/s)", lambda m: "%.3f" % m["busbw_gbps"]),
    ("of the link", lambda m: "%.0f%%" % (100 * m["busbw_gbps"] / m["ceiling_gbps"])),
] + STATE


def table(title, columns, rows):
    print(title)
    print()
    print("| " + " | ".join(h for h, _ in columns) + " |")
    print("|" + "---:|" * len(columns))
    for np in sorted(rows):
        print("| " + " | ".join(cell(rows[np]) for _, cell in columns) + " |")
    print()


def write_series(path, rows, fields):
    with open(path, "w") as f:
        for np in sorted(rows):
            f.write("%d %s\n" % (np, " ".join("%g" % rows[np].get(k, float("nan"))
                                             for k in fields)))


def plot(out, host, hosts):
    h, c = os.path.join(out, "host.dat"), os.path.join(out, "hosts.dat")
    write_series(h, host, ["startup_ms", "cached_us", "full_us", "floor_us", "cached_rounds"])
    write_series(c, hosts, ["startup_ms", "cached_us", "full_us", "busbw_gbps", "ceiling_gbps"])
    left = ["'%s' using 1:($2/1e3) with linespoints title 'one host'" % h] if host else []
    left += ["'%s' using 1:($2/1e3) with linespoints title 'emulated hosts'" % c] if hosts else []
    mid = []
    if host:
        mid += ["'%s' using 1:3 with linespoints title 'cached, one host'" % h,
                "'%s' using 1:4 with linespoints title 'full, one host'" % h,
                "'%s' using 1:($5*$6) with lines dashtype 2 title 'floor x rounds'" % h]
    if hosts:
        mid += ["'%s' using 1:3 with linespoints title 'cached, hosts'" % c,
                "'%s' using 1:4 with linespoints title 'full, hosts'" % c]
    script = ["set terminal pngcairo size 1500,500; set output '%s'" % os.path.join(out, "scale.png"),
              "set multiplot layout 1,3", "set grid", "set logscale x 2", "set xlabel 'ranks'",
              "set logscale y", "set ylabel 's'", "set title 'start-up to the first allreduce'",
              "plot " + ", ".join(left) if left else "",
              "set ylabel 'µs'", "set title 'small allreduce (1 KiB)'",
              "plot " + ", ".join(mid) if mid else ""]
    if hosts:
        script += ["unset logscale y", "set yrange [0:*]", "set ylabel 'GB/s'",
                   "set title '16 MiB allreduce across hosts'",
                   "plot '%s' using 1:5 with linespoints title 'busbw', '%s' using 1:6 with "
                   "lines dashtype 2 title 'link'" % (c, c)]
    script.append("unset multiplot")
    try:
        subprocess.run(["gnuplot", "-e", "; ".join(s for s in script if s)], check=True)
        print("plot: %s" % os.path.join(out, "scale.png"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("no plot: gnuplot failed (%s)" % e)


def main():
    out = sys.argv[1]
    host, hosts = medians(os.path.join(out, "host.csv")), medians(os.path.join(out, "hosts.csv"))
    if host:
        table("This host, shared memory between the ranks:", HOST, host)
    if hosts:
        table("Emulated hosts (network namespaces on this machine, each link shaped), TCP between "
              "hosts and shared memory within:", HOSTS, hosts)
    elastic = os.path.join(out, "elastic.csv")
    if os.path.exists(elastic):
        times = sorted(float(r["goes_on_s"]) for r in csv.DictReader(open(elastic)))
        print("An elastic job of 64 workers on 8 emulated hosts loses a host (every process "
              "there killed): from the kill to the survivors' first step without it, %.2f s "
              "(median of %d; at most %.2f s)." % (statistics.median(times), len(times),
                                                    times[-1]))
        print()
    plot(out, host, hosts)


if __name__ == "__main__":
    main()
