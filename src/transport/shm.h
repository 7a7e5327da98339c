/*
 * shm.h -- the shared-memory transport, for jobs whose ranks share a host.
 *
 * One segment holds a byte ring (shm_ring.h) for every ordered pair of
 * the group's ranks, each rank's futex word and pid, and each rank's
 * abort record.  The group's leader creates it under a name derived from
 * the job's secret (wire/shm_name.h), every rank maps it, and the leader unlinks it as soon
 * as all have: from then on nothing is left behind whatever happens.
 * hvdrun removes the names too when the job ends, for a job that died
 * before the unlink.
 */
#ifndef HVD_SHM_H
#define HVD_SHM_H

#include "wire/shm_name.h"
#include "transport.h"

typedef struct {
  const int *members; /* the job's ranks of the group; members[0] leads */
  int n;              /* ranks in the group, at least 2 */
  int me;             /* this rank's index in members */
  hvd_secret key;     /* names the segment */
  int timeout_ms;     /* no-progress deadline for each sendrecv */
} hvd_shm_config;

/* Sets up shared memory among a group of ranks that share a host, talking
 * over `tcp` (connected to every rank of the job; only the group's ranks
 * take part).  *out is the shared-memory transport, numbered in the
 * group's order but naming the job's ranks in its messages, or NULL when
 * the group keeps TCP (a rank could not create or map the segment: a
 * warning says why).  tcp stays the caller's.  An error means tcp failed. */
int hvd__shm_setup(const hvd_shm_config *cfg, hvd_transport *tcp, hvd_transport **out);

/* Liveness (live.h) for the transport hvd__shm_setup made: a rank it
 * waits on whose sign of life has not moved for live_ms (0: never mind)
 * is lost; and the alarm, when set, is another transport's verdict (under
 * hybrid.c, the TCP watchdog's) that fails a wait here too. */
void hvd__shm_liveness(hvd_transport *t, int live_ms, hvd_alarm *alarm);

#endif /* HVD_SHM_H */
