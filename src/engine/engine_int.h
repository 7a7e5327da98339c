/*
 * engine_int.h -- the engine's private state, shared by its files:
 *   engine.c     handles, the queue from application threads, who drives
 *                the cycles (the engine's thread, or a caller waiting on
 *                an idle engine)
 *   cycle.c      one cycle: this rank's part, the exchange (the cached
 *                fast path, or every rank's message), the responses run
 *   negotiate.c  the cycle's deterministic decision: pending table,
 *                readiness, agreement, fusion into responses
 *   execute.c    running responses: fused layouts, joined ranks' zeros
 *   pset.c       process sets
 *
 * Locking: `lock` guards the queue, the handles, the names in flight and
 * the flags application threads set.  Everything else belongs to the
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
#include "index.h"
#include "message.h"
#include "timeline.h"

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

/* Dead objects of one type kept for reuse (engine.c), linked through
 * their own first bytes: nothing else reads them while they are here. */
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
  hvd_ilink inflight; /* e->inflight: every entry not finished (the duplicate check) */
  hvd_ilink unsent;   /* e->unsent: taken from the queue, not yet in the pending table */
  int64_t held;       /* the response cache's id while this rank holds it for the
                       * cached fast path (e->held[id]), else -1 */
  uint64_t held_us;   /* when it started waiting there (hvd__now_us), read only
                       * with a timeline (this rank's "ready" when the fast path
                       * runs it) or at the next cycle that finds it held; 0: not yet */
  uint64_t held_cycle; /* the cycle that began holding it */
  int prereduced;     /* rider.c reduced it into recvbuf: execute only scales it */
  struct entry *next; /* the queue */
} entry;

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
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a handle finished */
  pthread_cond_t work; /* work arrived for an idle engine (CLOCK_MONOTONIC) */
  /* Under lock: */
  entry *queue, **queue_tail;
  hvd_index inflight; /* entries enqueued and not finished, for the duplicate-name check */
  int driving;        /* a thread runs cycles (see engine.c) */
  int finished;       /* a cycle ended the engine (shutdown or failure) */
  /* The period's clock (engine.c).  last_cycle_ns: when the last cycle
   * started (ended, where it began without a look at the clock), read
   * while busy; beat_ns: when the heartbeat's period began, that is when
   * cycle was seen to be beat_cycle. */
  uint64_t last_cycle_ns, beat_ns, beat_cycle;
  op **ops;        /* handle table, indexed by slot */
  uint32_t *gens;  /* generation per slot */
  uint32_t nops, free_slot_hint;
  int stop_requested, join_requested, stopped;
  int broken;
  char why[1024];  /* what broke or stopped the engine */
  op *join_op;
  /* Finished entries and released handles kept for the next enqueue:
   * otherwise each collective costs a calloc and a free of both, a fifth
   * of a small allreduce's time in the engine (engine.c). */
  spare_list spare_entries, spare_ops;
  /* Enqueues that asked for the engine's thread, and operations completed
   * (engine.c: the thread watches the first a while after it completed
   * one of the second).  Atomic: it reads them without the lock. */
  _Atomic uint32_t kicks, completions;
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
  uint32_t epoch; /* the top bits of every handle (hvd__engine_set_epoch) */
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
  hvd_index unsent;   /* this rank's entries not yet in the pending table */
  entry **held;       /* [cache capacity]: the entry this rank holds under each id */
  uint32_t nheld;
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
  entry *finish_later; /* finished in this cycle, completed by drive() under the lock
                        * it takes after the cycle anyway (rider.c) */
  uint64_t cycle_ns;  /* when this cycle began (CLOCK_MONOTONIC), 0 until read:
                       * hvd__engine_clock_ns() */
  void *scratch;      /* zeros for a joined rank, scratch for broadcast/reducescatter */
  size_t scratch_cap;
};

/* engine.c */
void hvd__engine_finish(hvd_engine *e, entry *en, int status, const char *msg);
void hvd__engine_break(hvd_engine *e, int status, const char *msg);
/* hvd__engine_finish with "<op> '<tensor>': " before msg. */
void hvd__engine_fail_entry(hvd_engine *e, entry *en, int status, const char *msg);

/* c + 1, for the engine's atomic counters: one thread at a time writes
 * each (the driver, or a holder of the lock) and others only read, so a
 * relaxed load and store do, not a locked read-modify-write (about 20
 * cycles each, three of them on every small call's way). */
#define HVD__BUMP(c) \
  atomic_store_explicit(&(c), atomic_load_explicit(&(c), memory_order_relaxed) + 1, \
                        memory_order_relaxed)

/* The driver's clock for this cycle (ns, CLOCK_MONOTONIC): read at its
 * first use in the cycle, then the same.  A small operation on an idle
 * engine runs without reading it (at 20-25 ns a read on a VM, a tenth of
 * the whole call). */
uint64_t hvd__engine_clock_ns(hvd_engine *e);

/* Completes the join round: every rank's hvd_join returns `last`. */
void hvd__engine_join_done(hvd_engine *e, int last);

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
/* The cache gave id (-1: none) another tensor or new parameters: an entry
 * this rank holds under it goes back to the queue. */
void hvd__held_recheck(hvd_engine *e, int64_t id);

/* negotiate.c */
/* Step 1 for one rank's full message (every rank applies every rank's). */
int hvd__negotiate_apply(hvd_engine *e, int q, const hvd_msg *m);
/* Every rank submitted the cached request `id` (the fast path). */
int hvd__negotiate_agreed(hvd_engine *e, uint32_t id);
/* Steps 2-4: the responses to run, in order. */
int hvd__negotiate_plan(hvd_engine *e, response **out, int *nout);
/* The flags of every rank's message: shutdown, joins, stall failures.
 * *shutdown set when the engine must stop; returns 1 when the stall
 * inspector made every rank give up (nothing else runs this cycle). */
int hvd__negotiate_flags(hvd_engine *e, const hvd_msg *msgs, int *shutdown);
int hvd__negotiate(hvd_engine *e, hvd_msg *msgs, response **out, int *nout, int *shutdown);
void hvd__pending_free(pending *p);
void hvd__responses_free(response *rs, int n);
void hvd__stall_inspect(hvd_engine *e, hvd_msg *mine);
/* This rank's unsent entry for req, taken out of e->unsent (NULL: none). */
entry *hvd__unsent_take(hvd_engine *e, const hvd_request *req);
void hvd__unsent_add(hvd_engine *e, entry *en);
/* The same for an entry in hand (no lookup by name). */
void hvd__unsent_remove(hvd_engine *e, entry *en);

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
/* allgather or alltoall (type) of host memory on c through the set's
 * collectives: *out malloc()ed, counts[c->size] received per rank. */
int hvd__gather(hvd_comm *c, int type, const void *send, size_t count,
                const size_t *sendcounts, size_t esize, void **out, size_t *counts);
/* An allgather's or alltoall's result (out, counts[n]) handed to en's
 * caller, whichever path made it. */
void hvd__gather_deliver(entry *en, void *out, const size_t *counts, int n);
/* SIZE_MAX when the sum does not fit (counts a peer sent). */
size_t hvd__counts_sum(const size_t *counts, int n);

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
