/*
 * engine_stall.c -- the stall inspector, driven by tests/launcher/test_engine_stall.py.
 *
 * Rank 0 enqueues a tensor at once; every other rank is late with it.
 *
 *   engine_stall warn      the others enqueue 'late' 3 s late.  Run with
 *                          HOROVOD_STALL_CHECK_TIME_SECONDS=1: rank 0 logs a
 *                          stall warning naming 'late' and the missing ranks
 *                          (the launcher test reads its stderr), and the
 *                          allreduce then completes with the right sum.
 *   engine_stall disabled  the same with HOROVOD_STALL_CHECK_DISABLE=1: no
 *                          warning, no shutdown, the allreduce completes.
 *   engine_stall shutdown  the others never enqueue 'never'.  With
 *                          HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=2 rank 0's
 *                          wait fails with HVD_E_TIMEOUT naming 'never' (and
 *                          the missing ranks: checked by the launcher test),
 *                          and its next call fails with HVD_E_ABORTED; the
 *                          late ranks, arriving 6 s later, are refused with
 *                          HVD_E_ABORTED too.
 *
 *   engine_stall join      rank 0 calls hvd_join() at once, the others 3 s
 *                          later.  With HOROVOD_STALL_CHECK_TIME_SECONDS=1
 *                          rank 0 warns that it waits in hvd_join for the
 *                          missing ranks; then every rank's hvd_join
 *                          returns the same rank, one of the late ones.
 *
 * Each rank prints one line "rank R: OK ..." or "rank R: FAILED ..." with
 * the messages it got, and exits 0 when its expectations held.
 */
#include <stdio.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

#define COUNT 100

/* Prints "rank R: OK <what>" or "rank R: FAILED <what>"; 0 if ok. */
static int report(int rank, int ok, const char *what) {
  printf("rank %d: %s %s\n", rank, ok ? "OK" : "FAILED", what);
  fflush(stdout);
  return ok ? 0 : 1;
}

/* warn / disabled: the late ranks arrive after 3 s; the sum must be right. */
static int late_allreduce(int rank, int size) {
  float x[COUNT];
  for (int i = 0; i < COUNT; i++) x[i] = (float)(rank + i);
  if (rank != 0) sleep_ms(3000);
  double t0 = now();
  int rc = hvd_allreduce(x, x, COUNT, HVD_FLOAT32, HVD_SUM, "late");
  int bad = 0;
  for (int i = 0; rc == 0 && i < COUNT; i++)
    bad += x[i] != (float)(size * i + size * (size - 1) / 2);
  char what[1200];
  snprintf(what, sizeof what, "'late' completed after %.1f s: %s", now() - t0,
           rc == 0 ? (bad ? "WRONG VALUES" : "values right") : hvd_last_error());
  return report(rank, rc == 0 && bad == 0, what);
}

/* shutdown: rank 0 waits for 'never', the others are busy elsewhere. */
static int stalled_forever(int rank) {
  float x[COUNT] = {0};
  char what[1200];
  if (rank == 0) {
    double t0 = now();
    int rc = hvd_allreduce(x, x, COUNT, HVD_FLOAT32, HVD_SUM, "never");
    int ok = rc == HVD_E_TIMEOUT && strstr(hvd_last_error(), "'never'") != NULL;
    snprintf(what, sizeof what, "stalled 'never' failed after %.1f s: %s: %s", now() - t0,
             hvd_err_name(rc), hvd_last_error());
    int failed = report(rank, ok, what);
    rc = hvd_allreduce(x, x, COUNT, HVD_FLOAT32, HVD_SUM, "next");
    snprintf(what, sizeof what, "next call after the stall shutdown: %s: %s", hvd_err_name(rc),
             hvd_last_error());
    return report(rank, rc == HVD_E_ABORTED, what) | failed;
  }
  sleep_ms(6000); /* well past the 2 s shutdown: the engine gave up on us */
  int rc = hvd_allreduce(x, x, COUNT, HVD_FLOAT32, HVD_SUM, "never");
  snprintf(what, sizeof what, "arriving late after the stall shutdown: %s: %s",
           hvd_err_name(rc), hvd_last_error());
  return report(rank, rc == HVD_E_ABORTED, what);
}

/* join: rank 0 joins at once and waits for the late ones. */
static int late_join(int rank, int size) {
  if (rank != 0) sleep_ms(3000);
  int last = hvd_join();
  char what[1200];
  snprintf(what, sizeof what, "hvd_join returned %d%s%s", last, last < 0 ? ": " : "",
           last < 0 ? hvd_last_error() : "");
  return report(rank, last >= 1 && last < size, what);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "warn") != 0 && strcmp(mode, "disabled") != 0 &&
      strcmp(mode, "shutdown") != 0 && strcmp(mode, "join") != 0) {
    fprintf(stderr, "usage: engine_stall warn|disabled|shutdown|join\n");
    return 2;
  }
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank(), size = hvd_size();
  int rc = strcmp(mode, "shutdown") == 0 ? stalled_forever(rank)
           : strcmp(mode, "join") == 0   ? late_join(rank, size)
                                         : late_allreduce(rank, size);
  hvd_shutdown();
  return rc;
}
