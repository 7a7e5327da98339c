"""hvd.torch's init(comm=...) in every rank of a job (tests/cluster/test_mpi.py).

    comm_probe.py ranks R,R,...   init(comm=[R, ...]) on every rank of the job
    comm_probe.py split           init(comm=<mpi4py MPI_COMM_WORLD split in two>)

Each rank prints one line: "comm_probe: world W rank R of S sum X mpi M
threads T" (X: the allreduce-sum of the members' world ranks + 1), or
"comm_probe: world W left out: <ValueError's message>".
"""
import os
import sys

import torch

import hvd.torch as hvd


def world_rank():
    for name in ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "SLURM_PROCID"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def main():
    world = world_rank()
    if sys.argv[1] == "split":
        from mpi4py import MPI  # initialises MPI (MPI_THREAD_MULTIPLE)
        comm = MPI.COMM_WORLD.Split(world % 2, world)
    else:
        comm = [int(r) for r in sys.argv[2].split(",")]
    try:
        hvd.init(comm=comm)
    except ValueError as e:
        print("comm_probe: world %d left out: %s" % (world, e), flush=True)
        return 0
    x = hvd.allreduce(torch.tensor([float(world + 1)]), op=hvd.Sum, name="x")
    threads = hvd.mpi_threads_supported() if hvd.mpi_enabled() else None
    print("comm_probe: world %d rank %d of %d sum %d mpi %d threads %s" % (
        world, hvd.rank(), hvd.size(), int(x.item()), hvd.mpi_enabled(), threads), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
