/*
 * shm.h -- the shared-memory transport, for jobs whose ranks share a host.
 *
 * One segment holds a byte ring (shm_ring.h) for every ordered pair of
 * ranks, each rank's futex word and pid, and each rank's abort record.
 * Rank 0 creates it under a name derived from the job's secret, every
 * rank maps it, and rank 0 unlinks it as soon as all have: from then on
 * nothing is left behind whatever happens.  hvdrun removes the name too
 * when the job ends, for a job that died before the unlink.
 */
#ifndef HVD_SHM_H
#define HVD_SHM_H

#include "transport.h"

#define HVD_SHM_NAME_MAX 32

/* The job's segment name ("/hvd-" and 16 hex digits): different for every
 * job, the same in every rank and in hvdrun. */
void hvd__shm_name(const hvd_secret *key, char *out, size_t cap);

typedef struct {
  int want;       /* this rank wants shared memory (all local, not disabled) */
  hvd_secret key; /* names the segment */
  int timeout_ms; /* no-progress deadline for each sendrecv */
} hvd_shm_config;

/* Agrees with the other ranks over `tcp` (already connected) whether to
 * use shared memory, and if so builds it.  Takes ownership of tcp: *out is
 * the shared-memory transport (tcp destroyed), or tcp itself when the job
 * keeps TCP (nobody wants shared memory, or a rank could not map the
 * segment: a warning says why).  Ranks that disagree fail with
 * HVD_E_ENV; on any error tcp is aborted and destroyed. */
int hvd__shm_setup(const hvd_shm_config *cfg, hvd_transport *tcp, hvd_transport **out);

#endif /* HVD_SHM_H */
