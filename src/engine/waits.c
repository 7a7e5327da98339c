/*
 * waits.c -- whether this rank is blocked (waits.h).
 *
 * Counters are atomics, read without a lock by the thread that builds the
 * cycle's message: they may be read mid-change, which the certain-deadlock
 * check tolerates by wanting the same verdict for seconds.  A thread's own
 * state (its wait depth, whether it is a submitter of this engine) is
 * thread-local; a submitter that exits is forgotten through a key's
 * destructor.
 */
#include "waits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

static _Atomic uint32_t generation = 1; /* of the engine the counters belong to */
static _Atomic int waiting;             /* threads in a wait */
static _Atomic int submitters;          /* live submitter threads */
static _Atomic int submitters_waiting;  /* of them, in a wait */
static _Atomic int graph_live, graph_in_flight;

typedef struct {
  uint32_t gen;  /* a submitter of this generation, or 0 */
  int depth;     /* nested waits */
  int untracked; /* the next enqueue is not this thread's to track */
} thread_state;

static _Thread_local thread_state me;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static int mine(void) {
  return me.gen != 0 && me.gen == atomic_load_explicit(&generation, memory_order_relaxed);
}

/* A submitter thread ends: it submits nothing more. */
static void thread_gone(void *gen) {
  if ((uint32_t)(uintptr_t)gen == atomic_load(&generation)) atomic_fetch_sub(&submitters, 1);
}

static void make_key(void) { (void)pthread_key_create(&exit_key, thread_gone); }

void hvd__waits_reset(void) {
  atomic_fetch_add(&generation, 1);
  atomic_store(&submitters, 0);
  atomic_store(&submitters_waiting, 0);
  /* `waiting` is not reset: a thread still in a wait leaves it; nor are
   * the graph ops, which outlive an engine (TensorFlow keeps its kernels) */
}

void hvd__waits_untracked(void) { me.untracked = 1; }

void hvd__waits_untracked_drop(void) { me.untracked = 0; }

void hvd__waits_submitted(void) {
  if (me.untracked) {
    me.untracked = 0;
    return;
  }
  if (me.depth > 0 || mine()) return;
  uint32_t gen = atomic_load(&generation);
  pthread_once(&key_once, make_key);
  /* without the key the thread stays a submitter after it exits: the
   * rank is then never blocked, which errs on the safe side */
  (void)pthread_setspecific(exit_key, (void *)(uintptr_t)gen);
  me.gen = gen;
  atomic_fetch_add(&submitters, 1);
}

void hvd__waits_enter(void) {
  if (me.depth++ > 0) return;
  atomic_fetch_add(&waiting, 1);
  if (mine()) atomic_fetch_add(&submitters_waiting, 1);
}

void hvd__waits_leave(void) {
  if (--me.depth > 0) return;
  atomic_fetch_sub(&waiting, 1);
  if (mine()) atomic_fetch_sub(&submitters_waiting, 1);
}

void hvd__waits_graph(int live, int in_flight) {
  if (live) atomic_fetch_add(&graph_live, live);
  if (in_flight) atomic_fetch_add(&graph_in_flight, in_flight);
}

void hvd__waits_op(int delta) { atomic_fetch_add(&waiting, delta); }

int hvd__waits_blocked(void) {
  int w = atomic_load_explicit(&waiting, memory_order_relaxed);
  int s = atomic_load_explicit(&submitters, memory_order_relaxed);
  int sw = atomic_load_explicit(&submitters_waiting, memory_order_relaxed);
  int gl = atomic_load_explicit(&graph_live, memory_order_relaxed);
  int gf = atomic_load_explicit(&graph_in_flight, memory_order_relaxed);
  return (w > 0 || gf > 0) && sw >= s && gf >= gl;
}
