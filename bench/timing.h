/*
 * timing.h -- the clock and the median sort shared by bench/'s standalone
 * programs (mpi_allreduce.c, memcpy_bw.c), which are built by
 * compare-openmpi with mpicc and cc, outside the project's build.
 * Include after defining _POSIX_C_SOURCE.
 */
#ifndef HVD_BENCH_TIMING_H
#define HVD_BENCH_TIMING_H

#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort order for doubles. */
static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
