/*
 * dispatch.h -- the collectives of a process set, whoever implements
 * them: the communicator's own (c->coll: MPI's, under
 * HOROVOD_CPU_OPERATIONS=mpi) or hvd's built-in algorithms (coll.h).
 *
 * The choice is made here and nowhere else (dispatch.c): the engine runs
 * a set's collectives through these calls, with the arguments and rules
 * of coll.h's functions.  Negotiation's own exchanges are not data
 * collectives and always take hvd's algorithms (the engine calls coll.h
 * for those, on purpose).
 */
#ifndef HVD_COLL_DISPATCH_H
#define HVD_COLL_DISPATCH_H

#include "coll.h"

/* One tensor reduced in place: the built-in algorithm chosen by its size
 * (hvd__allreduce), or c's own; AVERAGE divided. */
int hvd__coll_allreduce(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype, hvd_op op);

/* The same for a few values whose latency is all that counts: the
 * built-in hvd__allreduce_small, or c's own. */
int hvd__coll_allreduce_small(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype,
                              hvd_op op);

/* n tensors (bufs[i], counts[i] elements) reduced in place, each with the
 * bits it has alone: one built-in collective per algorithm among them
 * (hvd__allreduce_tensors), or c's own allreduce of the n. */
int hvd__coll_allreduce_tensors(hvd_comm *c, void *const *bufs, const size_t *counts, int n,
                                hvd_dtype dtype, hvd_op op);

int hvd__coll_reducescatter(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                            hvd_dtype dtype, hvd_op op);
int hvd__coll_broadcast(hvd_comm *c, void *buf, size_t bytes, int root);
/* A tensor's allgather: the built-in hvd__allgather_tensor (hierarchical
 * with HOROVOD_HIERARCHICAL_ALLGATHER), or c's own. */
int hvd__coll_allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                        size_t *counts);
int hvd__coll_alltoall(hvd_comm *c, const void *sbuf, const size_t *scounts, size_t esize,
                       void **rbuf, size_t *rcounts);
int hvd__coll_barrier(hvd_comm *c);

/* Every rank of c says whether it is ready for what comes next (rc: this
 * rank's 0 or HVD_E_*, hvd_last_error() saying why) in one small
 * allreduce, so that one rank's failure fails the step on every rank
 * instead of leaving the others in a collective it never joins.  0 when
 * all are; else "rank R <what>: <why>" on the failing rank (its code),
 * "rank R <what> (its own error says why)" on the others (HVD_E_UNSUPPORTED),
 * R the highest failing rank, and *fatal 0; *fatal 1 only when the
 * agreement itself failed (agree.c). */
int hvd__coll_agree(hvd_comm *c, int rc, const char *what, int *fatal);

#endif /* HVD_COLL_DISPATCH_H */
