/*
 * device_ready.h -- what a device tensor needs before the engine runs
 * it (device_ready.c): the event on the caller's stream that its copies
 * wait for, made at enqueue and freed with its entry, and the copier a
 * test puts in CUDA's place.  Below every file of the engine that needs
 * them (engine.c makes the event, core.c frees it, device.c reads the
 * copier).
 */
#ifndef HVD_ENGINE_DEVICE_READY_H
#define HVD_ENGINE_DEVICE_READY_H

#include "gpu/copier.h"

/* At enqueue, on the caller's thread: *ready gets an event recorded on
 * the caller's stream (hvd_opts.stream) of `device`, which the copies of
 * that tensor's buffers wait for on the device.  NULL with a test copier
 * (no streams), or where CUDA cannot be loaded (the copier agreement
 * fails the tensor then, saying why). */
int hvd__device_ready_new(int device, void *stream, void **ready);
void hvd__device_ready_free(void *ready);

/* For tests (programs that link libhvd's objects): the copier the engine
 * uses for device tensors instead of CUDA's, e.g. a host-memory stand-in
 * whose "device memory" is host memory.  Set before hvd_init; NULL
 * restores CUDA's.  Not part of hvd.h. */
void hvd__device_set_copier(const hvd__copier *c);
/* The copier a test set, or NULL: CUDA's. */
const hvd__copier *hvd__device_test_copier(void);

#endif /* HVD_ENGINE_DEVICE_READY_H */
