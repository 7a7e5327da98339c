/*
 * device_nccl.h -- the engine's NCCL path for tensors in device memory
 * (hvd_opts.device), chosen as Horovod chooses it: HOROVOD_GPU_OPERATIONS=
 * NCCL, or HOROVOD_GPU_ALLREDUCE=NCCL for allreduces (device.c reads the
 * knobs and hands the response over).
 *
 * One NCCL communicator per process set, made at the set's first NCCL
 * response (rank 0's ncclUniqueId sent by hvd's host broadcast) and kept
 * until shutdown; the collectives run on a stream of the path's own, and
 * the engine completes the tensors when an event recorded after them has
 * completed, waiting with a deadline (docs/gpu.md).
 */
#ifndef HVD_ENGINE_DEVICE_NCCL_H
#define HVD_ENGINE_DEVICE_NCCL_H

struct hvd_engine;
struct response;
struct hvd_comm;

/* Runs r (any collective that moves tensors, every rank's tensor in
 * device memory: hvd__device_check) through NCCL on communicator c's
 * ranks.  *fatal as hvd__device_execute's: 0 when every rank failed r
 * cleanly before a byte moved (a rank without a GPU or NCCL, a dtype or
 * scale NCCL cannot reduce), 1 when a collective may be left half done. */
int hvd__nccl_execute(struct hvd_engine *e, struct response *r, struct hvd_comm *c, int *fatal);

/* Frees the communicators (ncclCommFinalize with a deadline, then
 * ncclCommDestroy; ncclCommAbort past it or when the engine broke), the
 * stream, the event and the fusion buffer.  At the engine's end. */
void hvd__nccl_close(struct hvd_engine *e);

#endif /* HVD_ENGINE_DEVICE_NCCL_H */
