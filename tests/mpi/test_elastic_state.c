/*
 * test_elastic_state.c -- the elastic state of hvd.h in a job whose
 * membership does not change (the changes themselves are driven by
 * tests/cluster and tests/launcher through hvdrun's elastic driver):
 *
 *   - restore before any commit gives the state as added; after a commit,
 *     the committed state, buffers and hooks alike;
 *   - sync makes every rank's state rank 0's (buffers, then hooks, then
 *     saves it); when every rank holds the same commit it sends nothing;
 *   - commit outside an elastic job never reports host updates;
 *   - hvd_elastic_run recovers from a failed step: restore, a new job
 *     (hvd_shutdown + hvd_init through hvdrun's rendezvous), the reset
 *     callback, sync, and the step again; process sets come back with
 *     their ids; a handle from before the new job is refused as stale;
 *   - errors that a new job cannot mend come back out of the run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, checks, failures;

typedef struct {
  int saves, restores, syncs;
  int value, saved; /* state the program keeps itself */
} outside;

static int save_hook(void *arg) {
  outside *o = arg;
  o->saves++;
  o->saved = o->value;
  return 0;
}

static int restore_hook(void *arg) {
  outside *o = arg;
  o->restores++;
  o->value = o->saved;
  return 0;
}

static int sync_hook(void *arg) {
  outside *o = arg;
  o->syncs++;
  return hvd_broadcast(&o->value, 1, HVD_INT32, 0, "test.outside.value");
}

static void fill(double *v, int n, double base) {
  for (int i = 0; i < n; i++) v[i] = base + i;
}

static int equal_to(const double *v, int n, double base) {
  for (int i = 0; i < n; i++)
    if (v[i] != base + i) return 0;
  return 1;
}

static void test_commit_restore_sync(void) {
  double params[64];
  int step = 100 + rank;
  outside o = {0, 0, 0, 7 * (rank + 1), 7 * (rank + 1)};
  hvd_elastic_hooks hooks = {save_hook, restore_hook, sync_hook};
  fill(params, 64, 10.0 * rank);
  hvd_elastic_state *st = hvd_elastic_state_new();
  CALL(hvd_elastic_state_add(st, "params", params, sizeof params));
  CALL(hvd_elastic_state_add(st, "step", &step, sizeof step));
  CALL(hvd_elastic_state_add_hooks(st, &hooks, &o));
  CHECK(hvd_elastic_state_add(st, "step", &step, sizeof step) == HVD_E_INVALID,
        "a name added twice is refused");

  /* Before any commit: back to the state as added (hooks: nothing saved yet). */
  params[3] = -1;
  step = -1;
  CALL(hvd_elastic_restore(st));
  CHECK(equal_to(params, 64, 10.0 * rank) && step == 100 + rank, "restore before commit");

  /* Sync: rank 0's everywhere, and saved. */
  CALL(hvd_elastic_sync(st));
  CHECK(equal_to(params, 64, 0.0) && step == 100, "sync gives rank 0's state (step %d)", step);
  CHECK(o.value == 7 && o.syncs == 1 && o.saves == 1, "hooks: value %d syncs %d saves %d",
        o.value, o.syncs, o.saves);
  params[0] = 99;
  CALL(hvd_elastic_restore(st));
  CHECK(params[0] == 0.0, "a sync saves what it synced");

  /* Commit, change, restore: the committed state comes back. */
  fill(params, 64, 500.0);
  step = 200;
  o.value = 42;
  CALL(hvd_elastic_commit(st));
  fill(params, 64, -3.0);
  step = 201;
  o.value = 43;
  CALL(hvd_elastic_restore(st));
  CHECK(equal_to(params, 64, 500.0) && step == 200 && o.value == 42 && o.restores == 3,
        "restore after commit: step %d value %d restores %d", step, o.value, o.restores);

  /* Every rank holds commit 1 now: a sync sends nothing, so a rank's
   * own (uncommitted) changes stay. */
  params[1] = 1000.0 + rank;
  CALL(hvd_elastic_sync(st));
  CHECK(params[1] == 1000.0 + rank && o.syncs == 1, "a sync over equal commits sends nothing");
  CALL(hvd_elastic_restore(st));

  /* Outside an elastic job there are never host updates. */
  for (int i = 0; i < 3; i++) CHECK(hvd_elastic_commit(st) == 0, "commit %d", i);
  CHECK(hvd_elastic_check_host_updates(st) == 0, "no host updates");
  hvd_elastic_state_free(st);
}

