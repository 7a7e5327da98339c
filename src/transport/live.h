/*
 * live.h -- signs of life, and the alarm raised when a rank shows none.
 *
 * A rank is alive when the thread that drives its engine moves: it
 * advances this process's progress counter at every cycle, at every wake
 * of a transport's wait (waits sleep in slices of at most HVD_LIVE_SLICE_MS
 * for this) and at every wake of the idle engine's thread.  A rank busy in
 * the user's code still cycles (its engine thread does), so it counts as
 * alive; a stopped process (SIGSTOP, a dead host) or a thread stuck
 * outside hvd (a kernel, a driver) does not.
 *
 * The counter is published where the rank's watchers read it: shared
 * memory (a word per rank, each in its own cache line of the segment: the
 * ranks of one host that wait on it read it there) and the watch
 * connections of the TCP transport (watch.c: a thread of this process
 * sends it to the rank's two neighbours on the ring of ranks, and reads
 * theirs).  A watched counter that has not moved for the window
 * (HOROVOD_LIVENESS_TIMEOUT_SECONDS), or a watch connection silent that
 * long, is a lost rank: the watcher raises its transport's alarm, which
 * wakes the wait in progress, and the verdict spreads as every transport
 * error does (ABORT frames, shared-memory records).
 *
 * Between hvd_init's transports and the engine's start, and once the
 * engine has stopped, nothing advances the counter on purpose: the rank
 * is "resting" (HVD_LIVE_RESTING in what it publishes), and a resting
 * counter that does not move is no verdict.
 */
#ifndef HVD_LIVE_H
#define HVD_LIVE_H

#include <stdatomic.h>
#include <stdint.h>

/* Longest sleep of a transport's wait between two signs of life. */
#define HVD_LIVE_SLICE_MS 200
/* The published value's top bit: nothing is expected to move it. */
#define HVD_LIVE_RESTING (1ull << 63)
#define HVD_LIVE_WHY_MAX 512

/* This process's counter, with HVD_LIVE_RESTING while resting. */
uint64_t hvd__live_value(void);

/* Advances the counter and stores it in every published word.  Any
 * thread; lock-free (a relaxed add and a store per published word). */
void hvd__live_beat(void);

/* The engine starts (1: the counter is expected to move from now on) or
 * stops (0). */
void hvd__live_active(int on);

/* Publishes the counter in `word` too (shared memory a rank's watchers
 * read) until hvd__live_unpublish.  0, or -1 when too many are published
 * (the word then stays at its last value: resting). */
int hvd__live_publish(_Atomic uint64_t *word);
void hvd__live_unpublish(_Atomic uint64_t *word);

/* A watcher's verdict for the transport's waits.  The first raise wins;
 * `fd` (an eventfd) becomes readable, so a wait in poll() wakes at once. */
typedef struct {
  _Atomic int raised;
  int lost;                    /* the lost rank, in the job's numbers */
  char why[HVD_LIVE_WHY_MAX];  /* written before raised is set */
  int fd;
} hvd_alarm;

/* 0, or HVD_E_SYSTEM when no eventfd could be made. */
int hvd__alarm_init(hvd_alarm *a);
void hvd__alarm_close(hvd_alarm *a);
void hvd__alarm_raise(hvd_alarm *a, int lost, const char *why);
/* 1 when raised (lost and why may then be read). */
int hvd__alarm_raised(hvd_alarm *a);

#endif /* HVD_LIVE_H */
