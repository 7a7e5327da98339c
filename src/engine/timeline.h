/*
 * timeline.h -- Horovod's timeline: what happened to each tensor, when.
 *
 * HOROVOD_TIMELINE=path makes rank 0 write Chrome's trace-event JSON
 * (every rank its own file with the forms hvd__timeline_path reads),
 * loadable in Perfetto and chrome://tracing: one row (pid) per tensor,
 * named by a process_name metadata event, with its phases as begin/end
 * ("B"/"E") pairs: NEGOTIATE_<OP> from enqueue until every rank is ready
 * (an instant "i" event per rank as it reports ready), then
 * MEMCPY_IN_FUSION_BUFFER (an out-of-place input copied into place), the
 * collective (ALLREDUCE, BROADCAST, ...).  The phase names are the engine's
 * (execute.c); this file only writes what it is given.  HOROVOD_TIMELINE_MARK_CYCLES adds a first
 * row, "cycles", with an instant event at the start of every cycle.
 * Rows are numbered 1, 2, ... in order of first appearance.  The engine
 * adds its settings (hvd__timeline_job) and the time application threads
 * spent blocked in hvd_wait (hvd__timeline_wait, a "waits" row), which is
 * what hvd-report needs to split a step into computing and waiting.
 *
 * The file is "[" followed by one event per line, each followed by ",".
 * hvd__timeline_close writes a last event (if there were any) and "]", so
 * the file parses as JSON; a crashed process leaves an unterminated array,
 * which the viewers accept.  Events are buffered in memory and written by
 * hvd__timeline_tick once 64 KiB gather or 100 ms pass, so tracing does
 * not slow the engine and a crash loses at most the last 100 ms.  A write
 * error logs one warning and stops tracing; it never fails the engine.
 * The file never passes max_bytes: at the bound it ends, complete JSON,
 * with an "hvd_truncated" metadata event, and tracing stops.
 * Only the thread driving the engine's cycles (engine.c: the engine's own,
 * or a caller waiting on an idle engine) calls these functions, one at a
 * time; each accepts a NULL
 * timeline (tracing off) and does nothing.
 */
#ifndef HVD_TIMELINE_H
#define HVD_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

typedef struct hvd_timeline hvd_timeline;

typedef struct {
  int mark_cycles;    /* a "cycles" row with a mark per cycle */
  uint64_t max_bytes; /* the file's bound (at least 4096) */
} hvd_timeline_opts;

/* Opens (truncates) path.  HVD_E_SYSTEM naming the path on failure. */
int hvd__timeline_open(const char *path, const hvd_timeline_opts *opts, hvd_timeline **out);

/* Where `rank` writes the timeline HOROVOD_TIMELINE=spec names:
 *   - spec holds "%r": every rank, to spec with each "%r" replaced by its rank;
 *   - spec ends in '/' or is an existing directory: every rank, to
 *     spec/rank.<rank>.json (a missing directory ending in '/' is made);
 *   - otherwise: rank 0 alone, to spec (Horovod's behaviour).
 * Returns 1 with the path in buf, 0 when this rank writes none, or
 * HVD_E_INVALID (empty or too long) / HVD_E_SYSTEM (the directory cannot
 * be made) with a message naming the path. */
int hvd__timeline_path(const char *spec, int rank, char *buf, size_t cap);

/* Opens rank's timeline for spec (hvd__timeline_path), bounded by
 * HOROVOD_TIMELINE_MAX_MB; *out is NULL when this rank writes none. */
int hvd__timeline_open_for_rank(const char *spec, int rank, int mark_cycles,
                                hvd_timeline **out);

/* The job's settings, `args` a JSON object text, as the "hvd_job"
 * metadata event. */
void hvd__timeline_job(hvd_timeline *tl, const char *args);

/* An application thread was blocked in hvd_wait from start_us to end_us
 * (CLOCK_MONOTONIC microseconds): a WAIT event on the "waits" row. */
void hvd__timeline_wait(hvd_timeline *tl, uint64_t start_us, uint64_t end_us);

/* Phase `phase` of tensor `tensor` begins / ends now.  `args` is NULL or
 * a JSON object text for the event's "args" (e.g. {"fused":3}; on an end,
 * viewers merge them into the begin's). */
void hvd__timeline_begin(hvd_timeline *tl, const char *tensor, const char *phase,
                         const char *args);
void hvd__timeline_end(hvd_timeline *tl, const char *tensor);
void hvd__timeline_end_args(hvd_timeline *tl, const char *tensor, const char *args);

/* An instant event on the tensor's row (e.g. "rank 2 ready"). */
void hvd__timeline_instant(hvd_timeline *tl, const char *tensor, const char *label);

/* The same, at an earlier moment at_us (CLOCK_MONOTONIC microseconds, as
 * hvd__now_us; 0: now): what the engine learns of after the fact. */
void hvd__timeline_begin_at(hvd_timeline *tl, const char *tensor, const char *phase,
                            const char *args, uint64_t at_us);
void hvd__timeline_instant_at(hvd_timeline *tl, const char *tensor, const char *label,
                              uint64_t at_us);

/* Marks the start of a negotiation cycle (if mark_cycles). */
void hvd__timeline_cycle(hvd_timeline *tl);

/* Writes buffered events if the buffer is large or the last write was
 * long enough ago; called once per cycle. */
void hvd__timeline_tick(hvd_timeline *tl);

/* Writes everything, terminates the JSON array (a last "hvd_end" metadata
 * event saying when), closes, frees. */
void hvd__timeline_close(hvd_timeline *tl);

#endif /* HVD_TIMELINE_H */
