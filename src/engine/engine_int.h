/*
 * engine_int.h -- the engine's private state, shared by its files, which
 * call one way, each only the ones below it (tests/layers/check.sh order):
 *   engine.c     what api.c calls, the engine's thread, start and stop,
 *                who drives the cycles (the engine's thread, or a caller
 *                waiting on an idle engine)
 *   cycle.c      one cycle: this rank's part, the exchange (the cached
 *                fast path, or every rank's message), the responses run
 *   desync.c     certain deadlocks: the ranks that can never go on, from
 *                every rank's blocked flag and the pending table
 *   negotiate.c  the cycle's deterministic decision: pending table,
 *                readiness, agreement, fusion into responses; rider.c
 *                beside it: a small allreduce carried in the fast path
 *   execute.c    running responses: joined ranks' zeros, the set's
 *                collectives; device.c (device.h) for device tensors
 *   pset.c       process sets; tuning.c the autotuner's side of a cycle
 *   core.c       the bottom (core.h): the queue, handles, this rank's
 *                entries, completion, failure, the cycle's clock; waits.c
 *                beside it (waits.h): whether this rank is blocked
 *
 * Locking: core.lock guards the queue, the handles, the names in flight
 * and the flags application threads set.  Everything else belongs to the
 * thread driving the cycle: one thread at a time (`driving`, taken and
 * given back under the lock, so each driver sees what the last one left).
 */
#ifndef HVD_ENGINE_INT_H
#define HVD_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "coll/coll.h"
#include "cache.h"
#include "core.h"
#include "device.h"
#include "engine.h"
#include "index.h"
#include "message.h"
#include "timeline.h"
#include "tuning.h"

enum { P_WAITING, P_READY, P_TAKEN };

/* What every rank knows about one tensor name being negotiated.  Built
 * only from what every rank received alike, so identical on every rank;
 * the table's order (arrival order, `seq`) is the execution order among
 * ready tensors. */
typedef struct pending {
  hvd_ilink link;     /* table.by_name */
  hvd_request req;    /* the first submitted request */
  uint64_t seq;       /* arrival number */
  /* Each rank's request and whether it submitted one; both NULL for a
   * tensor every rank submitted at once with the cached request (the
   * fast path: nothing to compare). */
  hvd_request *reqs;
  uint8_t *submitted;
  int nsubmitted;
  int state;          /* P_WAITING, P_READY (in table.ready), P_TAKEN (in a response) */
  int bad;            /* planning: the ranks disagree (check() fails) */
  entry *mine;        /* this rank's entry, if it submitted */
  uint64_t first_seen_ms; /* local clock: the stall inspector's (rank 0), 0 until it
                           * first sees it (hvd__stall_inspect) */
  uint64_t warned_ms;
  struct pending *prev, *next;           /* the table, in arrival order */
  struct pending *fuse_prev, *fuse_next; /* planning: ready allreduces of the same kind */
} pending;

/* A process set. */
typedef struct pset {
  int id;
  int *ranks; /* sorted global ranks */
  int n;
  hvd_comm comm; /* valid when this rank is a member */
  int member;
  struct pset *next;
} pset;

/* Blocked hvd_wait calls remembered between two cycles for the timeline. */
#define HVD_WAITS_MAX 64

/* A unit of execution: one collective over one or more tensors. */
typedef struct response {
  pending **items; /* the tensors, in order */
  int n, cap;
  int error;       /* 0, or every item fails with errmsg */
  char *errmsg;    /* malloc()ed with error (NULL if that failed): kept out of
                    * the struct, whose array is allocated every cycle */
} response;

/* The pending table (negotiate.c's): every tensor being negotiated. */
typedef struct {
  pending *head, *tail; /* in arrival order */
  hvd_index by_name;    /* the same, by name */
  uint64_t next_seq;
  pending **ready;      /* the ready tensors not yet planned */
  size_t nready, ready_cap;
  int rescan;           /* readiness may have changed for any tensor (joins, sets) */
  uint64_t visits;      /* tensors looked at by negotiation: its cost, for tests */
} hvd__table;

/* The join round (negotiate.c's). */
typedef struct {
  int n;                /* ranks joined */
  uint8_t *joined;      /* [size]: joined in the current round */
  uint64_t *cycle;      /* [size]: the cycle each joined in */
  uint64_t since_ms, warned_ms; /* local clock: the stall inspector's */
} hvd__join;

