/*
 * test_desync.c -- certain deadlocks (engine/desync.c) and whether a rank
 * is blocked (engine/waits.c), driven by hand: an engine without a thread
 * or a communicator fed the messages a cycle would have allgathered, each
 * with its rank's blocked flag, and rank 0's HVD_MSG_DESYNC.
 *
 * A set of blocked ranks is stuck when every tensor each of them submitted
 * lacks a rank of the set; anything else is not (a rank that submitted
 * nothing, a tensor missing only a rank that may still submit, a tensor
 * ready to run, a rank that joined).  The verdict is every rank's, once
 * rank 0 asks for it, and names each stuck rank's tensors and the ranks
 * they miss.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/engine_int.h"
#include "engine/waits.h"
#include "request.h"

#define MAXR 4

static hvd_engine *engine(int size) {
  hvd_engine *e;
  assert_int_equal(hvd__engine_alloc(0, size, 64, &e), 0);
  e->stall.disable = 1;
  e->desync.timeout_s = 5;
  return e;
}

/* One cycle in which rank q submits subs[q] (a string of one-letter
 * names, "" for none) and says it is blocked when blocked[q]; with ask,
 * rank 0's message asks for the verdict.  Returns the stop it gave. */
static int cycle(hvd_engine *e, const char *const *subs, const int *blocked, int ask) {
  hvd_msg m[MAXR];
  memset(m, 0, sizeof m);
  for (int q = 0; q < e->size; q++) {
    for (const char *c = subs[q]; *c; c++) {
      char name[2] = {*c, 0};
      m[q].reqs = realloc(m[q].reqs, (m[q].nreq + 1) * sizeof *m[q].reqs);
      m[q].reqs[m[q].nreq++] = req_allreduce(name, HVD_FLOAT32, 1);
    }
    if (blocked[q]) m[q].flags |= HVD_MSG_BLOCKED;
  }
  if (ask) m[0].flags |= HVD_MSG_DESYNC;
  response *rs = NULL;
  int n = 0, stop = 0;
  assert_int_equal(hvd__negotiate(e, m, &rs, &n, &stop), 0);
  hvd__desync_check(e, m, &stop);
  hvd__responses_free(rs, n);
  for (int q = 0; q < e->size; q++) hvd__msg_free(&m[q]);
  e->cycle++;
  return stop;
}

static void test_two_ranks_on_different_tensors(void **state) {
  (void)state;
  hvd_engine *e = engine(2);
  assert_int_equal(cycle(e, (const char *[]){"a", "b"}, (int[]){1, 1}, 0), 0); /* not asked */
  assert_int_equal(cycle(e, (const char *[]){"", ""}, (int[]){1, 1}, 1), HVD_E_DESYNC);
  assert_non_null(strstr(e->core.why, "rank 0 waits on 'a' (missing ranks [1]); "
                                      "rank 1 waits on 'b' (missing ranks [0])"));
  hvd__engine_dealloc(e);
}

/* Rank 1 computes (not blocked): rank 0's wait is a stall. */
static void test_rank_that_may_still_submit(void **state) {
  (void)state;
  hvd_engine *e = engine(2);
  assert_int_equal(cycle(e, (const char *[]){"a", ""}, (int[]){1, 0}, 1), 0);
  /* rank 1 submitted another tensor and is not blocked: still none */
  assert_int_equal(cycle(e, (const char *[]){"", "b"}, (int[]){1, 0}, 1), 0);
  hvd__engine_dealloc(e);
}

/* 0 waits on 1, 1 on 2, 2 on 0: all stuck; break the cycle with a rank
 * that may go on, and none is. */
static void test_cycle_of_three_and_a_chain(void **state) {
  (void)state;
  hvd_engine *e = engine(3);
  /* a: 0 and 2 submitted (missing 1); b: 1 and 0 (missing 2); c: 2 and 1 (missing 0) */
  assert_int_equal(cycle(e, (const char *[]){"ab", "bc", "ca"}, (int[]){1, 1, 1}, 1), HVD_E_DESYNC);
  hvd__engine_dealloc(e);
  e = engine(3);
  assert_int_equal(cycle(e, (const char *[]){"ab", "bc", "ca"}, (int[]){1, 1, 0}, 1), 0);
  hvd__engine_dealloc(e);
}

/* A blocked rank with one tensor stuck and another that misses only a
 * rank that may still submit goes on once that one runs: not stuck; nor
 * are the ranks that wait on it. */
static void test_every_tensor_of_a_rank_must_be_stuck(void **state) {
  (void)state;
  /* a: ranks 0, 2 (missing 1); b: 1, 2 (missing 0): 0 and 1 are stuck */
  hvd_engine *e = engine(3);
  assert_int_equal(cycle(e, (const char *[]){"a", "b", "ab"}, (int[]){1, 1, 0}, 1), HVD_E_DESYNC);
  hvd__engine_dealloc(e);
  /* and c: ranks 0, 1 (missing 2, which computes): once it runs, 0 and 1 go on */
  e = engine(3);
  assert_int_equal(cycle(e, (const char *[]){"ac", "bc", "ab"}, (int[]){1, 1, 0}, 1), 0);
  hvd__engine_dealloc(e);
}

/* Rank 1 stuck with rank 0, rank 2 computing: a deadlock of a part of
 * the job is still one. */
static void test_part_of_the_job(void **state) {
  (void)state;
  hvd_engine *e = engine(3);
  assert_int_equal(cycle(e, (const char *[]){"a", "b", ""}, (int[]){1, 1, 0}, 1), HVD_E_DESYNC);
  assert_null(strstr(e->core.why, "rank 2 waits"));
  hvd__engine_dealloc(e);
}

