"""The scale model (docs/scale.md): the step time of a data-parallel job
with hvd from 8 to 8,192 ranks, calibrated by what bench/scale measured.

Usage: scale_model.py [OUT_DIR]
  prints Markdown: the calibration, then per model and link the scaling
  efficiency of each allreduce algorithm.

A step is forward (a third of the compute), then backward (two thirds),
during which the gradients become ready at a steady rate, last layer
first; the job waits for the last of them to be reduced.  The engine runs
a cycle every HOROVOD_CYCLE_TIME (1 ms) or as soon as the last one ended:
each cycle negotiates (the response cache's fast path: one small
allreduce of bits, ceil(log2 n) rounds) and reduces everything ready that
the previous cycles did not, fused up to HOROVOD_FUSION_THRESHOLD (64 MiB)
per collective.  What is left after backward ends is exposed; the rest
overlaps.  Scaling efficiency = compute / step time (the step of one rank
is its compute alone).

An allreduce of S bytes over n ranks, L of them on each host (h = n / L
hosts), a round costing alpha across hosts and alpha_l within a host, a
host's link beta bytes/s at efficiency eta and its interconnect beta_l:
  ring          2(n-1) alpha + 2(n-1)/n S / (eta beta)
  tree          Rabenseifner (halving, doubling): 2 ceil(log2 n) alpha
                + 2(n-1)/n S / (eta beta), 2 rounds more and S / (eta beta)
                for a non-power of two
  hierarchical  within each host (reduce-scatter, allgather):
                2(L-1) alpha_l + 2(L-1)/L S / beta_l; across: the better
                of ring and tree over the h hosts for S (each host's link
                carries all of it, its L ranks a slice each)
  hvd           the fastest of the three for each collective, as
                src/coll/select.c picks by a cost model
The ring's and tree's bytes on a host's link are the same as the
hierarchical one's (a flat ring crosses each host boundary once): they
differ in rounds, which at thousands of ranks decide.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_fit  # noqa: E402

# Calibration defaults: the last quiet measurements (docs/algorithms.md,
# 2026-11-25: the collective alone, a core per rank, over loopback TCP;
# docs/benchmarks.md: the cluster allreduce at the link's ceiling).
SOFTWARE_ROUND_US = 24.4  # hvd's cost of one TCP round with a core per rank
WIRE_US = 5.0             # what a real 25-100 Gbit/s network adds per round (NIC, switch)
LOCAL_ROUND_US = 3.0      # a shared-memory round among a host's ranks
LOCAL_GBPS = 100.0        # a host's interconnect (NVLink-class; shared memory is ~10)
LINK_EFFICIENCY = 0.90    # busbw / link rate of a large allreduce across hosts
PER_HOST = 8
CYCLE_S = 1e-3
FUSION = 64 << 20
RANKS = [8, 32, 128, 512, 2048, 8192]
LINKS_GBIT = [25, 100]
MODELS = [  # name, parameters, gradient tensors, compute seconds per step, what that is
    ("ResNet-50", 25.6e6, 161, 0.20, "batch 64 a GPU, fp32, a V100-class GPU (~320 images/s)"),
    ("BERT-large", 335e6, 391, 0.40, "sequence 128, batch 32 a GPU, mixed precision, V100-class"),
]
ALGOS = ["ring", "tree", "hierarchical", "hvd"]


def log2c(n):
    return math.ceil(math.log2(n)) if n > 1 else 0


def flat(algo, size, n, alpha, bw):
    if n == 1:
        return 0.0
    move = 2 * (n - 1) / n * size / bw
    if algo == "ring":
        return 2 * (n - 1) * alpha + move
    extra = 0 if n & (n - 1) == 0 else 2 * alpha + size / bw
    return 2 * log2c(n) * alpha + move + extra


def allreduce(algo, size, n, c):
    """Seconds for one allreduce of `size` bytes over n ranks."""
    per_host = min(PER_HOST, n)
    hosts = max(1, n // per_host)
    if hosts == 1:  # one host: whatever the algorithm, its interconnect
        return flat(algo if algo in ("ring", "tree") else "ring", size, n, c["alpha_l"],
                    LOCAL_GBPS * 1e9)
    bw = c["eta"] * c["link_gbit"] * 1e9 / 8
    if algo in ("ring", "tree"):
        return flat(algo, size, n, c["alpha"], bw)
    local = 2 * (per_host - 1) * c["alpha_l"] + 2 * (per_host - 1) / per_host * size / (
        LOCAL_GBPS * 1e9)
    cross = min(flat("ring", size, hosts, c["alpha"], bw), flat("tree", size, hosts, c["alpha"], bw))
    hier = local + cross
    if algo == "hierarchical":
        return hier
    return min(hier, flat("ring", size, n, c["alpha"], bw), flat("tree", size, n, c["alpha"], bw))


def step(model, n, algo, c, compute):
    """(step seconds, exposed communication seconds) of one training step."""
    params = model[1]
    grads, backward = 4 * params, compute * 2 / 3
    if n == 1:
        return compute, 0.0
    negotiate = log2c(n) * c["alpha"]
    t, sent, tick = 0.0, 0.0, 0
    while sent < grads:
        tick = max(tick + 1, math.ceil(t / CYCLE_S - 1e-9))
        start = max(t, tick * CYCLE_S)
        ready = grads * min(start, backward) / backward - sent
        if ready <= 0:
            t = start
            continue
        size = min(ready, FUSION)
        t = start + negotiate + allreduce(algo, size, n, c)
        sent += size
    exposed = max(0.0, t - backward)
    return compute + exposed, exposed


def table(model, compute, c):
    head = ["%d Gbit/s: %s" % (g, a) for g in LINKS_GBIT for a in ALGOS]
    print("| ranks | " + " | ".join(head) + " | exposed (hvd, %d Gbit/s) |" % LINKS_GBIT[0])
    print("|---:|" + "---:|" * (len(head) + 1))
    for n in RANKS:
        cells, exposed = [], 0.0
        for g in LINKS_GBIT:
            for a in ALGOS:
                t, e = step(model, n, a, dict(c, link_gbit=g), compute)
                cells.append("%.0f%%" % (100 * compute / t))
                if g == LINKS_GBIT[0] and a == "hvd":
                    exposed = e
        print("| %d | %s | %.0f ms |" % (n, " | ".join(cells), exposed * 1e3))
    print()


def calibration(out):
    """The per-round costs and link efficiency: measured in out when
    bench/scale ran there, else the defaults above; and where each came
    from."""
    c = {"software_us": SOFTWARE_ROUND_US, "eta": LINK_EFFICIENCY, "alpha_l": LOCAL_ROUND_US * 1e-6,
         "from": "the defaults (docs/scale.md: the last quiet measurements)"}
    if out and os.path.isdir(out):
        points = []
        for n in (2, 4, 8, 16, 32, 64):
            r = scale_fit.median_row(out, "direct", n)
            if r:
                points.append((n, r[1], r[0]))
        if len(points) >= 2:
            a, b = scale_fit.fit(points)
            c["software_us"], c["from"] = a + b, "this run's fit (bench/scale fit)"
        hosts = os.path.join(out, "hosts.csv")
        if os.path.exists(hosts):
            import csv
            rows = [r for r in csv.DictReader(open(hosts)) if r["busbw_gbps"]]
            if rows:
                top = max(int(r["hosts"]) for r in rows)
                ratios = sorted(float(r["busbw_gbps"]) / float(r["ceiling_gbps"])
                                for r in rows if int(r["hosts"]) == top)
                c["eta"] = min(1.0, ratios[len(ratios) // 2])
                c["from"] += "; link efficiency from %d emulated hosts" % top
    c["alpha"] = (c["software_us"] + WIRE_US) * 1e-6
    return c


def main():
    c = calibration(sys.argv[1] if len(sys.argv) > 1 else None)
    print("Calibration (%s): a round across hosts %.1f µs (hvd's %.1f µs with a core per rank "
          "+ %.0f µs of wire), within a host %.0f µs; a host's link reduces at %.0f%% of its "
          "rate, its interconnect at %.0f GB/s; %d ranks a host; cycle %.0f ms, fusion %d MiB."
          % (c["from"], c["alpha"] * 1e6, c["software_us"], WIRE_US, c["alpha_l"] * 1e6,
             100 * c["eta"], LOCAL_GBPS, PER_HOST, CYCLE_S * 1e3, FUSION >> 20))
    print()
    for model in MODELS:
        name, params, tensors, compute, what = model
        for faster in (1, 4):
            t_c = compute / faster
            if faster == 1:
                print("%s: %.1f M parameters (%.0f MB of float32 gradients) in %d tensors, "
                      "%.2f s of compute a step (%s). Scaling efficiency:" % (
                          name, params / 1e6, params * 4 / 1e6, tensors, t_c, what))
            else:
                print("%s on a GPU %d times as fast (%.3f s of compute a step):" % (
                    name, faster, t_c))
            print()
            table(model, t_c, c)


if __name__ == "__main__":
    main()
