/*
 * fake_nccl.c -- a CPU stand-in for libnccl, built as libnccl.so.<major>
 * beside fake_cudart.c's libcudart (which says why): communicators of one
 * rank, whose collectives are copies (a pre-multiplied sum multiplies),
 * and of several ranks of one machine, which meet in shared memory
 * (fake_nccl_ranks.c).
 *
 * A non-blocking communicator (ncclConfig_t.blocking = 0) behaves as
 * NCCL's may: its set-up and every collective answer ncclInProgress and
 * the communicator reports ncclInProgress for a few polls of
 * ncclCommGetAsyncError, so that hvd's polling runs.  FAKE_NCCL_FAIL=1
 * makes every collective fail (ncclSystemError), for the error path.
 */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_nccl_ranks.h"

#define MAX_OPS 16

struct ncclComm {
  int nonblocking;
  int polls;               /* ncclCommGetAsyncError answers ncclInProgress this many more times */
  double scalar[MAX_OPS];  /* the pre-multiplied sums' scalars */
  int used[MAX_OPS];
  fake_ranks *ranks;       /* several ranks: their shared memory; NULL for one */
};

static ncclResult_t started(ncclComm_t comm) {
  if (!comm->nonblocking) return ncclSuccess;
  comm->polls = 3;
  return ncclInProgress;
}

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (fake NCCL)";
    case ncclInvalidUsage: return "invalid usage (fake NCCL)";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unhandled error (fake NCCL)";
  }
}

static int failing(void) {
  const char *v = getenv("FAKE_NCCL_FAIL");
  return v && strcmp(v, "1") == 0;
}

const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return failing() ? "FAKE_NCCL_FAIL is set" : "";
}

/* The id names the shared memory a communicator of several ranks meets in. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static unsigned made;
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "/hvd-fake-nccl.%ld.%u", (long)getpid(), ++made);
  return ncclSuccess;
}

static ncclResult_t init(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                         int nonblocking) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  *out = calloc(1, sizeof **out);
  if (!*out) return ncclSystemError;
  (*out)->nonblocking = nonblocking;
  if (nranks > 1 && !((*out)->ranks = fake_ranks_join(id.internal, nranks, rank))) {
    free(*out);
    *out = NULL;
    return ncclSystemError;
  }
  return started(*out);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return init(comm, nranks, id, rank, 0);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  return init(comm, nranks, id, rank, config && config->blocking == 0);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return started(comm); }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm) fake_ranks_leave(comm->ranks);
  free(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  if (!comm) return ncclInvalidArgument;
  *state = comm->polls > 0 ? ncclInProgress : ncclSuccess;
  if (comm->polls > 0) comm->polls--;
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (residence != ncclScalarHostImmediate) return ncclInvalidArgument;
  double v;
  switch (datatype) {
    case ncclFloat16: v = (double)*(half *)scalar; break;
    case ncclFloat32: v = *(float *)scalar; break;
    case ncclFloat64: v = *(double *)scalar; break;
    default: return ncclInvalidArgument; /* bfloat16: no arithmetic here (fake_nccl_ranks.c) */
  }
  for (int i = 0; i < MAX_OPS; i++)
    if (!comm->used[i]) {
      comm->used[i] = 1;
      comm->scalar[i] = v;
      *op = (ncclRedOp_t)(ncclNumOps + i);
      return ncclSuccess;
    }
  return ncclInvalidUsage;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  int i = (int)op - ncclNumOps;
  if (i < 0 || i >= MAX_OPS || !comm->used[i]) return ncclInvalidArgument;
  comm->used[i] = 0;
  return ncclSuccess;
}

/* The op as fake_nccl_ranks.h takes it: NCCL's, or a pre-multiplied sum. */
static ncclResult_t red_of(ncclComm_t comm, ncclRedOp_t op, fake_red *red) {
  *red = (fake_red){op, 0, 1.0};
  if ((int)op < ncclNumOps) return ncclSuccess;
  int i = (int)op - ncclNumOps;
  if (i >= MAX_OPS || !comm->used[i]) return ncclInvalidArgument;
  red->premul = 1;
  red->scalar = comm->scalar[i];
  return ncclSuccess;
}

/* What every collective checks first (and FAKE_NCCL_FAIL). */
static ncclResult_t check(ncclComm_t comm, const void *send, void *recv, size_t count,
                          ncclDataType_t t) {
  if (!fake_type_size(t) || !comm || (count && (!send || !recv))) return ncclInvalidArgument;
  return failing() ? ncclSystemError : ncclSuccess;
}