/* A joined rank contributes zeros: a tensor it did not submit runs. */
static void test_joined_rank(void **state) {
  (void)state;
  hvd_engine *e = engine(2);
  assert_int_equal(cycle(e, (const char *[]){"a", ""}, (int[]){1, 1}, 0), 0);
  hvd_msg m[2];
  memset(m, 0, sizeof m);
  m[0].flags = HVD_MSG_BLOCKED | HVD_MSG_DESYNC;
  m[1].flags = HVD_MSG_BLOCKED | HVD_MSG_JOINED;
  response *rs = NULL;
  int n = 0, stop = 0;
  assert_int_equal(hvd__negotiate(e, m, &rs, &n, &stop), 0);
  hvd__desync_check(e, m, &stop);
  assert_int_equal(stop, 0);
  assert_int_equal(n, 1); /* 'a' runs with the joined rank's zeros */
  hvd__responses_free(rs, n);
  hvd__engine_dealloc(e);
}

/* Rank 0 times the same stuck ranks and asks once the timeout passed. */
static void test_rank_0_asks_after_the_timeout(void **state) {
  (void)state;
  hvd_engine *e = engine(2);
  e->desync.timeout_s = 1;
  assert_int_equal(cycle(e, (const char *[]){"a", "b"}, (int[]){1, 1}, 0), 0);
  hvd_msg mine;
  memset(&mine, 0, sizeof mine);
  for (int i = 0; i < 40 && !(mine.flags & HVD_MSG_DESYNC); i++) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    e->core.cycle_ns = 0; /* a new cycle's clock */
    assert_int_equal(cycle(e, (const char *[]){"", ""}, (int[]){1, 1}, 0), 0);
    e->core.cycle_ns = 0;
    hvd__desync_inspect(e, &mine);
  }
  assert_true(mine.flags & HVD_MSG_DESYNC);
  hvd__engine_dealloc(e);
}

/* ---- whether this rank is blocked (waits.c) ---- */

static void *submit_and_leave(void *arg) {
  (void)arg;
  hvd__waits_submitted();
  return NULL;
}

static void test_blocked_needs_every_submitter_waiting(void **state) {
  (void)state;
  hvd__waits_reset();
  assert_false(hvd__waits_blocked()); /* nobody waits */
  hvd__waits_op(1);                   /* an op its caller waits for (TensorFlow eager) */
  assert_true(hvd__waits_blocked());
  hvd__waits_op(-1);
  hvd__waits_enter();
  assert_true(hvd__waits_blocked());
  hvd__waits_leave();
  hvd__waits_submitted(); /* this thread may submit again... */
  hvd__waits_enter();     /* ...but waits now */
  assert_true(hvd__waits_blocked());
  hvd__waits_leave();
  /* another thread submitted and is gone: it submits nothing more */
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, submit_and_leave, NULL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  hvd__waits_op(1); /* this thread may still submit: an op waited for is not enough */
  assert_false(hvd__waits_blocked());
  hvd__waits_op(-1);
  /* a graph op not in flight: the executor may still submit it */
  hvd__waits_graph(1, 0);
  hvd__waits_enter();
  assert_false(hvd__waits_blocked());
  hvd__waits_graph(0, 1);
  assert_true(hvd__waits_blocked());
  hvd__waits_leave();
  assert_false(hvd__waits_blocked()); /* this thread, a submitter, no longer waits */
  hvd__waits_graph(-1, -1);
  hvd__waits_reset(); /* a new engine: no submitter yet; the graph op in flight waits alone */
  hvd__waits_graph(1, 1);
  assert_true(hvd__waits_blocked());
  hvd__waits_graph(-1, -1);
  assert_false(hvd__waits_blocked());
}

static void *submit_and_stay(void *arg) {
  hvd__waits_submitted();
  pthread_mutex_lock(arg); /* held by the test until it has looked */
  pthread_mutex_unlock(arg);
  return NULL;
}

static void test_a_live_submitter_that_does_not_wait(void **state) {
  (void)state;
  hvd__waits_reset();
  pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&hold);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, submit_and_stay, &hold), 0);
  for (int i = 0; i < 1000; i++) { /* until it registered */
    hvd__waits_enter();
    int b = hvd__waits_blocked();
    hvd__waits_leave();
    if (!b) break;
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  hvd__waits_enter();
  assert_false(hvd__waits_blocked()); /* it may submit what we wait for */
  hvd__waits_untracked();             /* one we wait for at once: we stay no submitter */
  hvd__waits_submitted();
  hvd__waits_leave();
  pthread_mutex_unlock(&hold);
  assert_int_equal(pthread_join(t, NULL), 0);
  hvd__waits_enter();
  assert_true(hvd__waits_blocked());
  hvd__waits_leave();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_ranks_on_different_tensors),
      cmocka_unit_test(test_rank_that_may_still_submit),
      cmocka_unit_test(test_cycle_of_three_and_a_chain),
      cmocka_unit_test(test_every_tensor_of_a_rank_must_be_stuck),
      cmocka_unit_test(test_part_of_the_job),
      cmocka_unit_test(test_joined_rank),
      cmocka_unit_test(test_rank_0_asks_after_the_timeout),
      cmocka_unit_test(test_blocked_needs_every_submitter_waiting),
      cmocka_unit_test(test_a_live_submitter_that_does_not_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
