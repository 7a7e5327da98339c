/*
 * allreduce_bench.c -- allreduce time, algbw and busbw per size, with
 * nccl-tests' definitions:
 *   algbw = bytes / time
 *   busbw = algbw * 2(n-1)/n   (the bandwidth each link must carry in a
 *                               bandwidth-optimal allreduce)
 *
 *   hvdrun -np 4 ./allreduce_bench [max_bytes]
 *
 * Times are medians over several repetitions, measured on rank 0 after a
 * barrier.  The full benchmark (hvd-bench) comes with the speed work.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime with plain -std=c11 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hvd.h>

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median seconds of `reps` allreduces of `count` floats. */
static int time_allreduce(float *buf, size_t count, int reps, double *median) {
  double t[32];
  for (int i = 0; i < reps; i++) {
    int rc = hvd_barrier();
    double t0 = seconds();
    if (rc == 0) rc = hvd_allreduce(buf, buf, count, HVD_FLOAT32, HVD_SUM, "bench");
    if (rc < 0) return rc;
    t[i] = seconds() - t0;
  }
  qsort(t, (size_t)reps, sizeof t[0], by_value);
  *median = t[reps / 2];
  return 0;
}

int main(int argc, char **argv) {
  size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (64u << 20);
  int rc = hvd_init();
  if (rc < 0) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  int n = hvd_size();
  float *buf = calloc(max_bytes / sizeof(float) + 1, sizeof(float));
  if (!buf) return 1;
  if (hvd_rank() == 0)
    printf("%12s %12s %12s %12s   (np=%d)\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s", n);
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
    double med;
    int reps = bytes >= (16u << 20) ? 5 : 15;
    rc = time_allreduce(buf, bytes / sizeof(float), reps, &med);
    if (rc < 0) {
      fprintf(stderr, "allreduce: %s\n", hvd_last_error());
      break;
    }
    double algbw = (double)bytes / med / 1e9;
    if (hvd_rank() == 0)
      printf("%12zu %12.1f %12.3f %12.3f\n", bytes, med * 1e6, algbw,
             algbw * 2.0 * (n - 1) / n);
  }
  free(buf);
  hvd_shutdown();
  return rc < 0;
}
