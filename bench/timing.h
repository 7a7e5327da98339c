/*
 * timing.h -- the clock, the runs per batch and the median sort shared by
 * hvd-bench (apps/bench) and bench/'s standalone programs (mpi_allreduce.c,
 * memcpy_bw.c, built by compare-openmpi with mpicc and cc, outside the
 * project's build), so that both sides of a comparison time alike.
 * Include after defining _POSIX_C_SOURCE.
 */
#ifndef HVD_BENCH_TIMING_H
#define HVD_BENCH_TIMING_H

#include <stddef.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs per batch for a collective of `bytes`: about 16 MiB moved per
 * batch, between 1 and 1000 runs.  At small sizes a batch then lasts
 * milliseconds: with 50 runs (the old cap) the 5 batches of an 8-byte
 * allreduce spanned 0.3 ms, and whatever the first milliseconds of a job
 * hold (the scheduler still placing its threads) decided the median. */
static int bench_iters(size_t bytes) {
  size_t k = (16u << 20) / (bytes ? bytes : 1);
  return k < 1 ? 1 : k > 1000 ? 1000 : (int)k;
}

/* How long a job allreduces untimed before its first measurement.  A job's
 * first tens of milliseconds are not its steady state: its ranks may
 * start on one core (the last wake-ups of start-up put them there) until
 * the scheduler spreads them, which made hvd's first size 3.3 us instead
 * of 0.8 in 2 runs of 3.  Both programs settle the same way: 8-byte
 * allreduces until every rank has spent this long (the flag is itself
 * reduced with MAX, so every rank stops at the same call). */
#define BENCH_SETTLE_S 0.05

/* qsort order for doubles. */
static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
