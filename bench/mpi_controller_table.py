"""Aggregates bench/compare-mpi-controller's CSVs: per job size and message
size, the median over rounds of each peer's allreduce time, as one
Markdown table with the MPI controller's time over MPI_Allreduce's.

Usage: mpi_controller_table.py OUT_DIR NP...
"""
import os
import sys

from compare_table import human, medians

PEERS = [("mpi", "MPI_Allreduce (us)"), ("mpi-nonblocking", "MPI_Iallreduce + Wait (us)"),
         ("hvd-mpi", "hvd, CPU_OPERATIONS=mpi (us)"),
         ("hvd-mpi-ring", "hvd, CPU_OPERATIONS=mpi, libnbc ring (us)"),
         ("hvd-own", "hvd, its own (us)")]


def main():
    out, nps = sys.argv[1], sys.argv[2:]
    print("| np | size | " + " | ".join(label for _, label in PEERS) +
          " | hvd mpi / MPI_Allreduce | hvd mpi, ring / MPI_Allreduce |")
    print("|---:|---:|" + "---:|" * (len(PEERS) + 2))
    for np in nps:
        got = {name: medians(os.path.join(out, "%s.np%s.r*.csv" % (name, np)))
               for name, _ in PEERS}
        for size in sorted(got["mpi"]):
            times = [got[name].get(size, (float("nan"), 0))[0] for name, _ in PEERS]
            print("| %s | %s | %s | %.2f | %.2f |" % (
                np, human(size), " | ".join("%.1f" % t for t in times), times[2] / times[0],
                times[3] / times[0]))


if __name__ == "__main__":
    main()
