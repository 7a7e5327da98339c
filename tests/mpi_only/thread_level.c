/*
 * thread_level.c -- a program that initialises MPI itself, then hvd
 * (built only with MPI; run by tests/cluster/test_mpi.py under mpirun).
 *
 *   thread_level SINGLE|FUNNELED|SERIALIZED|MULTIPLE [comm]
 *
 * calls MPI_Init_thread at that level, then hvd_init() (or, with "comm",
 * hvd_init_comm() on MPI_COMM_WORLD split into even and odd ranks), an
 * allreduce of the MPI ranks, hvd_shutdown() and MPI_Finalize(), and
 * prints "thread_level: world W rank R of S sum X mpi M threads T" or
 * "thread_level: world W: <hvd's error>" (exit 1).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "hvd_mpi.h"

static int level_of(const char *name) {
  if (strcmp(name, "SINGLE") == 0) return MPI_THREAD_SINGLE;
  if (strcmp(name, "FUNNELED") == 0) return MPI_THREAD_FUNNELED;
  if (strcmp(name, "SERIALIZED") == 0) return MPI_THREAD_SERIALIZED;
  return MPI_THREAD_MULTIPLE;
}

int main(int argc, char **argv) {
  int provided, world, rc = 0;
  if (argc < 2) return 2;
  MPI_Init_thread(&argc, &argv, level_of(argv[1]), &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  MPI_Comm half = MPI_COMM_NULL;
  if (argc > 2 && strcmp(argv[2], "comm") == 0) {
    MPI_Comm_split(MPI_COMM_WORLD, world % 2, world, &half);
    rc = hvd_init_comm(half);
    MPI_Comm_free(&half); /* hvd keeps its own duplicate */
  } else {
    rc = hvd_init();
  }
  if (rc != 0) {
    printf("thread_level: world %d: %s\n", world, hvd_last_error());
  } else {
    double x = world;
    rc = hvd_allreduce(&x, &x, 1, HVD_FLOAT64, HVD_SUM, "x");
    if (rc == 0)
      printf("thread_level: world %d rank %d of %d sum %g mpi %d threads %d\n", world,
             hvd_rank(), hvd_size(), x, hvd_mpi_enabled(), hvd_mpi_threads_supported());
    else
      printf("thread_level: world %d: %s\n", world, hvd_last_error());
    hvd_shutdown();
  }
  fflush(stdout);
  MPI_Finalize();
  return rc != 0;
}
