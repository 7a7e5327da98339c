"""bench/scale's table and model: per job size, the rounds and the median
time of an 8-byte allreduce three ways; a least-squares fit of each way's
time per round to a + b n (a: what a round costs; b n: the n ranks taking
turns on this machine's few cores); the extrapolation to 1,024 and 8,192
ranks with one core per rank, where a round costs a + b (the per-round
cost measured here, on loopback: a real network adds its latency per
round).

Usage: scale_fit.py OUT_DIR CORES NP...
"""
import csv
import glob
import math
import os
import statistics
import sys

MODES = ("direct", "cached", "full")


def median_row(out, mode, np):
    times, steps = [], []
    for path in glob.glob(os.path.join(out, "%s.np%s.r*.csv" % (mode, np))):
        for row in csv.DictReader(open(path)):
            times.append(float(row["time_us"]))
            steps.append(float(row["steps"]))
    return (statistics.median(times), statistics.median(steps)) if times else None


def fit(points):
    """Least squares of t/steps = a + b n over (n, steps, t), with a and b
    kept >= 0 (a round cannot cost less than nothing: when the free fit
    says so, the contention term explains it all and a is 0)."""
    xs = [n for n, s, t in points]
    ys = [t / s for n, s, t in points]
    k = len(xs)
    mx, my = sum(xs) / k, sum(ys) / k
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    a = my - b * mx
    if a < 0:
        a, b = 0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    if b < 0:
        a, b = my, 0.0
    return a, b


def rounds(mode, n):
    """The rounds of each way at n ranks (what --steps counts here)."""
    rd = math.ceil(math.log2(n)) + (2 if n & (n - 1) else 0)  # recursive doubling, folded
    if mode == "direct":
        return rd
    if mode == "cached":
        return 2 * rd
    return 2 * math.ceil(math.log2(n)) + rd  # Bruck allgather (counts, data) + the collective


def main():
    out, cores, nps = sys.argv[1], int(sys.argv[2]), [int(n) for n in sys.argv[3:]]
    data = {m: [] for m in MODES}
    print("| ranks | direct: rounds | µs | cached: rounds | µs | full: rounds | µs |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in nps:
        cells = []
        for m in MODES:
            r = median_row(out, m, n)
            if r:
                data[m].append((n, r[1], r[0]))
                cells += ["%.0f" % r[1], "%.1f" % r[0]]
            else:
                cells += ["", ""]
        print("| %d | %s |" % (n, " | ".join(cells)))
    print()
    print("Fit, time per round = a + b n (µs), and with one core per rank (a + b):")
    print()
    print("| way | a | b | per round, a core each | 1,024 ranks: rounds | µs | 8,192 ranks: "
          "rounds | µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for m in MODES:
        if len(data[m]) < 2:
            continue
        a, b = fit(data[m])
        per = a + b * 1
        r1, r8 = rounds(m, 1024), rounds(m, 8192)
        print("| %s | %.2f | %.3f | %.1f | %d | %.0f | %d | %.0f |" % (
            m, a, b, per, r1, r1 * per, r8, r8 * per))
    print()
    print("(measured with %d CPUs; the rounds column of the measurements is what the ranks "
          "counted, the extrapolation's the algorithms' formulas)" % cores)


if __name__ == "__main__":
    main()
