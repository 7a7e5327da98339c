/*
 * engine_int.h -- the engine's private state, shared by its files:
 *   engine.c     the thread, the queue from application threads, handles
 *   negotiate.c  the cycle's deterministic decision: pending table,
 *                readiness, agreement, fusion into responses
 *   execute.c    running responses: fused layouts, joined ranks' zeros
 *   pset.c       process sets
 *
 * Locking: `lock` guards the queue, the handles and the flags application
 * threads set; everything else belongs to the engine thread alone.
 */
#ifndef HVD_ENGINE_INT_H
#define HVD_ENGINE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "cache.h"
#include "engine.h"
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

/* One tensor of this rank, from enqueue to completion. */
typedef struct entry {
  hvd_work w;
  size_t *sendcounts; /* alltoall: a copy */
  int *ranks;         /* process set add: a copy */
  op *op;
  uint64_t name_hash;
  struct entry *next;     /* the queue, then the engine's unsent list */
  struct entry *inflight; /* every entry not finished, for the duplicate check */
} entry;

/* What every rank knows about one tensor name being negotiated.  Built
 * only from the allgathered messages, so identical on every rank; the
 * table's list order (arrival order) is the execution order among ready
 * tensors. */
typedef struct pending {
  hvd_request req;    /* the first submitted request */
  uint64_t name_hash;
  hvd_request *reqs;  /* [size]: each rank's request, valid where submitted */
  uint8_t *submitted; /* [size] */
  entry *mine;        /* this rank's entry, if it submitted */
  uint64_t first_seen_ms; /* local clock: the stall inspector's */
  uint64_t warned_ms;
  struct pending *next; /* the next to arrive */
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

/* A unit of execution: one collective over one or more tensors. */
typedef struct response {
  pending **items; /* the tensors, in order */
  int n;
  int error;       /* 0, or every item fails with errmsg */
  char errmsg[1024];
} response;

struct hvd_engine {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a handle finished */
  pthread_cond_t work; /* work arrived for an idle engine (CLOCK_MONOTONIC) */
  /* Under lock: */
  entry *queue, **queue_tail;
  entry *inflight; /* enqueued and not finished, for the duplicate-name check */
  op **ops;        /* handle table, indexed by slot */
  uint32_t *gens;  /* generation per slot */
  uint32_t nops, free_slot_hint;
  int stop_requested, join_requested, stopped;
  int idle; /* the engine waits for the next cycle with nothing to do */
  int broken;
  char why[1024];  /* what broke or stopped the engine */
  op *join_op;
  /* hvd_start_timeline / hvd_stop_timeline: the timeline to switch to at
   * the next cycle (tl_swap set), and how many switches were asked for
   * and done. */
  hvd_timeline *tl_next;
  int tl_swap;
  uint64_t tl_asked, tl_done;
  /* Engine thread only: */
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
  pending *pending_head, **pending_tail;
  entry *unsent;      /* taken from the queue, not yet in a message */
  uint8_t *joined;    /* [size]: joined in the current join round */
  uint64_t join_since_ms, join_warned_ms; /* local clock: the stall inspector's */
  uint64_t *join_cycle;
  uint64_t cycle;
  void *scratch;      /* zeros for a joined rank, scratch for broadcast/reducescatter */
  size_t scratch_cap;
};

/* engine.c */
void hvd__engine_finish(hvd_engine *e, entry *en, int status, const char *msg);
void hvd__engine_break(hvd_engine *e, int status, const char *msg);
/* hvd__engine_finish with "<op> '<tensor>': " before msg. */
void hvd__engine_fail_entry(hvd_engine *e, entry *en, int status, const char *msg);
/* Completes the join round: every rank's hvd_join returns `last`. */
void hvd__engine_join_done(hvd_engine *e, int last);

/* negotiate.c */
int hvd__negotiate(hvd_engine *e, hvd_msg *msgs, response **out, int *nout, int *shutdown);
void hvd__pending_free(pending *p);
void hvd__stall_inspect(hvd_engine *e, hvd_msg *mine);

/* execute.c */
int hvd__execute(hvd_engine *e, response *r);

/* pset.c */
pset *hvd__pset_find(hvd_engine *e, int id);
int hvd__pset_add(hvd_engine *e, const int *ranks, int n, int *id);
int hvd__pset_remove(hvd_engine *e, int id);
void hvd__psets_free(hvd_engine *e);

#endif /* HVD_ENGINE_INT_H */
