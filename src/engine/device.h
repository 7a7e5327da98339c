/*
 * device.h -- the engine's paths for tensors in device memory
 * (hvd_opts.device): staged through pinned host memory by the staging
 * pipeline (gpu/staging.h), each chunk run by the host collective as soon
 * as its copy arrives (device_staged.c, docs/gpu.md); or, with
 * HOROVOD_GPU_OPERATIONS / HOROVOD_GPU_ALLREDUCE=NCCL, through NCCL
 * (device_nccl.c).  Each path is a small table of functions, as a
 * transport is; device.c runs a response on the one its requests
 * negotiated.
 *
 * What runs there (allreduce, broadcast, reducescatter, allgather,
 * alltoall) is decided in negotiation, from what every rank knows alike;
 * the rest fails every rank's tensor with HVD_E_UNSUPPORTED "not supported
 * yet" (or HVD_E_ENV for a knob that is not Horovod's value) before a
 * byte moves.
 */
#ifndef HVD_ENGINE_DEVICE_H
#define HVD_ENGINE_DEVICE_H

#include <stddef.h>

#include "device_ready.h"
#include "timeline.h"

struct response;
struct hvd_comm;
struct hvd__staging;
struct hvd__nccl_path;

/* The device part of the engine: what the paths made, each at its first
 * response (the driver's, one thread at a time). */
typedef struct hvd__device {
  /* The staged path: the pipeline and its copier; copier_cuda: the
   * copier is CUDA's (ours to free). */
  struct hvd__staging *staging;
  hvd__copier copier;
  int copier_cuda;
  void *fusion;          /* the device fusion buffer (the copier's memory) */
  size_t fusion_cap;
  hvd__copy_event *done; /* the fused tensors' copies out of it */
  struct hvd__nccl_path *nccl; /* the NCCL path */
} hvd__device;

/* A path for device tensors. */
typedef struct hvd__device_ops {
  const char *name;
  /* 0, or what this path refuses to run r for (HVD_E_*, hvd_last_error()
   * saying why), decided from the requests alone, so alike on every rank
   * of size before a byte moves; NULL: it refuses nothing. */
  int (*check)(const struct response *r, int size);
  /* Runs r (its items in device memory, checked by hvd__device_check) on
   * communicator c.  On failure *fatal says whether c may be left
   * mid-collective (1) or every rank failed r cleanly (0: a rank had no
   * GPU, no copier, no NCCL). */
  int (*execute)(hvd__device *d, struct response *r, struct hvd_comm *c, hvd_timeline *tl,
                 int *fatal);
  /* Frees what the path made; broken: the engine broke, the peers may be
   * gone (nothing that waits for them). */
  void (*close)(hvd__device *d, int broken);
} hvd__device_ops;

extern const hvd__device_ops hvd__device_staged; /* device_staged.c */
extern const hvd__device_ops hvd__device_nccl;   /* device_nccl.c */

/* 0 if a device tensor of this kind runs; else the HVD_E_* code, with
 * why (at most cap bytes, naming the tensor). */
int hvd__device_check(int type, int reduce_op, int all_submitted, const char *name, char *why,
                      size_t cap);

/* The path this rank's knobs choose for a device tensor of this kind
 * (HOROVOD_GPU_ALLREDUCE, HOROVOD_GPU_OPERATIONS): HVD_MEM_NCCL or
 * HVD_MEM_STAGED, read at the call and negotiated with the request. */
int hvd__device_path(int type);

/* Runs r on c through the path its requests negotiated: that path's
 * check, then its execute (*fatal as there). */
int hvd__device_execute(hvd__device *d, struct response *r, struct hvd_comm *c, hvd_timeline *tl,
                        int *fatal);

/* Frees what every path made, at the engine's end. */
void hvd__device_close(hvd__device *d, int broken);

#endif /* HVD_ENGINE_DEVICE_H */
