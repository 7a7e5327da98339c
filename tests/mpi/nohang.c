/*
 * nohang.c -- no hang, ever (docs/reliability.md "No hang"): what each
 * rank does for tests/launcher/test_nohang.py and bench/nohang.
 *
 *   nohang desync    even ranks wait on allreduce 'grad.a', odd ranks on
 *                    'grad.b': a certain deadlock, ended with HVD_E_DESYNC
 *   nohang order     every rank waits on 'a' then 'b', except the last
 *                    rank, which waits on 'b' then 'a'
 *   nohang frozen    the last rank stops itself (SIGSTOP) while the others
 *                    loop on an allreduce
 *   nohang loop      every rank loops on an allreduce, after saying
 *                    "rank R: running" once: for a cause from outside
 *                    (a host's link cut, tests/cluster)
 *   nohang stuck     the last rank's engine thread gets stuck outside hvd
 *                    (in a completion callback that never returns) while
 *                    its process runs on
 *   nohang busy S    rank 0 computes (sleeps) S seconds before it submits
 *                    'late'; the others wait on it: a stall, never ended
 *   nohang async S   rank 0 submits 'a' and, S seconds later, 'b'; rank 1
 *                    waits on 'b' first, then submits and waits on 'a';
 *                    the others submit both: out of order, never ended
 *
 * Each rank prints one line: "rank R: ended CODE after T s: MESSAGE" when
 * an error ended its wait (T from the moment the cause was set up: the
 * last collective that completed before it), or "rank R: completed after
 * T s" when everything completed with the right sums.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

static int rank, size;

static int ended(int rc, double since) {
  printf("rank %d: ended %s after %.2f s: %s\n", rank, hvd_err_name(rc), now() - since,
         hvd_last_error());
  fflush(stdout);
  hvd_shutdown();
  return 3; /* non-zero: hvdrun ends the ranks that are stopped or stuck */
}

static int completed(double since) {
  printf("rank %d: completed after %.2f s\n", rank, now() - since);
  fflush(stdout);
  hvd_shutdown();
  return 0;
}

/* One float allreduce named `name` (rank + 1 everywhere: the sum is known). */
static int sum(const char *name) {
  float x = (float)(rank + 1);
  int rc = hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, name);
  if (rc == 0 && x != (float)(size * (size + 1) / 2)) {
    printf("rank %d: '%s' summed to %g\n", rank, name, (double)x);
    exit(1);
  }
  return rc;
}

static int desync(void) {
  CALL(sum("start"));
  double t0 = now();
  int rc = sum(rank % 2 ? "grad.b" : "grad.a");
  return rc ? ended(rc, t0) : completed(t0);
}

static int order(void) {
  CALL(sum("start"));
  double t0 = now();
  int last = rank == size - 1, rc = sum(last ? "b" : "a");
  if (rc == 0) rc = sum(last ? "a" : "b");
  return rc ? ended(rc, t0) : completed(t0);
}

/* With `stop`, the last rank stops itself at the 20th step. */
static int loop(int stop) {
  double t0 = now();
  for (int it = 0;; it++) {
    if (stop && rank == size - 1 && it == 20) raise(SIGSTOP);
    if (it == 1) {
      printf("rank %d: running\n", rank);
      fflush(stdout);
    }
    int rc = sum("step");
    if (rc) return ended(rc, t0);
    t0 = now();
  }
}

static void never_returns(hvd_handle h, int status, void *arg) {
  (void)h, (void)status, (void)arg;
  for (;;) sleep_ms(1000);
}

static int stuck(void) {
  double t0 = now();
  for (int it = 0;; it++) {
    if (rank == size - 1 && it == 20) {
      /* its completion runs on whichever thread drives the engine: that
       * thread never comes back */
      static float x;
      hvd_opts o = HVD_OPTS_INIT;
      o.callback = never_returns;
      x = (float)(rank + 1);
      CALL(hvd_allreduce_async_opts(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "step", &o));
      for (;;) sleep_ms(1000); /* the process runs on, its engine does not */
    }
    int rc = sum("step");
    if (rc) return ended(rc, t0);
    t0 = now();
  }
}

static int busy(int seconds) {
  CALL(sum("start"));
  double t0 = now();
  if (rank == 0) sleep_ms(seconds * 1000); /* the user's code: no hvd at all */
  int rc = sum("late");
  return rc ? ended(rc, t0) : completed(t0);
}

static int async(int seconds) {
  CALL(sum("start"));
  double t0 = now();
  float a = (float)(rank + 1), b = a;
  hvd_handle ha = -1, hb = -1;
  int rc = 0;
  if (rank == 1) { /* b first, alone, waited on at once */
    rc = sum("b");
    b = (float)(size * (size + 1) / 2);
  } else {
    CALL(ha = hvd_allreduce_async(&a, &a, 1, HVD_FLOAT32, HVD_SUM, "a"));
    if (rank == 0) sleep_ms(seconds * 1000);
    CALL(hb = hvd_allreduce_async(&b, &b, 1, HVD_FLOAT32, HVD_SUM, "b"));
  }
  if (rc == 0 && rank == 1) rc = sum("a"), a = b;
  if (rc == 0 && ha >= 0) rc = hvd_wait(ha);
  if (rc == 0 && hb >= 0) rc = hvd_wait(hb);
  if (rc) return ended(rc, t0);
  if (a != b || b != (float)(size * (size + 1) / 2)) {
    printf("rank %d: a %g, b %g\n", rank, (double)a, (double)b);
    return 1;
  }
  return completed(t0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  int seconds = argc > 2 ? atoi(argv[2]) : 12;
  if (init_or_complain() != 0) return 1;
  rank = hvd_rank(), size = hvd_size();
  if (strcmp(mode, "desync") == 0) return desync();
  if (strcmp(mode, "order") == 0) return order();
  if (strcmp(mode, "frozen") == 0) return loop(1);
  if (strcmp(mode, "loop") == 0) return loop(0);
  if (strcmp(mode, "stuck") == 0) return stuck();
  if (strcmp(mode, "busy") == 0) return busy(seconds);
  if (strcmp(mode, "async") == 0) return async(seconds);
  fprintf(stderr, "usage: nohang desync|order|frozen|loop|stuck|busy S|async S\n");
  return 2;
}
