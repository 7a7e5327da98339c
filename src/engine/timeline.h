/*
 * timeline.h -- Horovod's timeline: what happened to each tensor, when.
 *
 * HOROVOD_TIMELINE=path makes rank 0 write Chrome's trace-event JSON,
 * loadable in Perfetto and chrome://tracing: one row (pid) per tensor,
 * named by a process_name metadata event, with its phases as begin/end
 * ("B"/"E") pairs: NEGOTIATE_<OP> from enqueue until every rank is ready
 * (an instant "i" event per rank as it reports ready), then
 * MEMCPY_IN_FUSION_BUFFER (an out-of-place input copied into place), the
 * collective (ALLREDUCE, BROADCAST, ...).  The phase names are the engine's
 * (execute.c); this file only writes what it is given.  HOROVOD_TIMELINE_MARK_CYCLES adds a first
 * row, "cycles", with an instant event at the start of every cycle.
 * Rows are numbered 1, 2, ... in order of first appearance.
 *
 * The file is "[" followed by one event per line, each followed by ",".
 * hvd__timeline_close writes a last event (if there were any) and "]", so
 * the file parses as JSON; a crashed process leaves an unterminated array,
 * which the viewers accept.  Events are buffered in memory and written by
 * hvd__timeline_tick once 64 KiB gather or 100 ms pass, so tracing does
 * not slow the engine and a crash loses at most the last 100 ms.  A write
 * error logs one warning and stops tracing; it never fails the engine.
 * Only the engine's thread calls these functions; each accepts a NULL
 * timeline (tracing off) and does nothing.
 */
#ifndef HVD_TIMELINE_H
#define HVD_TIMELINE_H

#include <stdint.h>

typedef struct hvd_timeline hvd_timeline;

/* Opens (truncates) path.  HVD_E_SYSTEM naming the path on failure. */
int hvd__timeline_open(const char *path, int mark_cycles, hvd_timeline **out);

/* Phase `phase` of tensor `tensor` begins / ends now.  `args` is NULL or
 * a JSON object text for the event's "args" (e.g. {"fused":3}). */
void hvd__timeline_begin(hvd_timeline *tl, const char *tensor, const char *phase,
                         const char *args);
void hvd__timeline_end(hvd_timeline *tl, const char *tensor);

/* An instant event on the tensor's row (e.g. "rank 2 ready"). */
void hvd__timeline_instant(hvd_timeline *tl, const char *tensor, const char *label);

/* Marks the start of a negotiation cycle (if mark_cycles). */
void hvd__timeline_cycle(hvd_timeline *tl);

/* Writes buffered events if the buffer is large or the last write was
 * long enough ago; called once per cycle. */
void hvd__timeline_tick(hvd_timeline *tl);

/* Writes everything, terminates the JSON array, closes, frees. */
void hvd__timeline_close(hvd_timeline *tl);

#endif /* HVD_TIMELINE_H */
