/*
 * core.h -- the bottom of the engine: what every other file of it needs
 * (core.c).  Entries and handles from enqueue to completion: the queue
 * application threads fill, the handles they wait on, this rank's entries
 * between the queue and negotiation's table (unsent, held for the fast
 * path), completion and failure, the engine breaking, the cycle's clock,
 * spare entries and handles.
 *
 * Nothing here calls a file above it (tests/layers/check.sh order): its
 * functions take the core part of the engine (hvd__core), never the
 * engine, so they cannot reach the parts the files above own.
 */
#ifndef HVD_ENGINE_CORE_H
#define HVD_ENGINE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cache.h"
#include "engine.h"
#include "index.h"

/* A handle: one or more entries (a group) complete it. */
typedef struct op {
  hvd_handle id;
  int remaining; /* entries not finished */
  int done;
  int status;     /* 0 or the first error */
  char *msg;      /* the first error's message */
  int64_t value;  /* join: last rank; process set add: its id */
  hvd_callback cb;
  void *cb_arg;
} op;

/* Dead objects of one type kept for reuse, linked through their own
 * first bytes: nothing else reads them while they are here. */
typedef struct spare_link {
  struct spare_link *next;
} spare_link;
typedef struct {
  spare_link *head;
  int n;
} spare_list;

/* One tensor of this rank, from enqueue to completion. */
typedef struct entry {
  hvd_work w;
  size_t *sendcounts; /* alltoall: a copy */
  int *ranks;         /* process set add: a copy */
  op *op;
  uint64_t key;       /* hvd__index_key of its name and set */
  hvd_ilink inflight; /* core.inflight: every entry not finished (the duplicate check) */
  hvd_ilink unsent;   /* core.unsent: taken from the queue, not yet in the pending table */
  int64_t held;       /* the response cache's id while this rank holds it for the
                       * cached fast path (core.held[id]), else -1 */
  uint64_t held_us;   /* when it started waiting there (hvd__now_us), read only
                       * with a timeline (this rank's "ready" when the fast path
                       * runs it) or at the next cycle that finds it held; 0: not yet */
  uint64_t held_cycle; /* the cycle that began holding it */
  int prereduced;     /* rider.c reduced it into recvbuf: execute only scales it */
  struct entry *next; /* the queue */
} entry;

/* The core part of the engine.  `lock` guards what application threads
 * touch (the queue, the handles, the names in flight, the engine's
 * flags, engine.c's); the rest is the driver's, one thread at a time. */
typedef struct hvd__core {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a handle finished */
  /* Under lock: */
  entry *queue, **queue_tail;
  hvd_index inflight; /* entries enqueued and not finished, for the duplicate-name check */
  op **ops;           /* handle table, indexed by slot */
  uint32_t *gens;     /* generation per slot */
  uint32_t nops, free_slot_hint;
  uint32_t epoch;     /* the top bits of every handle (hvd__engine_set_epoch) */
  int broken;
  char why[1024];     /* what broke or stopped the engine */
  op *join_op;
  int join_requested;
  /* Finished entries and released handles kept for the next enqueue:
   * otherwise each collective costs a calloc and a free of both, a fifth
   * of a small allreduce's time in the engine. */
  spare_list spare_entries, spare_ops;
  /* Operations completed (engine.c's thread watches for work a while
   * after it completed one).  Atomic: it reads them without the lock. */
  _Atomic uint32_t completions;
  /* The driver's: */
  hvd_index unsent;   /* this rank's entries not yet in the pending table */
  entry **held;       /* [nheld_cap]: the entry this rank holds under each cache id */
  uint32_t nheld, nheld_cap;
  entry *finish_later; /* finished in this cycle, completed by the driver under the
                        * lock it takes after the cycle anyway (rider.c) */
  uint64_t cycle_ns;  /* when this cycle began (CLOCK_MONOTONIC), 0 until read:
                       * hvd__engine_clock_ns() */
} hvd__core;

/* c + 1, for the engine's atomic counters: one thread at a time writes
 * each (the driver, or a holder of the lock) and others only read, so a
 * relaxed load and store do, not a locked read-modify-write (about 20
 * cycles each, three of them on every small call's way). */
