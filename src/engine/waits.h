/*
 * waits.h -- whether this rank is blocked: every thread that could still
 * submit a tensor is waiting on hvd (waits.c).  Each rank's cycle message
 * says so (HVD_MSG_BLOCKED), and a certain deadlock needs it
 * (desync.c): a rank that could still submit is never part of one.
 *
 * What counts, per thread of the process:
 *   - a thread in a wait on hvd (hvd_wait, a blocking call, a binding's
 *     wait for a framework op it submitted: hvd__waits_enter/leave), or
 *     an op whose caller waits for it (hvd__waits_op), is a wait;
 *   - a thread that ever submitted asynchronously (a handle or a callback
 *     it did not wait on at once) outside such a wait is a submitter for
 *     as long as it lives: it may submit again at any time, so the rank is
 *     blocked only while every submitter waits;
 *   - TensorFlow's graph-mode ops (hvd__waits_graph) are submitted by the
 *     executor's threads, which never wait on hvd: instead every graph op
 *     alive must have a call in flight, so that none is left for the
 *     executor to submit (a graph op whose last call is in flight cannot
 *     be submitted again: its name is in flight).
 * The rank is blocked when something waits (a thread, or a graph op in
 * flight), every submitter waits, and every graph op is in flight.
 *
 * Process-wide, as the engine is; hvd__waits_reset starts afresh for a
 * new engine (submitters registered before are forgotten; graph ops,
 * which TensorFlow keeps across engines, are not).
 */
#ifndef HVD_ENGINE_WAITS_H
#define HVD_ENGINE_WAITS_H

void hvd__waits_reset(void);

/* This thread enqueued an operation it does not wait on at once: it
 * becomes a submitter, unless hvd__waits_untracked came first. */
void hvd__waits_submitted(void);
/* This thread's next enqueue is not its own to track: one it waits for at
 * once (a JAX handler's, an eager TensorFlow op's) or a graph op's. */
void hvd__waits_untracked(void);
/* That enqueue failed before it reached the engine: the mark is dropped,
 * so that it does not pass to this thread's next enqueue. */
void hvd__waits_untracked_drop(void);

/* This thread starts (enter) and ends (leave) a wait on hvd; nested
 * waits count once.  Submissions inside one do not make the thread a
 * submitter: it waits for them. */
void hvd__waits_enter(void);
void hvd__waits_leave(void);

/* An operation its caller waits for without a thread of ours in a wait
 * (TensorFlow's eager executor waits for the op's done): +1 once it is
 * enqueued, -1 when it completes, from any thread. */
void hvd__waits_op(int delta);

/* TensorFlow's graph-mode ops: `live` kernels more (or fewer), `in_flight`
 * calls more (or fewer); a call counts once it is enqueued. */
void hvd__waits_graph(int live, int in_flight);

/* 1 when the rank is blocked (above). */
int hvd__waits_blocked(void);

#endif /* HVD_ENGINE_WAITS_H */
