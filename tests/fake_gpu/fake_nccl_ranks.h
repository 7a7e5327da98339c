/*
 * fake_nccl_ranks.h -- the ranks of a fake NCCL communicator of more than
 * one rank (fake_nccl.c): processes of one machine meeting in a POSIX
 * shared-memory segment named by the unique id, exchanging their buffers
 * 1 MiB at a time between barriers.  "Device memory" is host memory.  For
 * the tests of hvd's hierarchical NCCL allreduce, whose host communicator
 * has several ranks (one GPU cannot hold two ranks of a real one).
 */
#ifndef FAKE_NCCL_RANKS_H
#define FAKE_NCCL_RANKS_H

#include <nccl.h>
#include <stddef.h>

__extension__ typedef _Float16 half; /* GCC's binary16 (x86-64): the fakes' float16 */

typedef struct fake_ranks fake_ranks;

/* How a collective reduces: NCCL's op, or a sum of each contribution
 * times `scalar` (a pre-multiplied sum: premul). */
typedef struct {
  ncclRedOp_t op;
  int premul;
  double scalar;
} fake_red;

/* Makes (rank 0) or opens the segment `name` for n ranks and waits until
 * every rank has: NULL when that fails or takes over a minute. */
fake_ranks *fake_ranks_join(const char *name, int n, int rank);
void fake_ranks_leave(fake_ranks *g);

/* The collectives, each entered by every rank: ncclSuccess, or
 * ncclInvalidArgument (a type it cannot reduce), ncclSystemError (a rank
 * missing for a minute). */
ncclResult_t fake_ranks_allreduce(fake_ranks *g, const void *send, void *recv, size_t count,
                                  ncclDataType_t t, fake_red red);
ncclResult_t fake_ranks_reduce_scatter(fake_ranks *g, const void *send, void *recv,
                                       size_t recvcount, ncclDataType_t t, fake_red red);
ncclResult_t fake_ranks_allgather(fake_ranks *g, const void *send, void *recv, size_t count,
                                  ncclDataType_t t);
ncclResult_t fake_ranks_broadcast(fake_ranks *g, const void *send, void *recv, size_t count,
                                  ncclDataType_t t, int root);

/* Point to point as one exchange (a group of ncclSend/ncclRecv, at most
 * one each way per peer): send[p] (sbytes[p] bytes) goes to rank p,
 * recv[p] (rbytes[p]) comes from it; NULL or 0 where none. */
ncclResult_t fake_ranks_exchange(fake_ranks *g, const void *const *send, const size_t *sbytes,
                                 void *const *recv, const size_t *rbytes);

/* Bytes of one element of t; 0 for a type the fake does not know. */
size_t fake_type_size(ncclDataType_t t);

#endif /* FAKE_NCCL_RANKS_H */