/* A collective's end: a non-blocking communicator says "in progress". */
static ncclResult_t finish(ncclComm_t comm, ncclResult_t r) {
  return r == ncclSuccess ? started(comm) : r;
}

/* One rank's reduction of count elements: a copy, or x * scalar. */
static void reduce_alone(const void *send, void *recv, size_t count, ncclDataType_t t,
                         fake_red red) {
  if (!red.premul) {
    memmove(recv, send, count * fake_type_size(t));
    return;
  }
  for (size_t k = 0; k < count; k++)
    if (t == ncclFloat16) ((half *)recv)[k] = ((const half *)send)[k] * (half)red.scalar;
    else if (t == ncclFloat32) ((float *)recv)[k] = ((const float *)send)[k] * (float)red.scalar;
    else ((double *)recv)[k] = ((const double *)send)[k] * red.scalar;
}

/* Allreduce and reduce-scatter: what each rank receives, count elements,
 * is one rank's input alone, or across ranks what `ranks` computes. */
typedef ncclResult_t ranks_reduce_fn(fake_ranks *g, const void *send, void *recv, size_t count,
                                     ncclDataType_t t, fake_red red);

static ncclResult_t reduction(ranks_reduce_fn *ranks, const void *send, void *recv,
                              size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm) {
  fake_red red;
  ncclResult_t r = check(comm, send, recv, count, t);
  if (r == ncclSuccess) r = red_of(comm, op, &red);
  if (r != ncclSuccess) return r;
  if (comm->ranks) return finish(comm, ranks(comm->ranks, send, recv, count, t, red));
  reduce_alone(send, recv, count, t, red);
  return started(comm);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  return reduction(fake_ranks_allreduce, send, recv, count, t, op, comm);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  return reduction(fake_ranks_reduce_scatter, send, recv, recvcount, t, op, comm);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  ncclResult_t r = check(comm, send, recv, count, t);
  if (r != ncclSuccess) return r;
  if (comm->ranks) return finish(comm, fake_ranks_allgather(comm->ranks, send, recv, count, t));
  memmove(recv, send, count * fake_type_size(t));
  return started(comm);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  ncclResult_t r = check(comm, send, recv, count, t);
  if (r != ncclSuccess) return r;
  if (comm->ranks)
    return finish(comm, fake_ranks_broadcast(comm->ranks, send, recv, count, t, root));
  if (root != 0) return ncclInvalidArgument;
  memmove(recv, send, count * fake_type_size(t));
  return started(comm);
}

/* ---- point to point: queued in a group, exchanged at its end ---- */

#define MAX_PEERS 64

/* The group's sends and receives, per peer, on one communicator. */
static struct {
  int depth;
  ncclComm_t comm;
  const void *send[MAX_PEERS];
  size_t sbytes[MAX_PEERS];
  void *recv[MAX_PEERS];
  size_t rbytes[MAX_PEERS];
} group;

/* One rank: its sends to itself are its receives. */
static ncclResult_t exchange_alone(void) {
  if (group.sbytes[0] != group.rbytes[0]) return ncclInvalidUsage;
  if (group.sbytes[0]) memmove(group.recv[0], group.send[0], group.sbytes[0]);
  return ncclSuccess;
}

static ncclResult_t run_group(void) {
  ncclComm_t comm = group.comm;
  ncclResult_t r = ncclSuccess;
  if (comm) r = comm->ranks ? fake_ranks_exchange(comm->ranks, group.send, group.sbytes,
                                                  group.recv, group.rbytes)
                            : exchange_alone();
  memset(&group, 0, sizeof group);
  return comm ? finish(comm, r) : r;
}

static ncclResult_t queue(int is_send, void *buf, size_t count, ncclDataType_t t, int peer,
                          ncclComm_t comm) {
  ncclResult_t r = check(comm, buf, buf, count, t);
  if (r != ncclSuccess) return r;
  if (peer < 0 || peer >= MAX_PEERS || (group.comm && group.comm != comm))
    return ncclInvalidUsage; /* one communicator per group, here */
  group.comm = comm;
  if (is_send) group.send[peer] = buf, group.sbytes[peer] = count * fake_type_size(t);
  else group.recv[peer] = buf, group.rbytes[peer] = count * fake_type_size(t);
  return group.depth ? ncclSuccess : run_group(); /* alone: a group of one */
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  return queue(1, (void *)(uintptr_t)send, count, t, peer, comm);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  (void)stream;
  return queue(0, recv, count, t, peer, comm);
}

/* nccl.h declares these without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclGroupStart(void) {
  group.depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group.depth == 0) return ncclInvalidUsage;
  return --group.depth ? ncclSuccess : run_group();
}
