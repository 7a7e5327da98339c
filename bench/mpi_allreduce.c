/*
 * mpi_allreduce.c -- the OpenMPI side of bench/compare-openmpi: MPI_Allreduce
 * (float32 sum, in place) timed exactly as hvd-bench times hvd_allreduce,
 * so the two columns of the comparison differ only in the library:
 *
 *   - first BENCH_SETTLE_S of untimed 4-byte allreduces (timing.h);
 *   - sizes are the powers of two from --min-bytes to --max-bytes;
 *   - per size: 2 warm-up runs, then 5 batches of runs; before each run
 *     the buffer is refilled, after it the result is checked, neither
 *     timed; a batch's time is the slowest rank's mean per run; the
 *     median over batches is printed;
 *   - output: op,bytes,time_us,algbw_GBps,busbw_GBps (busbw = algbw *
 *     2(n-1)/n, nccl-tests' definition).
 *
 * --nonblocking times MPI_Iallreduce + MPI_Wait instead, the calls
 * HOROVOD_CPU_OPERATIONS=mpi makes (bench/compare-mpi-controller).
 *
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

static void fill(float *buf, size_t n, int rank) {
  for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1) + (float)(i % 5);
}

static int check(const float *buf, size_t n, int size) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (float)(size * (size + 1) / 2) + (float)size * (float)(i % 5)) return -1;
  return 0;
}

static int nonblocking;

static void allreduce(float *buf, size_t n) {
  MPI_Request req;
  if (!nonblocking) {
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

/* Adds the time of `runs` checked allreduces to *spent; -1 on a wrong result. */
static int runs(float *buf, size_t n, int rank, int size, int count, double *spent) {
  for (int i = 0; i < count; i++) {
    fill(buf, n, rank);
    double t0 = now_s();
    allreduce(buf, n);
    *spent += now_s() - t0;
    if (check(buf, n, size) < 0) return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  size_t min_bytes = 8, max_bytes = 256u << 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--nonblocking") == 0) nonblocking = 1;
    if (strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc)
      min_bytes = strtoull(argv[++i], NULL, 10);
    if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
      max_bytes = strtoull(argv[++i], NULL, 10);
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float *buf = malloc(max_bytes);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
  double t0 = now_s();
  for (float done = 0; !done;) { /* timing.h's BENCH_SETTLE_S */
    done = now_s() - t0 >= BENCH_SETTLE_S;
    MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("op,bytes,time_us,algbw_GBps,busbw_GBps\n");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    size_t n = bytes / sizeof(float);
    int iters = bench_iters(bytes);
    double spent = 0.0, batch[5];
    int bad = runs(buf, n, rank, size, 2, &spent);
    for (int b = 0; b < 5; b++) {
      spent = 0.0;
      bad |= runs(buf, n, rank, size, iters, &spent);
      batch[b] = spent / iters;
      MPI_Allreduce(MPI_IN_PLACE, &batch[b], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
    if (bad) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: wrong result at %zu bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    qsort(batch, 5, sizeof batch[0], by_value);
    double s = batch[2], algbw = (double)bytes / s / 1e9;
    if (rank == 0)
      printf("allreduce,%zu,%.2f,%.4f,%.4f\n", bytes, s * 1e6, algbw,
             algbw * 2.0 * (size - 1) / size);
    fflush(stdout);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
