/*
 * engine_int.h -- the engine's private state, shared by its files, which
 * call one way, each only the ones below it (tests/layers/check.sh order):
 *   engine.c     what api.c calls, the engine's thread, start and stop,
 *                who drives the cycles (the engine's thread, or a caller
 *                waiting on an idle engine)
 *   cycle.c      one cycle: this rank's part, the exchange (the cached
 *                fast path, or every rank's message), the responses run
 *   negotiate.c  the cycle's deterministic decision: pending table,
 *                readiness, agreement, fusion into responses; rider.c
 *                beside it: a small allreduce carried in the fast path
 *   execute.c    running responses: joined ranks' zeros, the set's
 *                collectives; device.c (device.h) for device tensors
 *   pset.c       process sets; tuning.c the autotuner's side of a cycle
 *   core.c       the bottom (core.h): the queue, handles, this rank's
 *                entries, completion, failure, the cycle's clock
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

#include "../coll/coll.h"
#include "autotune.h"
#include "gpu/copier.h"
#include "cache.h"
#include "engine.h"
#include "core.h"
#include "index.h"
#include "message.h"
#include "timeline.h"

enum { P_WAITING, P_READY, P_TAKEN };

/* What every rank knows about one tensor name being negotiated.  Built
 * only from what every rank received alike, so identical on every rank;
 * the table's order (arrival order, `seq`) is the execution order among
 * ready tensors. */
typedef struct pending {
  hvd_ilink link;     /* e->table */
  hvd_request req;    /* the first submitted request */
  uint64_t seq;       /* arrival number */
  /* Each rank's request and whether it submitted one; both NULL for a
   * tensor every rank submitted at once with the cached request (the
   * fast path: nothing to compare). */
  hvd_request *reqs;
  uint8_t *submitted;
  int nsubmitted;
  int state;          /* P_WAITING, P_READY (in e->ready), P_TAKEN (in a response) */
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

struct hvd_engine {
  hvd__core core;      /* core.c: the queue, handles, this rank's entries, the lock */
  pthread_t thread;
  pthread_cond_t work; /* work arrived for an idle engine (CLOCK_MONOTONIC) */
  /* Under core.lock: */
  int driving;        /* a thread runs cycles (see engine.c) */
  int finished;       /* a cycle ended the engine (shutdown or failure) */
  /* The period's clock (engine.c).  last_cycle_ns: when the last cycle
   * started (ended, where it began without a look at the clock), read
   * while busy; beat_ns: when the heartbeat's period began, that is when
   * cycle was seen to be beat_cycle. */
  uint64_t last_cycle_ns, beat_ns, beat_cycle;
  int stop_requested, stopped;
  /* Enqueues that asked for the engine's thread (engine.c: the thread
   * watches for them a while after it completed an operation).  Atomic:
   * it reads them without the lock. */
  _Atomic uint32_t kicks;
  _Atomic uint64_t watched; /* watches a kick ended, for tests */
  int64_t watch_ns; /* how long; 0: never (ranks outnumber cores) */
  /* hvd_start_timeline / hvd_stop_timeline: the timeline to switch to at
   * the next cycle (tl_swap set), and how many switches were asked for
   * and done. */
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
  pset *psets;
  int next_pset_id;
  hvd_cache *cache;
  hvd_timeline *tl;
  double cycle_ms;
  size_t fusion_threshold;
  int stall_disable;
  long stall_check_s, stall_shutdown_s;
  pending *pending_head, *pending_tail; /* the table in arrival order */
  hvd_index table;    /* the same, by name */
  uint64_t next_seq;
  pending **ready;    /* the table's ready tensors not yet planned */
  size_t nready, ready_cap;
  int rescan;         /* readiness may have changed for any tensor (joins, sets) */
  uint8_t *fast;      /* the fast path's vector */
  size_t fast_cap;
  int64_t rider;      /* rider.c: the cache id that may ride the vector, or -1 */
  int64_t alone_last; /* rider.c: the id that last ran alone on the fast path, or -1 */
  uint32_t *alone_next; /* [cache capacity]: 1 + the id that ran alone next after each, 0 */
  size_t rider_max;   /* HOROVOD_FAST_PATH_RIDER_BYTES */
  uint8_t *rider_buf; /* the records gathered */
  size_t rider_cap;
  uint64_t visits;    /* tensors looked at by negotiation: its cost, for tests */
  /* Tensors run on the fast path's agreement, and cycles that took the
   * full exchange, for tests (read by any thread, hence atomic). */
  _Atomic uint64_t fast_tensors, full_cycles, rider_tensors;
  uint64_t inspected_ms; /* rank 0: the stall inspector's last look */
  int cache_on;       /* the response cache's fast path (the autotuner may switch it) */
  /* The autotuner (tuning.c): whether it runs (rank 0's setting), rank
   * 0's tuner, the settings it asked for and not sent yet. */
  int autotune;
  hvd_autotune *tuner;
  int tune_send;
  hvd_msg_settings tune_next;
  hvd_tune_change *tune_log; /* under lock: every change applied, for tests */
  int ntune_log;
  /* Device tensors (device.c): the staging pipeline and its copier,
   * made at the first; copier_cuda: the copier is CUDA's (ours to free). */
  struct hvd__staging *staging;
  hvd__copier copier;
  int copier_cuda;
  void *dev_fusion;          /* the device fusion buffer (the copier's memory) */
  size_t dev_fusion_cap;
  hvd__copy_event *dev_done; /* the fused tensors' copies out of it */
  struct hvd__nccl_path *nccl; /* the NCCL path (device_nccl.c), made at its first response */
  int njoined;
  uint8_t *joined;    /* [size]: joined in the current join round */
  uint64_t join_since_ms, join_warned_ms; /* local clock: the stall inspector's */
  uint64_t *join_cycle;
  uint64_t cycle;
  void *scratch;      /* zeros for a joined rank, scratch for broadcast/reducescatter */
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

/* negotiate.c */
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

/* rider.c: the id that may ride this cycle's fast exchange (-1: none)
 * and the algorithm its collective would run; the vector's exchange with
 * it (n bytes at e->fast, MIN-reduced there);
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

/* tuning.c: the autotuner's side of the cycle */
int hvd__tuning_start(hvd_engine *e);
/* Rank 0: a response ran; its tensors feed the tuner. */
void hvd__tuning_record(hvd_engine *e, const response *r);
/* Rank 0: settings to send go into its message; 1 if they did. */
int hvd__tuning_message(hvd_engine *e, hvd_msg *mine);
/* Every rank: rank 0's settings in this cycle's messages take effect. */
int hvd__tuning_apply(hvd_engine *e, const hvd_msg *msgs);

/* pset.c */
pset *hvd__pset_find(hvd_engine *e, int id);
int hvd__pset_add(hvd_engine *e, const int *ranks, int n, int *id);
int hvd__pset_remove(hvd_engine *e, int id);
void hvd__psets_free(hvd_engine *e);

/* The timeline's "hvd_job" event (the settings), and the waits
 * application threads reported since the last cycle (cycle.c). */
void hvd__engine_timeline_job(hvd_engine *e);
void hvd__engine_timeline_waits(hvd_engine *e);

#endif /* HVD_ENGINE_INT_H */
