/*
 * ranks.h -- N ranks as threads of one process, for the unit tests of the
 * transports and the collectives (test_tcp.c, test_shm_coll.c,
 * test_hybrid.c).  Include after <cmocka.h>.
 *
 * A test builds its ranks' transports (or communicators over them) its
 * own way, then runs a function on every rank at once, each on its own
 * thread.  cmocka's asserts may only run on the test's thread, so a rank
 * only returns a result: its return code, and the message of its
 * thread's hvd_last_error() when that is not 0.  The test's thread then
 * checks them, or re-raises the first rank's failure as its own
 * (ranks_assert_ok).
 */
#ifndef HVD_TESTS_UNIT_RANKS_H
#define HVD_TESTS_UNIT_RANKS_H

#include <pthread.h>
#include <stdio.h>

#include "comm.h"
#include "common.h"

#define RANKS_MAX 8
#define RANKS_ERR_MAX 512

typedef int ranks_fn(int rank, void *arg);
typedef int ranks_comm_fn(hvd_comm *c, int rank, void *arg);

typedef struct thread_ranks thread_ranks;

typedef struct {
  thread_ranks *g;
  int rank;
  ranks_fn *fn;
  void *arg;
  pthread_t th;
} ranks_thread;

/* Needs no initialisation: ranks_start sets what it uses. */
struct thread_ranks {
  int rc[RANKS_MAX];                 /* what each rank's function returned */
  char err[RANKS_MAX][RANKS_ERR_MAX]; /* and its error message, "" for 0 */
  ranks_thread t[RANKS_MAX];
};

static inline void *ranks__main(void *p) {
  ranks_thread *t = p;
  int rc = t->fn(t->rank, t->arg);
  t->g->rc[t->rank] = rc;
  snprintf(t->g->err[t->rank], RANKS_ERR_MAX, "%s", rc ? hvd_last_error() : "");
  return NULL;
}

/* Starts fn(rank, arg) on rank's own thread. */
static inline void ranks_start(thread_ranks *g, int rank, ranks_fn *fn, void *arg) {
  assert_true(rank >= 0 && rank < RANKS_MAX);
  g->t[rank] = (ranks_thread){.g = g, .rank = rank, .fn = fn, .arg = arg};
  g->rc[rank] = 0;
  g->err[rank][0] = '\0';
  assert_int_equal(pthread_create(&g->t[rank].th, NULL, ranks__main, &g->t[rank]), 0);
}

/* Waits for rank's thread; its result is then in rc[rank], err[rank]. */
static inline void ranks_join(thread_ranks *g, int rank) {
  assert_int_equal(pthread_join(g->t[rank].th, NULL), 0);
}

/* Runs fn(rank, arg) on ranks 0..n-1 at once, all but `skip` (a rank that
 * does not come; -1 for none), and waits for them all. */
static inline void ranks_run(thread_ranks *g, int n, int skip, ranks_fn *fn, void *arg) {
  assert_true(n <= RANKS_MAX);
  for (int r = 0; r < n; r++)
    if (r != skip) ranks_start(g, r, fn, arg);
  for (int r = 0; r < n; r++)
    if (r != skip) ranks_join(g, r);
}

typedef struct {
  hvd_comm *comms;
  ranks_comm_fn *fn;
  void *arg;
} ranks__over_comms;

static inline int ranks__comm_main(int rank, void *p) {
  ranks__over_comms *o = p;
  return o->fn(&o->comms[rank], rank, o->arg);
}

/* ranks_run over communicators: rank r runs fn(&comms[r], r, arg). */
static inline void ranks_run_comms(thread_ranks *g, hvd_comm *comms, int n, int skip,
                                   ranks_comm_fn *fn, void *arg) {
  ranks__over_comms o = {comms, fn, arg};
  ranks_run(g, n, skip, ranks__comm_main, &o);
}

/* Fails the test with the first of ranks 0..n-1 that failed, by its
 * message. */
static inline void ranks_assert_ok(const thread_ranks *g, int n) {
  for (int r = 0; r < n; r++)
    if (g->rc[r] != 0) fail_msg("rank %d: %s", r, g->err[r]);
}

#endif
