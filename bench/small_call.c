/*
 * small_call.c -- what hvd_allreduce of 2 floats costs a call at np 1, in
 * C: the floor under the bindings' per-call cost (bench/eager-small-call
 * compares them; issue 46 allows Python 2 us over it).
 *
 *   small_call [CALLS] [BATCHES]    (run under hvdrun -np 1)
 *
 * Prints "C hvd_allreduce,median,best,cpu" (us per call) and the same
 * for hvd_allreduce_async+hvd_wait: the median and the best wall-clock
 * time and the median CPU time of the process, of BATCHES (default 7)
 * batches of CALLS (default 20000) in-place allreduces, after one untimed
 * batch.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "hvd.h"
#include "timing.h"

/* The process's CPU time, every thread's, in seconds. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define MAX_BATCHES 64

/* One call: the blocking one, or (async) enqueue and wait, which is what
 * hvd._C does (the enqueue wakes the engine's thread; a blocking call
 * drives the cycle on its own thread). */
static int one_call(int async, float *buf) {
  if (!async) return hvd_allreduce(buf, buf, 2, HVD_FLOAT32, HVD_SUM, NULL);
  return hvd_wait(hvd_allreduce_async(buf, buf, 2, HVD_FLOAT32, HVD_SUM, NULL));
}

/* One batch: us per call of wall-clock time, and of the process's CPU
 * time in *cpu_us. */
static double batch_us(int async, int calls, float *buf, double *cpu_us) {
  double t0 = now_s(), c0 = cpu_s();
  for (int i = 0; i < calls; i++)
    if (one_call(async, buf) < 0) {
      fprintf(stderr, "small_call: %s\n", hvd_last_error());
      exit(1);
    }
  *cpu_us = (cpu_s() - c0) / calls * 1e6;
  return (now_s() - t0) / calls * 1e6;
}

/* Prints "label,median,best,cpu" over batches of batch_us(): the median
 * and the best wall-clock time, the median CPU time. */
static void report(const char *label, int async, int calls, int batches, float *buf) {
  double us[MAX_BATCHES], cpu[MAX_BATCHES];
  batch_us(async, calls, buf, &cpu[0]); /* untimed */
  for (int b = 0; b < batches; b++) us[b] = batch_us(async, calls, buf, &cpu[b]);
  qsort(us, (size_t)batches, sizeof us[0], by_value);
  qsort(cpu, (size_t)batches, sizeof cpu[0], by_value);
  printf("%s,%.2f,%.2f,%.2f\n", label, us[batches / 2], us[0], cpu[batches / 2]);
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 20000;
  int batches = argc > 2 ? atoi(argv[2]) : 7;
  if (calls < 1 || batches < 1 || batches > MAX_BATCHES) {
    fprintf(stderr, "usage: small_call [CALLS] [BATCHES <= %d]\n", MAX_BATCHES);
    return 2;
  }
  if (hvd_init() < 0) {
    fprintf(stderr, "small_call: %s\n", hvd_last_error());
    return 1;
  }
  float buf[2] = {1, 1};
  report("C hvd_allreduce", 0, calls, batches, buf);
  report("C hvd_allreduce_async+hvd_wait", 1, calls, batches, buf);
  hvd_shutdown();
  return 0;
}
