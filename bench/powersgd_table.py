#!/usr/bin/python3
"""bench/torch-powersgd's table and plot: OUT/NAME.txt hold one total img/s
per round; prints the median of each, as Markdown, with the ratios to hvd
fp32 and to DDP with PowerSGD, and writes OUT/img_per_sec.png with gnuplot.

Usage: powersgd_table.py OUT CAPTION
"""
import os
import statistics
import subprocess
import sys

PEERS = [
    ("hvd", "hvd.torch, fp32"),
    ("hvd-fp16", "hvd.torch, Compression.fp16"),
    ("hvd-powersgd", "hvd.torch, hvd.PowerSGD"),
    ("ddp", "DDP (gloo), fp32"),
    ("ddp-powersgd", "DDP (gloo), powerSGD_hook"),
]


def read(out, name):
    path = os.path.join(out, name + ".txt")
    values = [float(v) for v in open(path).read().split()] if os.path.exists(path) else []
    return values


def main():
    out, caption = sys.argv[1:3]
    runs = {name: read(out, name) for name, _ in PEERS}
    med = {name: statistics.median(v) if v else float("nan") for name, v in runs.items()}
    print(caption)
    print()
    print("| configuration | total img/s | runs | / hvd fp32 | / DDP PowerSGD |")
    print("|---|---:|---|---:|---:|")
    for name, label in PEERS:
        print("| %s | %.2f | %s | %.2f | %.2f |" % (
            label, med[name], " ".join("%.2f" % v for v in runs[name]),
            med[name] / med["hvd"], med[name] / med["ddp-powersgd"]))
    plot(out, med)


def plot(out, med):
    data = os.path.join(out, "img_per_sec.dat")
    with open(data, "w") as f:
        for i, (name, label) in enumerate(PEERS):
            f.write('%d "%s" %.4f\n' % (i, label, med[name]))
    png = os.path.join(out, "img_per_sec.png")
    script = ("set terminal pngcairo noenhanced size 900,500; set output '%s';"
              "set style fill solid 0.6; set boxwidth 0.6; set yrange [0:*]; set grid y;"
              "set ylabel 'total img/s'; set xtics rotate by -20;"
              "set title 'resnet18 synthetic benchmark, 4 emulated hosts at 1 Gbit/s';"
              "plot '%s' using 1:3:xtic(2) with boxes notitle" % (png, data))
    try:
        subprocess.run(["gnuplot", "-e", script], check=True)
        print("\nplot: %s" % png)
    except (OSError, subprocess.CalledProcessError) as e:
        print("\nno plot: gnuplot failed (%s)" % e)


if __name__ == "__main__":
    main()
