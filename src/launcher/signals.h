/*
 * signals.h -- turning signals into poll() events (the self-pipe trick).
 *
 * hvdrun is one poll() loop.  A signal handler only writes the signal's
 * number into a non-blocking pipe whose read end is in that loop, so
 * SIGCHLD, SIGINT, SIGTERM and SIGHUP are handled in ordinary code, at a
 * point where every data structure is consistent.
 */
#ifndef HVDRUN_SIGNALS_H
#define HVDRUN_SIGNALS_H

#include <signal.h>

/* What the pipe held since the last drain. */
typedef struct {
  int child;      /* a SIGCHLD arrived: reap */
  int stop_sig;   /* the last SIGINT/SIGTERM/SIGHUP, 0 if none */
  int stop_count; /* how many of those arrived */
} signals_seen;

/* Installs the handlers (and ignores SIGPIPE: a closed socket or output
 * must be an error return, not death).  Returns the pipe's read end, or
 * -1 with errno set. */
int signals_install(void);

/* Reads everything the handlers wrote (never blocks). */
void signals_drain(int fd, signals_seen *seen);

/* In a freshly forked child, before exec: every signal back to its
 * default action and `mask` as the signal mask, so the program starts
 * as if hvdrun were not there. */
void signals_reset_for_exec(const sigset_t *mask);

#endif /* HVDRUN_SIGNALS_H */
