/*
 * watch.h -- the TCP transport's watchdog (watch.c): a thread that sends
 * this rank's sign of life (live.h) over a few watch connections and
 * reads the peers' at the other ends.
 *
 * A data connection cannot carry it: its receiver reads frames in order,
 * and only when a collective needs them.  So each rank also has a watch
 * connection to its two neighbours on the ring of ranks (one for two
 * ranks): a few per rank whatever the job's size, so that a dead host, a
 * frozen process or a cut network is seen by a rank on each side of it.
 *
 * A peer whose connection stays silent for the window, or whose counter
 * has not moved for it while not resting, is lost: the watchdog raises
 * the alarm with a verdict that names the rank and its host.  A peer that
 * closes its end (it ended, cleanly or not) is no longer watched: a
 * process that died closes its data connections too, and they say so.
 */
#ifndef HVD_WATCH_H
#define HVD_WATCH_H

#include "live.h"

/* Frames on a watch connection: a data frame of this tag with the
 * sender's counter (u64), every period; a data frame of the other tag,
 * empty, before the sender closes on purpose. */
#define HVD_WATCH_TAG_BEAT 0x42454154u /* "BEAT" */
#define HVD_WATCH_TAG_BYE 0x00425945u  /* "BYE" */
/* What a watch connection's authentication proves. */
#define HVD_WATCH_PURPOSE "watch"

typedef struct hvd_watch hvd_watch;

typedef struct {
  int rank;            /* this rank, for messages */
  int n;               /* watch connections */
  int *fds;            /* n connected, authenticated sockets: the watchdog's from here */
  const int *peers;    /* the rank at the other end of each */
  const char *const *hosts; /* [n]: the host of each, for messages (NULL, "": unknown) */
  int window_ms;       /* how long a peer may show no sign of life */
  hvd_alarm *alarm;    /* where the verdict goes */
} hvd_watch_config;

/* Starts the watchdog's thread over cfg's connections (which it owns from
 * here, even when this fails: the fds are set to -1).  *out NULL when
 * n == 0 (nothing to watch). */
int hvd__watch_start(const hvd_watch_config *cfg, hvd_watch **out);

/* Says goodbye on every connection, stops the thread and closes them.
 * NULL is fine. */
void hvd__watch_stop(hvd_watch *w);

#endif /* HVD_WATCH_H */
