/*
 * comm.h -- a communicator: a group of ranks and the transport between them.
 *
 * A communicator is a value: hvd_init builds the global one, hvd_shutdown
 * tears it down; later process sets and elastic rebuilds make more.  The
 * collectives (coll.h) are pure functions of a communicator and buffers.
 *
 * Every collective takes the next sequence number, which tags all of its
 * frames, so a rank that calls collectives in another order is caught at
 * the first frame instead of silently mixing data.  The first failure
 * breaks the communicator: its transport tells every peer (so they fail
 * fast too, naming the lost rank) and every later collective returns
 * HVD_E_ABORTED with the original reason.
 */
#ifndef HVD_COMM_H
#define HVD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "transport/transport.h"

/* Bytes moved per frame by the chunked ring steps: small enough that the
 * reduction of one chunk overlaps the arrival of the next and the scratch
 * buffer stays small, large enough that per-frame costs vanish. */
#define HVD_CHUNK_BYTES (256u * 1024u)

/* Where a rank sits among the job's hosts: HOROVOD_LOCAL_* and
 * HOROVOD_CROSS_* (local: the ranks on its host; cross: the ranks with its
 * local rank, one per host). */
typedef struct {
  int local_rank, local_size, cross_rank, cross_size;
} hvd_place;

struct hvd_coll_ops; /* coll/coll.h */

typedef struct hvd_comm {
  int rank, size;       /* within this communicator */
  int *members;         /* members[i]: transport rank of rank i; NULL: the identity */
  hvd_transport *xport; /* NULL when the job has one rank */
  int owns_xport;       /* the global communicator owns it; process sets share it */
  uint32_t seq;         /* collectives started; the frame tag */
  uint64_t steps;       /* sendrecvs and syncs made: what collectives cost in rounds */
  uint64_t shm_chunks;  /* chunks through the shm windows: picks the window */
  int allreduce_algo;   /* hvd_ar_algo (coll/coll.h); 0: auto.  Equal on every rank */
  int hierarchical;     /* HOROVOD_HIERARCHICAL_ALLREDUCE.  Equal on every rank */
  int hier_tunable;     /* the autotuner may switch it on: build the hierarchy anyway */
  int hier_allgather;   /* HOROVOD_HIERARCHICAL_ALLGATHER.  Equal on every rank */
  hvd_place place;      /* the global communicator's: this rank's host layout */
  /* The hierarchical allreduce's sub-communicators (coll/hierarchical.c):
   * this host's ranks by local rank, and this local rank's ranks by host.
   * Owned; NULL unless the global communicator reduces hierarchically. */
  struct hvd_comm *local, *cross;
  int *hier_rank;       /* with them: [l * hosts + h] is the rank of local rank l on host h */
  /* Another implementation of the data collectives the engine runs on
   * this communicator (MPI's, HOROVOD_CPU_OPERATIONS=mpi), or NULL for
   * hvd's own algorithms.  Negotiation always uses hvd's. */
  const struct hvd_coll_ops *coll;
  void *scratch;        /* HVD_CHUNK_BYTES, for receiving before reducing */
  void *staging;        /* HVD_CHUNK_BYTES, for sending a chunk gathered from pieces */
  void *peer_buf;       /* the shm allreduce's blocks read from other ranks (shm_direct.c) */
  size_t peer_buf_len;
  int broken;
  char broken_why[512];
} hvd_comm;

/* The global communicator; takes ownership of xport (NULL for size 1). */
int hvd__comm_init(hvd_comm *c, int rank, int size, hvd_transport *xport);

/* A communicator over `n` distinct transport ranks sharing parent's
 * transport and allreduce setting (not its hierarchy); ranks[i] becomes
 * rank i.  `me` is this process's transport rank, which must be one of them. */
int hvd__comm_init_subset(hvd_comm *c, const hvd_comm *parent, const int *ranks, int n, int me);
/* A communicator over every rank of `xport`, numbered as it numbers them,
 * with parent's allreduce setting; xport stays its owner's (a host's
 * shared memory inside the job's transport: transport.h's host op). */
int hvd__comm_init_over(hvd_comm *c, const hvd_comm *parent, hvd_transport *xport);
void hvd__comm_destroy(hvd_comm *c);

/* sendrecv between ranks of this communicator (-1 skips a half). */
static inline int hvd__comm_peer(const hvd_comm *c, int r) {
  return (r < 0 || !c->members) ? r : c->members[r];
}
static inline int hvd__comm_sendrecv(hvd_comm *c, int to, const void *sbuf, size_t slen,
                                     int from, void *rbuf, size_t rlen, uint32_t tag) {
  c->steps++;
  return hvd__sendrecv(c->xport, hvd__comm_peer(c, to), sbuf, slen, hvd__comm_peer(c, from),
                       rbuf, rlen, tag);
}

/* Called at the start of a collective: HVD_E_ABORTED if the communicator
 * is broken, else the collective's tag. */
int hvd__comm_begin(hvd_comm *c, uint32_t *tag);

/* Called with a failed collective's code: breaks the communicator (tells
 * the peers, remembers this thread's message) and returns rc. */
int hvd__comm_fail(hvd_comm *c, int rc);

/* Breaks the communicator for `why`, whatever the code: this rank will
 * not take part in another collective, and its peers learn it now rather
 * than at their deadline.  No-op if it is broken already. */
void hvd__comm_abort(hvd_comm *c, const char *why);

#endif /* HVD_COMM_H */
