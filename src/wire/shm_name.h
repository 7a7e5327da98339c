/*
 * shm_name.h -- the name of a job's shared-memory segment.
 *
 * The ranks of a host create and map the segment (transport/shm.h); hvdrun
 * and its agents only need its name, to remove it when a job dies before
 * its leader unlinked it.  The name is a pure function of the job's secret
 * and the group's leader, so it lives here, beside the secret, where the
 * launcher can reach it without the transport.
 */
#ifndef HVD_SHM_NAME_H
#define HVD_SHM_NAME_H

#include <stddef.h>

#include "auth.h"

#define HVD_SHM_NAME_MAX 48

/* The segment name of a group whose leader is the job's rank `leader`
 * ("/hvd-", 16 hex digits of the secret's hash, "-leader"): different for
 * every job and group, the same in every rank and in hvdrun. */
void hvd__shm_name(const hvd_secret *key, int leader, char *out, size_t cap);

#endif /* HVD_SHM_NAME_H */
