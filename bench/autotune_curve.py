"""Summarises and plots bench/autotune-curve's run: the hand-picked sweep,
the autotuned run's step times and its log.

Usage: autotune_curve.py OUT_DIR NP STEPS_PER_SAMPLE
"""
import csv
import os
import statistics
import subprocess
import sys


def main():
    out, np = sys.argv[1], sys.argv[2]
    sweep = list(csv.DictReader(open(os.path.join(out, "sweep.csv"))))
    best = min(sweep, key=lambda r: float(r["median_ms"]))
    best_ms = float(best["median_ms"])
    steps = [float(l) for l in open(os.path.join(out, "steps.txt")) if l.strip()]
    log = list(csv.DictReader(open(os.path.join(out, "autotune.csv"))))
    tuning = [r for r in log if r["phase"] in ("warmup", "bayes", "categorical")]
    settled = next((r for r in log if r["phase"] == "settled"), None)
    # the steps the tuning samples took: each sample is STEPS_PER_SAMPLE steps
    per = int(sys.argv[3])
    settled_at = min(len(steps), (len(tuning) + 1) * per)
    after = steps[settled_at:]
    print("np %s, %d steps; hand-picked sweep (median ms per step):" % (np, len(steps)))
    print()
    print("| fusion threshold (MiB) | cycle time (ms) | ms per step |")
    print("|---:|---:|---:|")
    for r in sweep:
        print("| %s | %s | %s |" % (r["fusion_mb"], r["cycle_ms"], r["median_ms"]))
    print()
    print("best hand-picked: %s MiB, %s ms: %.1f ms per step" % (best["fusion_mb"],
                                                                 best["cycle_ms"], best_ms))
    if settled:
        print("autotune settled after %d samples (%d steps) on %.4g MiB, %.4g ms, cache %s, "
              "hierarchical %s" % (len(tuning), settled_at, float(settled["fusion_threshold_mb"]),
                                   float(settled["cycle_time_ms"]), settled["cache_enabled"],
                                   settled["hierarchical_allreduce"]))
    if after:
        med = statistics.median(after)
        print("after settling: %.1f ms per step (median of %d steps), %.2f x the best "
              "hand-picked (target: within 1.10)" % (med, len(after), med / best_ms))
    plot(out, steps, best_ms, settled_at, log, per)


def plot(out, steps, best_ms, settled_at, log, per):
    data = os.path.join(out, "steps.dat")
    with open(data, "w") as f:
        for i, s in enumerate(steps):
            f.write("%d %.3f\n" % (i, s))
    scores = os.path.join(out, "scores.dat")
    with open(scores, "w") as f:
        for r in log:
            f.write("%d %.6f\n" % ((int(r["sample"]) + 1) * per, float(r["score_bytes_per_s"]) / 1e9))
    png = os.path.join(out, "autotune.png")
    script = (
        "set terminal pngcairo size 1100,600; set output '%s';"
        "set xlabel 'step'; set ylabel 'ms per step'; set y2label 'sample score (GB/s)';"
        "set y2tics; set ytics nomirror; set logscale y; set grid; set key top right;"
        "set title 'autotune on the ResNet-50-sized engine step, from 1 MiB / 20 ms';"
        "set arrow from %d, graph 0 to %d, graph 1 nohead dt 2;"
        "set label 'settled' at %d, graph 0.95 offset 1,0;"
        "plot '%s' using 1:2 with lines title 'step time', "
        "%.3f with lines lw 2 title 'best hand-picked', "
        "%.3f with lines dt 3 title '+10%%', "
        "'%s' using 1:2 axes x1y2 with points pt 7 title 'sample score'"
        % (png, settled_at, settled_at, settled_at, data, best_ms, best_ms * 1.1, scores))
    try:
        subprocess.run(["gnuplot", "-e", script], check=True)
        print("plot: %s" % png)
    except (OSError, subprocess.CalledProcessError) as e:
        print("no plot: gnuplot failed (%s)" % e)


if __name__ == "__main__":
    main()
