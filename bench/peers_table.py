"""Aggregates bench/peers' CSVs: per job size, message size and peer the
median time over rounds; prints one Markdown table per job size (µs per
allreduce, then each peer's time over hvd's: the torch peers' over
hvd.torch's, the C peers' over hvd-bench's; above 1, hvd is faster) with the
date, nproc and load; writes peers.csv (np,bytes,peer,time_us).

Usage: peers_table.py OUT_DIR ROUNDS LOAD_BEFORE LOAD_AFTER DS_BUILD_S "SIZES" "PEERS" NP...
"""
import datetime
import os
import sys

from compare_table import cpu_line, human, medians

TORCH_PEERS = ("gloo", "deepspeed")  # over hvd.torch; the rest over hvd


def base_of(peer, peers):
    if peer in TORCH_PEERS and "hvd.torch" in peers:
        return "hvd.torch"
    return "hvd" if "hvd" in peers and peer not in ("hvd", "hvd.torch") else None


def main():
    out, rounds, before, after, ds_build = sys.argv[1:6]
    sizes = [int(s) for s in sys.argv[6].split()]
    peers = sys.argv[7].split()
    nps = sys.argv[8:]
    print("bench/peers, %s, `nproc` %d, load average %s before and %s after, "
          "%s round(s); median over rounds of the median over 5 batches of the "
          "slowest rank's mean per allreduce, float32 sum in place, every rank on "
          "this host." % (datetime.date.today(), os.cpu_count(), before, after, rounds))
    if "deepspeed" in peers:
        print("DeepSpeed's deepspeed_shm_comm op built in %s s (g++, at first use)." % ds_build)
    cpu = cpu_line(out)
    if cpu:
        print(cpu)
    print()
    ratios = [(p, base_of(p, peers)) for p in peers if base_of(p, peers)]
    rows = []
    for np in nps:
        t = {p: medians(os.path.join(out, "%s.np%s.r*.csv" % (p, np))) for p in peers}
        print("np %s, µs per allreduce; peer / hvd (above 1: hvd faster)" % np)
        print()
        print("| size | " + " | ".join(peers) + " | "
              + " | ".join("%s / %s" % r for r in ratios) + " |")
        print("|---:" * (1 + len(peers) + len(ratios)) + "|")
        for size in sizes:
            cells = []
            for p in peers:
                v = t[p].get(size)
                cells.append("%.1f" % v[0] if v else "-")
                if v:
                    rows.append("%s,%d,%s,%.2f" % (np, size, p, v[0]))
            for p, b in ratios:
                v, w = t[p].get(size), t[b].get(size)
                cells.append("%.2f" % (v[0] / w[0]) if v and w else "-")
            print("| %s | %s |" % (human(size), " | ".join(cells)))
        print()
    with open(os.path.join(out, "peers.csv"), "w") as f:
        f.write("np,bytes,peer,time_us\n" + "".join(r + "\n" for r in rows))


if __name__ == "__main__":
    main()