/* The stall inspector (negotiate.c's, rank 0's): its settings and its
 * last look. */
typedef struct {
  int disable;
  long check_s, shutdown_s;
  uint64_t inspected_ms;
} hvd__stall;

/* The cached fast path (cycle.c's) and the rider on it (rider.c's). */
typedef struct {
  int on;               /* the autotuner may switch it */
  uint8_t *vec;         /* the vector of cache bits */
  size_t cap;
  int64_t rider;        /* the cache id that may ride the vector, or -1 */
  int64_t alone_last;   /* the id that last ran alone on the fast path, or -1 */
  uint32_t *alone_next; /* [cache capacity]: 1 + the id that ran alone next after each, 0 */
  size_t rider_max;     /* HOROVOD_FAST_PATH_RIDER_BYTES */
  uint8_t *rider_buf;   /* the records gathered */
  size_t rider_cap;
  /* Tensors run on the fast path's agreement, cycles that took the full
   * exchange and tensors that rode, for tests (read by any thread, hence
   * atomic). */
  _Atomic uint64_t tensors, full_cycles, rider_tensors;
} hvd__fast;

/* The engine: its parts, each changed by the file that owns it, and the
 * settings they share. */
/* Certain deadlocks (desync.c's). */
typedef struct {
  long timeout_s;     /* HOROVOD_DESYNC_TIMEOUT_SECONDS (rank 0's decides) */
  uint8_t *blocked;   /* [size]: HVD_MSG_BLOCKED in each rank's last full message */
  uint8_t *stuck;     /* [size], rank 0: the stuck ranks it last found */
  uint64_t since_ms;  /* rank 0: since when they are stuck (local clock); 0: none */
  uint64_t checked_ms;
} hvd__desync;

struct hvd_engine {
  hvd__core core;      /* core.c: the queue, handles, this rank's entries, the lock */
  hvd__table table;    /* negotiate.c */
  hvd__join join;      /* negotiate.c */
  hvd__stall stall;    /* negotiate.c */
  hvd__desync desync;  /* desync.c */
  hvd__fast fast;      /* cycle.c, rider.c */
  hvd__tuning tuning;  /* tuning.c */
  hvd__device dev;     /* device.c: what the device paths made */
  /* engine.c's: */
  pthread_t thread;
  pthread_cond_t work; /* work arrived for an idle engine (CLOCK_MONOTONIC) */
  /* Under core.lock: */
  int driving;        /* a thread runs cycles (see engine.c) */
  int finished;       /* a cycle ended the engine (shutdown or failure) */
  /* The period's clock.  last_cycle_ns: when the last cycle started
   * (ended, where it began without a look at the clock), read while busy;
   * beat_ns: when the heartbeat's period began, that is when cycle was
   * seen to be beat_cycle. */
  uint64_t last_cycle_ns, beat_ns, beat_cycle;
  int stop_requested, stopped;
  /* Enqueues that asked for the engine's thread (the thread watches for
   * them a while after it completed an operation).  Atomic: it reads them
   * without the lock. */
  _Atomic uint32_t kicks;
  _Atomic uint64_t watched; /* watches a kick ended, for tests */
  int64_t watch_ns; /* how long; 0: never (ranks outnumber cores) */
  /* hvd_start_timeline / hvd_stop_timeline: the timeline to switch to at
   * the next cycle (tl_swap set, cycle.c switches), and how many switches
   * were asked for and done. */
  hvd_timeline *tl_next;
  _Atomic int tl_swap;
  uint64_t tl_asked, tl_done;
  /* While the engine writes a timeline (tl_on), the stretches of time
   * application threads spent blocked in hvd_wait, CLOCK_MONOTONIC
   * microseconds, for the driving thread to write out at its next cycle;
   * beyond HVD_WAITS_MAX between two cycles they are dropped. */
  int tl_on;
  struct { uint64_t start_us, end_us; } waits[HVD_WAITS_MAX];
  int nwaits;
  /* The driver's (see the top): */
  hvd_comm *global;
  int rank, size;
  pset *psets;        /* pset.c's */
  int next_pset_id;
  hvd_cache *cache;
  hvd_timeline *tl;
  double cycle_ms;    /* HOROVOD_CYCLE_TIME (the autotuner may change it) */
  size_t fusion_threshold; /* HOROVOD_FUSION_THRESHOLD (likewise) */
  uint64_t cycle;
  void *scratch;      /* execute.c's: zeros for a joined rank, scratch for
                       * broadcast/reducescatter */
  size_t scratch_cap;
};