/* ---- hvd_elastic_run across a new job ---- */

typedef struct {
  int calls, resets;
  int pset;            /* a process set added before the run */
  hvd_handle before;   /* a handle enqueued before the failure, never waited */
  double grad[4];
  int fail_with;       /* what the first call returns */
} run_ctx;

static int on_reset(void *arg) {
  run_ctx *c = arg;
  c->resets++;
  return 0;
}

static int train(hvd_elastic_state *st, void *arg) {
  run_ctx *c = arg;
  (void)st;
  c->calls++;
  if (c->calls == 1) {
    /* Something in flight when the job goes away. */
    c->before = hvd_allreduce_async(c->grad, c->grad, 4, HVD_FLOAT64, HVD_SUM, "test.inflight");
    return c->fail_with;
  }
  return 0;
}

static void test_run_recovers(void) {
  run_ctx c = {0, 0, 0, -1, {1, 2, 3, 4}, HVD_E_PEER_LOST};
  int epoch = 5 + rank, want_ranks[1] = {size - 1};
  hvd_elastic_state *st = hvd_elastic_state_new();
  CALL(hvd_elastic_state_add(st, "epoch", &epoch, sizeof epoch));
  CALL(hvd_elastic_on_reset(st, on_reset, &c));
  CALL(c.pset = hvd_add_process_set(want_ranks, 1));
  CALL(hvd_elastic_commit(st)); /* commit 1 everywhere: the rank's own epoch */

  CALL(hvd_elastic_run(st, train, &c));
  CHECK(c.calls == 2 && c.resets == 1, "train called %d times, reset %d", c.calls, c.resets);
  /* After the failure: restored, then synced from rank 0?  Every rank
   * held commit 1, so the sync sent nothing and each kept its own. */
  CHECK(epoch == 5 + rank, "epoch %d after recovery", epoch);

  CHECK(hvd_process_set_size(c.pset) == 1, "process set %d is back (size %d)", c.pset,
        hvd_process_set_size(c.pset));
  CHECK(hvd_process_set_included(c.pset) == (rank == size - 1), "membership of set %d", c.pset);
  if (rank == size - 1) {
    double x = 2.0;
    hvd_opts in_set = HVD_OPTS_INIT;
    in_set.process_set = c.pset;
    CALL(hvd_wait(hvd_allreduce_async_opts(&x, &x, 1, HVD_FLOAT64, HVD_SUM, "test.in.set",
                                           &in_set)));
    CHECK(x == 2.0, "a collective on the re-added set");
  }
  int rc = hvd_wait(c.before);
  CHECK(rc == HVD_E_ABORTED && strstr(hvd_last_error(), "earlier job"),
        "a handle from before the new job: %s: %s", hvd_err_name(rc), hvd_last_error());
  double one = 1.0;
  CALL(hvd_allreduce(&one, &one, 1, HVD_FLOAT64, HVD_SUM, "test.after.run"));
  CHECK(one == size, "the new job reduces (%g)", one);

  /* A failure a new job cannot mend comes back out. */
  run_ctx bad = {0, 0, 0, -1, {0, 0, 0, 0}, HVD_E_MISMATCH};
  CHECK(hvd_elastic_run(st, train, &bad) == HVD_E_MISMATCH && bad.calls == 1 &&
            bad.resets == 0, "a mismatch is not retried");
  hvd_wait(bad.before);
  hvd_elastic_state_free(st);
}

int main(void) {
  limit_stalls();
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  test_commit_restore_sync();
  test_run_recovers();
  int r = hvd_rank(), n = hvd_size();
  hvd_shutdown();
  return report_checks("test_elastic_state", r, n, checks, failures);
}
