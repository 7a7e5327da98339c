/*
 * mpi_allreduce.c -- the OpenMPI side of bench/compare-openmpi (and the MPI
 * columns of bench/peers): MPI_Allreduce (float32 sum, in place) timed
 * exactly as hvd-bench times hvd_allreduce, by allreduce_loop.h (settle,
 * warm-up, 5 batches, the slowest rank's mean, the median; output
 * op,bytes,time_us,algbw_GBps,busbw_GBps), so the two columns of the
 * comparison differ only in the library.
 *
 * --nonblocking times MPI_Iallreduce + MPI_Wait instead, the calls
 * HOROVOD_CPU_OPERATIONS=mpi makes (bench/compare-mpi-controller).
 *
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include "allreduce_loop.h"

static int nonblocking;

static void sum(float *buf, size_t n) {
  MPI_Request req;
  if (!nonblocking) {
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static double max(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

static void abort_job(void) { MPI_Abort(MPI_COMM_WORLD, 1); }

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--nonblocking") == 0) nonblocking = 1;
  MPI_Init(&argc, &argv);
  peer_lib p = {0, 0, sum, max, abort_job};
  MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p.size);
  int rc = allreduce_loop(&p, argc, argv);
  MPI_Finalize();
  return rc;
}
