/*
 * engine.h -- what turns named tensors into ordered, fused collectives
 * (Horovod's "background loop": here a thread, or a caller that drives it).
 *
 * Application threads enqueue work and wait on handles; negotiation cycles
 * run every HOROVOD_CYCLE_TIME, driven by one thread at a time: the
 * engine's own, or an application thread waiting on an idle engine, which
 * runs the cycles its operation needs itself (engine.c).  Each rank
 * contributes a message (message.h) with what it enqueued since the last
 * cycle, the messages are allgathered over the global communicator, and
 * every rank applies the same deterministic decision to them
 * (negotiate.c): which tensors are ready on all ranks of their process set,
 * whether the ranks agree on them, how they are fused.  Every rank then
 * executes the same responses in the same order (execute.c).
 */
#ifndef HVD_ENGINE_H
#define HVD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "message.h"
#include "request.h"
#include "timeline.h"

typedef struct hvd_engine hvd_engine;

/* One tensor operation as an application thread hands it over. */
typedef struct {
  hvd_request req;       /* name, type, dtype, op, root, count, scales, set */
  const void *sendbuf;   /* allreduce, allgather, alltoall, reducescatter */
  void *recvbuf;         /* allreduce, reducescatter; broadcast: the buffer */
  void **out;            /* allgather, alltoall: the malloc()ed result */
  size_t *out_counts;    /* allgather, alltoall: per-rank counts (may be NULL) */
  const size_t *sendcounts; /* alltoall: per-destination counts (copied) */
  size_t local_count;    /* allgather: elements this rank sends */
  const int *ranks;      /* process set add: the sorted ranks (copied) */
  int device;            /* req.on_device: this rank's CUDA ordinal (hvd_opts.device) */
  void *stream;          /* req.on_device: the caller's stream (hvd_opts.stream) */
  void *ready;           /* the engine's: an event on that stream at enqueue, or NULL
                          * (device.h); copies of the buffers wait for it */
} hvd_work;

/* Starts the engine over the global communicator (which it uses from its
 * thread only, from now until hvd__engine_stop). */
int hvd__engine_start(hvd_comm *global, hvd_engine **out);

/* Numbers the engine's handles with epoch (1..0x7fff) in their top bits,
 * before anything is enqueued: api.c gives every hvd_init() a new one, so
 * a handle of an earlier job (elastic training re-forms the job) is never
 * taken for a new one. */
void hvd__engine_set_epoch(hvd_engine *e, uint32_t epoch);

/* The id the next process set added gets (ids are otherwise 1, 2, ...):
 * elastic training adds the program's sets again with their old ids.
 * Every rank must set the same before the same add. */
void hvd__engine_set_next_pset_id(hvd_engine *e, int id);

/* Enqueues n works completing one handle (n > 1: a group).  Checks that
 * no name is in flight already and that this rank belongs to the process
 * set.  will_wait: the caller waits for the handle at once (a blocking
 * call), so the engine's thread is not woken for it: the waiting thread
 * drives the cycle if nobody else does.  Returns the handle or an HVD_E_*
 * code. */
hvd_handle hvd__engine_enqueue(hvd_engine *e, const hvd_work *works, int n, hvd_callback cb,
                               void *arg, int will_wait);

/* 1 done, 0 running, <0 failed (released). */
int hvd__engine_poll(hvd_engine *e, hvd_handle h);

/* Waits, running cycles on this thread while nobody else drives them;
 * returns the status (0 or HVD_E_*) and releases the handle.  When value
 * is not NULL it receives the operation's result value (join: the last
 * rank; process set add: the id). */
int hvd__engine_wait(hvd_engine *e, hvd_handle h, int64_t *value);

/* Enqueues n works and waits for them, as hvd__engine_enqueue (will_wait)
 * and hvd__engine_wait do: the blocking calls.  One host tensor makes one
 * trip under the engine's lock.  *queued: whether the works got as far as
 * the queue (a failure before is the enqueue's, after it the
 * operation's). */
int hvd__engine_run(hvd_engine *e, const hvd_work *works, int n, int64_t *value, int *queued);

/* Marks this rank joined and waits until every rank has; returns the last
 * rank to join or an HVD_E_* code. */
int hvd__engine_join(hvd_engine *e);

/* Process sets: membership queries (set 0 is the global set).  *rank is
 * -1 when this rank is not a member.  HVD_E_INVALID for an unknown id. */
int hvd__engine_pset_info(hvd_engine *e, int id, int *rank, int *size);

/* Hands the driving thread, which owns the timeline, a new one (NULL:
 * none) to write from its next cycle on, and waits until it has closed the old
 * one, so that a stopped timeline is complete when this returns.  Takes
 * ownership of tl. */
int hvd__engine_set_timeline(hvd_engine *e, hvd_timeline *tl);

/* Tensors so far run on the cached fast path's agreement, cycles that
 * took the full exchange (cycle.c) and tensors that rode the fast path's
 * exchange (rider.c; rode may be NULL), for tests (api_hooks.h asks the
 * running engine). */
void hvd__engine_cycle_counts(hvd_engine *e, uint64_t *fast, uint64_t *full, uint64_t *rode);
/* For tests: enqueues the engine's thread took while it watched for work
 * after a cycle (engine.c), instead of being woken for them. */
uint64_t hvd__engine_watched(hvd_engine *e);

/* One change of the autotuned settings, applied at `cycle`. */
typedef struct {
  uint64_t cycle;
  hvd_msg_settings settings;
} hvd_tune_change;

/* The changes so far (the first cap into out); returns how many there are
 * (api_hooks.h asks the running engine). */
int hvd__engine_tune_history(hvd_engine *e, hvd_tune_change *out, int cap);

/* A hash of a process set's sorted ranks, so that ranks creating a set
 * can check they name the same ranks. */
uint32_t hvd__ranks_hash(const int *ranks, int n);

/* Stops the engine: tells the other ranks (every engine stops in the same
 * cycle), fails what is still pending (waiters wake with HVD_E_ABORTED),
 * joins the thread.  hvd__engine_free then frees it, once no application
 * thread is inside an engine call. */
void hvd__engine_stop(hvd_engine *e);
void hvd__engine_free(hvd_engine *e);

#endif /* HVD_ENGINE_H */
