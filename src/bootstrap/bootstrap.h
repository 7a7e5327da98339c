/*
 * bootstrap.h -- who am I, and who are my peers.
 *
 * Reads the job's description from the environment the launcher set
 * (hvdrun exports Horovod's HOROVOD_* names; without them the process is a
 * job of size 1), validates every value, and for a job of more than one
 * rank meets the others at the rendezvous and builds the transport.
 */
#ifndef HVD_BOOTSTRAP_H
#define HVD_BOOTSTRAP_H

#include "../transport/transport.h"
#include "rdzv.h"

typedef struct {
  int rank, size, local_rank, local_size, cross_rank, cross_size;
  char hostname[HVD_HOSTNAME_MAX]; /* the launcher's name for this host */
  char host_id[HVD_HOST_ID_MAX];   /* where this process really runs */
} hvd_job;

/* Fills job from the environment.  HVD_E_ENV naming the variable when a
 * value is malformed, out of range or inconsistent with the others.
 *
 * hostname is HOROVOD_HOSTNAME, the launcher's name for the host (the
 * host's own name without it): ranks with the same one were placed on one
 * host.  host_id is what the kernel says, "nodename/boot-id": two
 * processes with the same one share memory.  The boot id alone would not
 * do: network namespaces (hosts emulated on one machine) share it and
 * /dev/shm, and only their UTS name differs. */
int hvd__job_from_env(hvd_job *job);

/* Joins the job: *xport is NULL for a job of size 1, else a connected,
 * authenticated transport to every peer. */
int hvd__bootstrap(const hvd_job *job, hvd_transport **xport);

/* The name of the transport hvd_init() built ("shm", "tcp"), or "none"
 * (not initialized, or a job of one rank).  Defined in api.c; for tools
 * such as hvd-bench that report what they measured. */
const char *hvd__transport_name(void);

#endif /* HVD_BOOTSTRAP_H */
