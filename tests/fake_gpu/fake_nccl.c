/*
 * fake_nccl.c -- a CPU stand-in for libnccl, built as libnccl.so.<major>
 * beside fake_cudart.c's libcudart (which says why): communicators of one
 * rank, whose collectives are copies (a pre-multiplied sum multiplies).
 *
 * A non-blocking communicator (ncclConfig_t.blocking = 0) behaves as
 * NCCL's may: its set-up and every collective answer ncclInProgress and
 * the communicator reports ncclInProgress for a few polls of
 * ncclCommGetAsyncError, so that hvd's polling runs.  FAKE_NCCL_FAIL=1
 * makes every collective fail (ncclSystemError), for the error path.
 */
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPS 16

struct ncclComm {
  int nonblocking;
  int polls;               /* ncclCommGetAsyncError answers ncclInProgress this many more times */
  double scalar[MAX_OPS];  /* the pre-multiplied sums' scalars */
  int used[MAX_OPS];
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

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0x5a, sizeof *id);
  return ncclSuccess;
}

static ncclResult_t init(ncclComm_t *out, int nranks, int rank, int nonblocking) {
  if (nranks != 1 || rank != 0) return ncclInvalidUsage; /* one rank only */
  *out = calloc(1, sizeof **out);
  if (!*out) return ncclSystemError;
  (*out)->nonblocking = nonblocking;
  return started(*out);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  return init(comm, nranks, rank, 0);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  (void)id;
  return init(comm, nranks, rank, config && config->blocking == 0);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return started(comm); }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
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
  if (datatype != ncclFloat32 && datatype != ncclFloat64) return ncclInvalidArgument;
  for (int i = 0; i < MAX_OPS; i++)
    if (!comm->used[i]) {
      comm->used[i] = 1;
      comm->scalar[i] = datatype == ncclFloat32 ? *(float *)scalar : *(double *)scalar;
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

static size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

/* One rank's reduction of count elements: a copy, or x * scalar. */
static ncclResult_t reduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm) {
  size_t es = type_size(t);
  if (!es || !comm || (count && (!send || !recv))) return ncclInvalidArgument;
  if (failing()) return ncclSystemError;
  if ((int)op < ncclNumOps) {
    memmove(recv, send, count * es);
    return started(comm);
  }
  int i = (int)op - ncclNumOps;
  if (i >= MAX_OPS || !comm->used[i]) return ncclInvalidArgument;
  for (size_t k = 0; k < count; k++)
    if (t == ncclFloat32) ((float *)recv)[k] = ((const float *)send)[k] * (float)comm->scalar[i];
    else ((double *)recv)[k] = ((const double *)send)[k] * comm->scalar[i];
  return started(comm);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  return reduce(send, recv, count, t, op, comm);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  return reduce(send, recv, recvcount, t, op, comm);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  return reduce(send, recv, count, t, ncclSum, comm);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  if (root != 0) return ncclInvalidArgument;
  return reduce(send, recv, count, t, ncclSum, comm);
}

/* Point to point needs a second rank. */
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  (void)send, (void)count, (void)t, (void)peer, (void)comm, (void)stream;
  return ncclInvalidUsage;
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  (void)recv, (void)count, (void)t, (void)peer, (void)comm, (void)stream;
  return ncclInvalidUsage;
}

/* nccl.h declares these without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }

ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
