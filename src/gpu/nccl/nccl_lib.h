/*
 * nccl_lib.h -- the NCCL functions hvd calls, loaded at run time as
 * libcudart is (cudart.h): libnccl.so.<major>, the copy a framework
 * already loaded found by its soname.  Types from the toolkit's nccl.h.
 */
#ifndef HVD_GPU_NCCL_LIB_H
#define HVD_GPU_NCCL_LIB_H

#include <nccl.h>

#include "gpu/cuda/dl.h"

/* ncclGroupStart/End are declared without a prototype in nccl.h. */
typedef ncclResult_t hvd__nccl_void_fn(void);

#define HVD__NCCL_FN(X)                                                  \
  X(GetVersion, "ncclGetVersion", __typeof__(ncclGetVersion))           \
  X(GetErrorString, "ncclGetErrorString", __typeof__(ncclGetErrorString)) \
  X(GetLastError, "ncclGetLastError", __typeof__(ncclGetLastError))     \
  X(GetUniqueId, "ncclGetUniqueId", __typeof__(ncclGetUniqueId))        \
  X(CommInitRank, "ncclCommInitRank", __typeof__(ncclCommInitRank))     \
  X(CommInitRankConfig, "ncclCommInitRankConfig", __typeof__(ncclCommInitRankConfig)) \
  X(CommFinalize, "ncclCommFinalize", __typeof__(ncclCommFinalize))     \
  X(CommDestroy, "ncclCommDestroy", __typeof__(ncclCommDestroy))        \
  X(CommAbort, "ncclCommAbort", __typeof__(ncclCommAbort))              \
  X(CommGetAsyncError, "ncclCommGetAsyncError", __typeof__(ncclCommGetAsyncError)) \
  X(RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum", __typeof__(ncclRedOpCreatePreMulSum)) \
  X(RedOpDestroy, "ncclRedOpDestroy", __typeof__(ncclRedOpDestroy))     \
  X(AllReduce, "ncclAllReduce", __typeof__(ncclAllReduce))              \
  X(AllGather, "ncclAllGather", __typeof__(ncclAllGather))              \
  X(Broadcast, "ncclBroadcast", __typeof__(ncclBroadcast))              \
  X(ReduceScatter, "ncclReduceScatter", __typeof__(ncclReduceScatter))  \
  X(Send, "ncclSend", __typeof__(ncclSend))                             \
  X(Recv, "ncclRecv", __typeof__(ncclRecv))                             \
  X(GroupStart, "ncclGroupStart", hvd__nccl_void_fn)                    \
  X(GroupEnd, "ncclGroupEnd", hvd__nccl_void_fn)

typedef struct hvd__nccl {
  hvd__dl_handle h;
#define HVD__NCCL_FIELD(field, name, type) type *field;
  HVD__NCCL_FN(HVD__NCCL_FIELD)
#undef HVD__NCCL_FIELD
} hvd__nccl;

/* Loads libnccl from path, or NULL for the default search; a missing
 * library or symbol is HVD_E_UNSUPPORTED naming it. */
int hvd__nccl_load(hvd__nccl *nc, const char *path);
void hvd__nccl_unload(hvd__nccl *nc);

/* The process's NCCL, loaded once; thread-safe. */
int hvd__nccl_get(const hvd__nccl **nc);

/* NCCL's version as NCCL_VERSION_CODE spells it (22809 for 2.28.9). */
int hvd__nccl_version(const hvd__nccl *nc);

/* A failed call as HVD_E_SYSTEM "<what>: <NCCL's text>"; ncclSuccess is 0. */
int hvd__nccl_check(const hvd__nccl *nc, ncclResult_t r, const char *what);

#endif /* HVD_GPU_NCCL_LIB_H */
