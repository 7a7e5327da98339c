/*
 * dispatch.c -- the one place that picks a process set's own collectives
 * (c->coll) or hvd's built-in ones (dispatch.h).
 *
 * A communicator carries c->coll when another library runs its data
 * collectives (src/mpi/ops.c under HOROVOD_CPU_OPERATIONS=mpi); its
 * allreduce takes n tensors in place, so a single tensor is a list of
 * one here.
 */
#include "dispatch.h"

int hvd__coll_allreduce(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype, hvd_op op) {
  if (c->coll) return c->coll->allreduce(c, &buf, &count, 1, dtype, op);
  return hvd__allreduce(c, buf, buf, count, dtype, op);
}

int hvd__coll_allreduce_small(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype,
                              hvd_op op) {
  if (c->coll) return c->coll->allreduce(c, &buf, &count, 1, dtype, op);
  return hvd__allreduce_small(c, buf, count, dtype, op);
}

int hvd__coll_allreduce_tensors(hvd_comm *c, void *const *bufs, const size_t *counts, int n,
                                hvd_dtype dtype, hvd_op op) {
  if (c->coll) return c->coll->allreduce(c, bufs, counts, n, dtype, op);
  return hvd__allreduce_tensors(c, bufs, counts, n, dtype, op);
}

int hvd__coll_reducescatter(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                            hvd_dtype dtype, hvd_op op) {
  if (c->coll) return c->coll->reducescatter(c, sbuf, rbuf, count, dtype, op);
  return hvd__reducescatter(c, sbuf, rbuf, count, dtype, op);
}

int hvd__coll_broadcast(hvd_comm *c, void *buf, size_t bytes, int root) {
  if (c->coll) return c->coll->broadcast(c, buf, bytes, root);
  return hvd__broadcast(c, buf, bytes, root);
}

int hvd__coll_allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                        size_t *counts) {
  if (c->coll) return c->coll->allgather(c, sbuf, count, esize, rbuf, counts);
  return hvd__allgather_tensor(c, sbuf, count, esize, rbuf, counts);
}

int hvd__coll_alltoall(hvd_comm *c, const void *sbuf, const size_t *scounts, size_t esize,
                       void **rbuf, size_t *rcounts) {
  if (c->coll) return c->coll->alltoall(c, sbuf, scounts, esize, rbuf, rcounts);
  return hvd__alltoall(c, sbuf, scounts, esize, rbuf, rcounts);
}

int hvd__coll_barrier(hvd_comm *c) {
  if (c->coll) return c->coll->barrier(c);
  return hvd__barrier(c);
}
