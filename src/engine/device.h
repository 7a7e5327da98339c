/*
 * device.h -- the engine's path for tensors in device memory
 * (hvd_opts.device): staged through pinned host memory by the staging
 * pipeline (gpu/staging.h), each chunk run by the host collective as soon
 * as its copy arrives (docs/gpu.md); or, with HOROVOD_GPU_OPERATIONS /
 * HOROVOD_GPU_ALLREDUCE=NCCL, through NCCL (device_nccl.h).
 *
 * What runs there (allreduce, broadcast, reducescatter) is decided in negotiation,
 * from what every rank knows alike; the rest fails every rank's tensor
 * with HVD_E_UNSUPPORTED "not supported yet" (or HVD_E_ENV for a knob
 * that is not Horovod's value) before a byte moves.
 */
#ifndef HVD_ENGINE_DEVICE_H
#define HVD_ENGINE_DEVICE_H

#include <stddef.h>

#include "device_ready.h"

struct hvd_engine;
struct response;
struct hvd_comm;

/* 0 if a device tensor of this kind runs; else the HVD_E_* code, with
 * why (at most cap bytes, naming the tensor). */
int hvd__device_check(int type, int reduce_op, int all_submitted, const char *name, char *why,
                      size_t cap);

/* The path this rank's knobs choose for a device tensor of this kind
 * (HOROVOD_GPU_ALLREDUCE, HOROVOD_GPU_OPERATIONS): HVD_MEM_NCCL or
 * HVD_MEM_STAGED, read at the call and negotiated with the request. */
int hvd__device_path(int type);

/* Runs r (its items in device memory, checked by hvd__device_check) on
 * communicator c.  On failure *fatal says whether the communicator may
 * be left mid-collective (1) or every rank failed r cleanly (0: a rank
 * had no copier). */
int hvd__device_execute(struct hvd_engine *e, struct response *r, struct hvd_comm *c,
                        int *fatal);

/* Frees the engine's pipeline and copier. */
void hvd__device_close(struct hvd_engine *e);

#endif /* HVD_ENGINE_DEVICE_H */