/* engine.c */
/* Allocates an engine of `size` ranks without a thread or a
 * communicator (global NULL): the state negotiation needs, for
 * hvd__engine_start and for tests that drive negotiation by hand. */
int hvd__engine_alloc(int rank, int size, uint32_t cache_capacity, hvd_engine **out);
void hvd__engine_dealloc(hvd_engine *e);

/* cycle.c: runs one cycle on the calling thread, which must be driving,
 * with the queue it took (taken) and this rank's flags (HVD_MSG_SHUTDOWN,
 * HVD_MSG_JOINED) read with it under the lock.  0: go on; 1: the engine
 * finished (shutdown, or a failure that broke it). */
int hvd__cycle(hvd_engine *e, entry *taken, uint32_t flags);
/* The timeline's "hvd_job" event (the settings), and the waits
 * application threads reported since the last cycle. */
void hvd__engine_timeline_job(hvd_engine *e);
void hvd__engine_timeline_waits(hvd_engine *e);

/* desync.c: after a full exchange's negotiation, every rank: the ranks'
 * blocked flags, and rank 0's HVD_MSG_DESYNC decided (*stop set to
 * HVD_E_DESYNC, core.why saying why; returns 1); rank 0 also times how
 * long the stuck ranks stay stuck.  Before the exchange, rank 0: the flag
 * into its message once they stayed stuck for the timeout. */
int hvd__desync_check(hvd_engine *e, const hvd_msg *msgs, int *stop);
void hvd__desync_inspect(hvd_engine *e, hvd_msg *mine);

/* negotiate.c */
/* The ranks of p's set that neither submitted p nor joined, into out
 * ([size]); how many.  "[1, 2]" of n ranks into buf. */
int hvd__pending_missing(hvd_engine *e, const pending *p, int *out);
void hvd__format_ranks(char *buf, size_t cap, const int *ranks, int n);
/* Step 1 for one rank's full message (every rank applies every rank's). */
int hvd__negotiate_apply(hvd_engine *e, int q, const hvd_msg *m);
/* Every rank submitted the cached request `id` (the fast path). */
int hvd__negotiate_agreed(hvd_engine *e, uint32_t id);
/* Steps 2-4: the responses to run, in order. */
int hvd__negotiate_plan(hvd_engine *e, response **out, int *nout);
/* The flags of every rank's message: shutdown, joins, stall failures.
 * *stop set when the engine must stop: HVD_E_ABORTED (a rank called
 * hvd_shutdown) or HVD_E_TIMEOUT (the stall inspector made every rank
 * give up), core.why saying why; returns 1 in the second case (nothing
 * else runs this cycle). */
int hvd__negotiate_flags(hvd_engine *e, const hvd_msg *msgs, int *stop);
int hvd__negotiate(hvd_engine *e, hvd_msg *msgs, response **out, int *nout, int *stop);
void hvd__stall_inspect(hvd_engine *e, hvd_msg *mine);
/* Fails this rank's tensors in the table with status and msg, and
 * empties it (the engine breaking, cycle.c). */
void hvd__table_fail(hvd_engine *e, int status, const char *msg);
/* Frees what the table holds, at the engine's end. */
void hvd__table_free(hvd__table *t);

/* rider.c: the id that may ride this cycle's fast exchange (-1: none)
 * and the algorithm its collective would run; the vector's exchange with
 * it (n bytes at fast.vec, MIN-reduced there);
 * after a fast cycle, what rides next. */
int64_t hvd__rider_id(const hvd_engine *e, hvd_ar_algo *algo);
int hvd__rider_exchange(hvd_engine *e, int64_t id, hvd_ar_algo algo, size_t n);
/* After an exchange: finishes the rider when it rode alone; 1 if it did. */
int hvd__rider_finish(hvd_engine *e);
void hvd__rider_learn(hvd_engine *e);

/* execute.c */
int hvd__execute(hvd_engine *e, response *r);
/* Negotiation's tensors, once out of its table, and a cycle's responses. */
void hvd__pending_free(pending *p);
void hvd__responses_free(response *rs, int n);

/* pset.c */
pset *hvd__pset_find(hvd_engine *e, int id);
int hvd__pset_add(hvd_engine *e, const int *ranks, int n, int *id);
int hvd__pset_remove(hvd_engine *e, int id);
void hvd__psets_free(hvd_engine *e);

#endif /* HVD_ENGINE_INT_H */
