/*
 * allreduce_loop.h -- the timing loop of bench/'s standalone allreduce
 * programs (mpi_allreduce.c over MPI, oneccl_allreduce.cpp over oneCCL),
 * written once so that every library is timed exactly as hvd-bench times
 * hvd_allreduce (timing.h's clock, settle and runs per batch):
 *
 *   - first BENCH_SETTLE_S of untimed 4-byte allreduces, each followed by
 *     the max over ranks of "done" (so every rank stops at the same call);
 *   - sizes are the powers of two from --min-bytes to --max-bytes;
 *   - per size: 2 warm-up runs, then 5 batches of runs; before each run
 *     the buffer is refilled, after it the result is checked, neither
 *     timed; a batch's time is the slowest rank's mean per run; the
 *     median over batches is printed;
 *   - output (rank 0): op,bytes,time_us,algbw_GBps,busbw_GBps (busbw =
 *     algbw * 2(n-1)/n, nccl-tests' definition).
 *
 * A program fills in a peer_lib (its float32 in-place sum, a max over
 * ranks of one double, an abort) and calls allreduce_loop.  C and C++.
 * Include after defining _POSIX_C_SOURCE.
 */
#ifndef HVD_BENCH_ALLREDUCE_LOOP_H
#define HVD_BENCH_ALLREDUCE_LOOP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

typedef struct {
  int rank, size;
  void (*sum)(float *buf, size_t n); /* in place, every rank's buf */
  double (*max)(double v);           /* the largest v over ranks */
  void (*abort_job)(void);
} peer_lib;

static void loop_fill(float *buf, size_t n, int rank) {
  for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1) + (float)(i % 5);
}

static int loop_check(const float *buf, size_t n, int size) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (float)(size * (size + 1) / 2) + (float)size * (float)(i % 5)) return -1;
  return 0;
}

/* Adds the time of `count` checked allreduces to *spent; -1 on a wrong result. */
static int loop_runs(const peer_lib *p, float *buf, size_t n, int count, double *spent) {
  for (int i = 0; i < count; i++) {
    loop_fill(buf, n, p->rank);
    double t0 = now_s();
    p->sum(buf, n);
    *spent += now_s() - t0;
    if (loop_check(buf, n, p->size) < 0) return -1;
  }
  return 0;
}

/* Reads --min-bytes and --max-bytes from argv (other arguments are the
 * caller's), times every size, prints rank 0's CSV; 0, or 1 on failure. */
static int allreduce_loop(const peer_lib *p, int argc, char **argv) {
  size_t min_bytes = 8, max_bytes = 256u << 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc)
      min_bytes = strtoull(argv[++i], NULL, 10);
    if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
      max_bytes = strtoull(argv[++i], NULL, 10);
  }
  float *buf = (float *)malloc(max_bytes);
  if (!buf) return 1;
  double t0 = now_s();
  for (float flag[1] = {0}; !p->max(now_s() - t0 >= BENCH_SETTLE_S);) /* timing.h */
    p->sum(flag, 1);
  if (p->rank == 0) printf("op,bytes,time_us,algbw_GBps,busbw_GBps\n");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    size_t n = bytes / sizeof(float);
    int iters = bench_iters(bytes);
    double spent = 0.0, batch[5];
    int bad = loop_runs(p, buf, n, 2, &spent);
    for (int b = 0; b < 5; b++) {
      spent = 0.0;
      bad |= loop_runs(p, buf, n, iters, &spent);
      batch[b] = p->max(spent / iters);
    }
    if (p->max(bad ? 1.0 : 0.0) != 0.0) {
      if (p->rank == 0) fprintf(stderr, "%s: wrong result at %zu bytes\n", argv[0], bytes);
      p->abort_job();
      free(buf);
      return 1;
    }
    qsort(batch, 5, sizeof batch[0], by_value);
    double s = batch[2], algbw = (double)bytes / s / 1e9;
    if (p->rank == 0)
      printf("allreduce,%zu,%.2f,%.4f,%.4f\n", bytes, s * 1e6, algbw,
             algbw * 2.0 * (p->size - 1) / p->size);
    fflush(stdout);
  }
  free(buf);
  return 0;
}

#endif