#define HVD__BUMP(c) \
  atomic_store_explicit(&(c), atomic_load_explicit(&(c), memory_order_relaxed) + 1, \
                        memory_order_relaxed)

void hvd__core_init(hvd__core *c);
/* A condition whose timed waits are on CLOCK_MONOTONIC (deadlines are). */
void hvd__cond_init(pthread_cond_t *cond);
/* Frees what the core holds; entries still in the queue are not its. */
void hvd__core_free(hvd__core *c);
/* held[] for a cache of `capacity` ids, every id empty. */
int hvd__core_held_alloc(hvd__core *c, uint32_t capacity);

/* ---- entries and handles (under lock unless said) ---- */

/* A spare entry to fill (NULL: none kept), and an entry freed with what
 * it owns (any thread, no lock). */
entry *hvd__entry_spare(hvd__core *c);
void hvd__entry_free(entry *en);

/* A new handle (slot, generation, the epoch), and the handle h names
 * (NULL: unknown or released).  hvd__op_release gives its slot back. */
int hvd__op_new(hvd__core *c, op **out);
op *hvd__op_lookup(hvd__core *c, hvd_handle h);
void hvd__op_release(hvd__core *c, op *o);
/* Its error message, or the code's description when strdup() failed. */
const char *hvd__op_msg(const op *o);

/* ---- completion and failure (by the driver, or stop after it) ---- */

/* Finishes en (status 0, or the error with msg); its handle completes
 * with its last entry, calling its callback without the lock. */
void hvd__engine_finish(hvd__core *c, entry *en, int status, const char *msg);
/* hvd__engine_finish with "<op> '<tensor>': " before msg. */
void hvd__engine_fail_entry(hvd__core *c, entry *en, int status, const char *msg);
/* Under lock: the entry rider.c finished in this cycle (finish_later),
 * completed; the lock may be dropped for its callback. */
void hvd__engine_finish_later(hvd__core *c);

/* Fails every entry this rank still has in the core's hands (the queue,
 * unsent, held) and a waiting hvd_join with status, and marks the engine
 * broken so new work is refused (HVD_E_ABORTED) with the same reason.
 * The tensors in negotiation's table are negotiate.c's to fail
 * (hvd__table_fail): cycle.c breaks both. */
void hvd__engine_break(hvd__core *c, int status, const char *msg);

/* Completes the join round: every rank's hvd_join returns `last`. */
void hvd__engine_join_done(hvd__core *c, int last);

/* The driver's clock for this cycle (ns, CLOCK_MONOTONIC): read at its
 * first use in the cycle, then the same.  A small operation on an idle
 * engine runs without reading it (at 20-25 ns a read on a VM, a tenth of
 * the whole call). */
uint64_t hvd__engine_clock_ns(hvd__core *c);

/* ---- this rank's entries between the queue and the table (driver) ---- */

void hvd__unsent_add(hvd__core *c, entry *en);
/* Takes en out of unsent (and unholds it). */
void hvd__unsent_remove(hvd__core *c, entry *en);
/* This rank's unsent entry for req, taken out of unsent (NULL: none). */
entry *hvd__unsent_take(hvd__core *c, const hvd_request *req);
/* The cache gave id (-1: none) another tensor or new parameters: an entry
 * this rank holds under it goes back to the queue. */
void hvd__held_recheck(hvd__core *c, const hvd_cache *cache, int64_t id);

/* ---- results ---- */

/* allgather or alltoall (type) of host memory on comm through the set's
 * collectives: *out malloc()ed, counts[comm->size] received per rank. */
int hvd__gather(hvd_comm *comm, int type, const void *send, size_t count,
                const size_t *sendcounts, size_t esize, void **out, size_t *counts);
/* An allgather's or alltoall's result (out, counts[n]) handed to en's
 * caller, whichever path made it. */
void hvd__gather_deliver(entry *en, void *out, const size_t *counts, int n);
/* SIZE_MAX when the sum does not fit (counts a peer sent). */
size_t hvd__counts_sum(const size_t *counts, int n);

#endif /* HVD_ENGINE_CORE_H */
