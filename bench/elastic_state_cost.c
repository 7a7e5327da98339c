/*
 * elastic_state_cost.c -- what an elastic state of MB megabytes costs:
 * a commit (the copy aside), a restore (the copy back), a sync that sends
 * nothing (every rank holds the same commit: after a lost worker), and a
 * sync that sends it all (a new worker joined).  Medians of REPS runs,
 * printed by rank 0 as one line of key=value.  Built and run by
 * bench/elastic-faults through hvdrun:
 *
 *   hvdrun -np 4 ... elastic_state_cost [MB] [REPS]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "timing.h"

#define REPS_MAX 64

static double median_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  long mb = argc > 1 ? atol(argv[1]) : 100;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (mb < 1 || reps < 1 || reps > REPS_MAX) {
    fprintf(stderr, "usage: elastic_state_cost [MB >= 1] [REPS 1..%d]\n", REPS_MAX);
    return 2;
  }
  if (hvd_init() != 0) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  size_t bytes = (size_t)mb << 20;
  char *buf = malloc(bytes);
  double commit[REPS_MAX], restore[REPS_MAX], skipped[REPS_MAX], full[REPS_MAX];
  int rc = buf ? 0 : HVD_E_NOMEM;
  if (buf) memset(buf, hvd_rank() + 1, bytes);
  for (int r = 0; rc == 0 && r < reps; r++) {
    hvd_elastic_state *st = hvd_elastic_state_new();
    double t0, t1, t2, t3, t4;
    rc = st ? hvd_elastic_state_add(st, "model", buf, bytes) : HVD_E_NOMEM;
    t0 = now_s();
    if (rc == 0) rc = hvd_elastic_sync(st); /* a fresh state: rank 0's goes to everyone */
    t1 = now_s();
    if (rc == 0) rc = hvd_elastic_commit(st);
    t2 = now_s();
    if (rc == 0) rc = hvd_elastic_restore(st);
    t3 = now_s();
    if (rc == 0) rc = hvd_elastic_sync(st); /* the same commit everywhere: nothing sent */
    t4 = now_s();
    full[r] = t1 - t0;
    commit[r] = t2 - t1;
    restore[r] = t3 - t2;
    skipped[r] = t4 - t3;
    hvd_elastic_state_free(st);
  }
  if (rc < 0) {
    fprintf(stderr, "elastic_state_cost: %s\n", hvd_last_error());
  } else if (hvd_rank() == 0) {
    printf("state_mb=%ld ranks=%d commit_ms=%.1f restore_ms=%.1f sync_skipped_ms=%.2f "
           "sync_full_ms=%.1f\n", mb, hvd_size(), 1e3 * median_of(commit, reps),
           1e3 * median_of(restore, reps), 1e3 * median_of(skipped, reps),
           1e3 * median_of(full, reps));
  }
  free(buf);
  hvd_shutdown();
  return rc < 0;
}
