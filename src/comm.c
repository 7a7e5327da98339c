/*
 * comm.c -- communicator life cycle and the "first failure breaks it" rule.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

static int comm_alloc(hvd_comm *c, int rank, int size, hvd_transport *xport) {
  memset(c, 0, sizeof *c);
  c->rank = rank;
  c->size = size;
  c->xport = xport;
  c->scratch = malloc(HVD_CHUNK_BYTES);
  c->staging = malloc(HVD_CHUNK_BYTES);
  if (!c->scratch || !c->staging)
    return hvd__err(HVD_E_NOMEM, "allocating 2 x %u bytes of scratch", HVD_CHUNK_BYTES);
  return 0;
}

int hvd__comm_init(hvd_comm *c, int rank, int size, hvd_transport *xport) {
  int rc = comm_alloc(c, rank, size, xport);
  c->owns_xport = 1;
  return rc;
}

int hvd__comm_init_subset(hvd_comm *c, const hvd_comm *parent, const int *ranks, int n, int me) {
  int rank = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == me) rank = i;
  if (rank < 0) return hvd__err(HVD_E_INVALID, "rank %d is not in the process set", me);
  HVD__CHECK(comm_alloc(c, rank, n, parent->xport));
  c->allreduce_algo = parent->allreduce_algo;
  c->members = malloc((size_t)n * sizeof *c->members);
  if (!c->members) return hvd__err(HVD_E_NOMEM, "allocating a process set of %d ranks", n);
  memcpy(c->members, ranks, (size_t)n * sizeof *c->members);
  return 0;
}

int hvd__comm_init_over(hvd_comm *c, const hvd_comm *parent, hvd_transport *xport) {
  HVD__CHECK(comm_alloc(c, xport->rank, xport->size, xport));
  c->allreduce_algo = parent->allreduce_algo;
  return 0;
}

/* Destroys and frees a sub-communicator; NULL is fine. */
static void sub_free(hvd_comm *sub) {
  if (!sub) return;
  hvd__comm_destroy(sub);
  free(sub);
}

void hvd__comm_destroy(hvd_comm *c) {
  sub_free(c->local);
  sub_free(c->cross);
  free(c->hier_rank);
  if (c->xport && c->owns_xport) c->xport->ops->destroy(c->xport);
  free(c->scratch);
  free(c->staging);
  free(c->peer_buf);
  free(c->members);
  memset(c, 0, sizeof *c);
}

int hvd__comm_begin(hvd_comm *c, uint32_t *tag) {
  if (c->broken)
    return hvd__err(HVD_E_ABORTED, "the job's communicator broke earlier: %s", c->broken_why);
  *tag = ++c->seq;
  return 0;
}

void hvd__comm_abort(hvd_comm *c, const char *why) {
  if (c->broken) return;
  c->broken = 1;
  snprintf(c->broken_why, sizeof c->broken_why, "%s", why);
  if (c->xport) c->xport->ops->abort(c->xport, -1, c->broken_why);
}

int hvd__comm_fail(hvd_comm *c, int rc) {
  /* Argument errors are found before any byte moves and leave the peers in
   * a consistent state; everything else may have left a frame half sent. */
  if (rc == HVD_E_INVALID || rc == HVD_E_UNSUPPORTED) return rc;
  hvd__comm_abort(c, hvd_last_error());
  return rc;
}
