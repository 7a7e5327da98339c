/*
 * copier_cuda.h -- the staging pipeline's copier (gpu/copier.h) on a CUDA
 * device: cudaMemcpyAsync on a non-blocking stream of its own, cudaEvent_t
 * (timing off) for completion, cudaHostAlloc for pinned memory.  Waits
 * poll cudaEventQuery against the deadline (cudaEventSynchronize has
 * none), spinning briefly, then sleeping.
 */
#ifndef HVD_GPU_COPIER_CUDA_H
#define HVD_GPU_COPIER_CUDA_H

#include "gpu/copier.h"

/* A copier on device (makes it the calling thread's current device).
 * HVD_E_UNSUPPORTED when libcudart or the device is missing, saying which. */
int hvd__copier_cuda_create(hvd__copier *out, int device);
void hvd__copier_cuda_destroy(hvd__copier *c);

/* An event recorded on the caller's `stream` of `device` (NULL: the
 * legacy default stream), for a copier's wait_ready: the point after the
 * work that produces a tensor.  Made on the calling thread, whose current
 * device is left as it was. */
int hvd__cuda_ready_event(int device, void *stream, void **out);
void hvd__cuda_ready_event_free(void *ev);

#endif /* HVD_GPU_COPIER_CUDA_H */
