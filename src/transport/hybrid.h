/*
 * hybrid.h -- one transport over two: shared memory to the ranks of this
 * rank's host, TCP to the ranks of the other hosts.
 *
 * A job on several hosts has both kinds of peers, and a ring step can
 * send to one kind while it receives from the other.  The collectives
 * see one transport of the job's ranks; each message takes the way to
 * its peer.
 */
#ifndef HVD_HYBRID_H
#define HVD_HYBRID_H

#include "transport.h"

/* Takes ownership of tcp (every rank of the job) and host (this host's
 * ranks, or NULL when this host has no shared memory: then everything
 * goes over TCP, still cut as below so that peers with shared memory
 * understand it).  members[i] (copied) is the job's rank of host's rank
 * i.  On failure both are destroyed. */
int hvd__hybrid_new(hvd_transport *tcp, hvd_transport *host, const int *members,
                    hvd_transport **out);

#endif /* HVD_HYBRID_H */
