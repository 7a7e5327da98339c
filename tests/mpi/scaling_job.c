/*
 * scaling_job.c -- a training-shaped job for hvd-report's tests
 * (tests/launcher/test_report.py), with knobs that make it scale badly
 * on purpose.
 *
 *   hvdrun -np N scaling_job [steps] [compute_ms] [slow_ranks] [slow_ms]
 *
 * Each step "computes" (sleeps) half of compute_ms as a forward pass,
 * then a backward pass that hands hvd eight float32 gradients of
 * 16-256 KiB one by one, the last layer's first, with a slice of the
 * other half between them, as DistributedOptimizer does; then it waits
 * for all of them and checks the sums.  The ranks in slow_ranks (a comma
 * list, default none) compute slow_ms longer every step: one is a
 * straggler; all but rank 0 make every step's negotiation need a second
 * cycle (rank 0's later gradients are pending when the first cycle ends).
 * Sleeping stands for computing so that the ranks' timing does not depend
 * on how many cores the machine has.  Prints "rank R: OK" when every
 * result was right.
 */
#include <stdio.h>
#include <stdlib.h>

#include <hvd.h>

#include "testing.h"

#define LAYERS 8

static size_t count_of(int layer) { return (size_t)4096 << (layer % 5); } /* 16-256 KiB */

/* Whether rank is in the comma list. */
static int listed(const char *list, int rank) {
  for (const char *p = list; *p;) {
    char *end;
    if (strtol(p, &end, 10) == rank && end != p) return 1;
    p = *end == ',' ? end + 1 : end + (*end != '\0');
  }
  return 0;
}

static void nap(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (time_t)(ms / 1000)) * 1e6)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 30;
  double compute_ms = argc > 2 ? atof(argv[2]) : 4;
  const char *slow_ranks = argc > 3 ? argv[3] : "";
  double slow_ms = argc > 4 ? atof(argv[4]) : 0;
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank(), size = hvd_size(), bad = 0, slow = listed(slow_ranks, rank);
  static float grad[LAYERS][4096 << 4];
  for (int step = 0; step < steps && bad == 0; step++) {
    hvd_handle h[LAYERS];
    nap(compute_ms / 2 + (slow ? slow_ms : 0));
    for (int l = LAYERS - 1; l >= 0; l--) {
      char name[32];
      snprintf(name, sizeof name, "grad.layer%d", l);
      for (size_t i = 0; i < count_of(l); i++) grad[l][i] = (float)(rank + 1);
      nap(compute_ms / 2 / LAYERS);
      h[l] = hvd_allreduce_async(grad[l], grad[l], count_of(l), HVD_FLOAT32, HVD_SUM, name);
    }
    for (int l = LAYERS - 1; l >= 0; l--) {
      int rc = h[l] < 0 ? (int)h[l] : hvd_wait(h[l]);
      if (rc != 0) {
        fprintf(stderr, "rank %d: step %d layer %d: %s\n", rank, step, l, hvd_last_error());
        bad++;
      }
      bad += grad[l][count_of(l) - 1] != (float)(size * (size + 1) / 2);
    }
  }
  int rc = hvd_shutdown();
  printf("rank %d: %s\n", rank, bad == 0 && rc == 0 ? "OK" : "WRONG RESULTS");
  return bad != 0 || rc != 0;
}
