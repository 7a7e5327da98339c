/*
 * rdzv_host.h -- rank 0 hosting the rendezvous inside hvd_init, for a job
 * no hvdrun started (srun, or mpirun without MPI in the build).
 *
 * The server is hvdrun's (rdzv_server.h), run by a thread of its own
 * while rank 0, like every rank, registers with it as a client.  It
 * listens on one address and a known port (every rank computed the same
 * from the environment), serves one round, and stops once every rank
 * has its table or at the start deadline.
 */
#ifndef HVD_RDZV_HOST_H
#define HVD_RDZV_HOST_H

#include <stdint.h>

#include "rdzv.h"

typedef struct hvd_rdzv_host hvd_rdzv_host;

/* Listens on addr:port (a name resolves; it must be this host's) for a
 * job of `size` ranks and starts serving. */
int hvd__rdzv_host_start(const char *addr, int port, uint32_t size, const hvd_secret *key,
                         hvd_rdzv_host **out);

/* Waits until every rank has been served (or `deadline`), then stops
 * and frees the server.  NULL is fine. */
void hvd__rdzv_host_stop(hvd_rdzv_host *h, uint64_t deadline);

#endif /* HVD_RDZV_HOST_H */
