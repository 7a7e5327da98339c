/*
 * copier.h -- how the staging pipeline (staging.h) moves bytes between
 * device and host memory: a small struct of functions, as a transport is.
 *
 * Copies are asynchronous and run in the order they were issued (one CUDA
 * stream); an event recorded after some copies completes when they have.
 * Implementations: CUDA (gpu/cuda/copier_cuda.c: cudaMemcpyAsync on a
 * stream of its own, cudaEvent_t, cudaHostAlloc) and, in the unit tests, a
 * host-memory stand-in (memcpy in a worker thread) so that the pipeline's
 * chunking, overlap and completion order are tested without a GPU.
 */
#ifndef HVD_GPU_COPIER_H
#define HVD_GPU_COPIER_H

#include <stddef.h>
#include <stdint.h>

typedef struct hvd__copy_event hvd__copy_event; /* the implementation's */

typedef struct hvd__copier_ops {
  /* Page-locked host memory that copies can run from asynchronously. */
  int (*alloc_pinned)(void *ctx, size_t bytes, void **out);
  void (*free_pinned)(void *ctx, void *p);
  /* Queue a copy; it runs after every copy queued before it. */
  int (*copy_d2h_async)(void *ctx, void *host, const void *dev, size_t bytes);
  int (*copy_h2d_async)(void *ctx, void *dev, const void *host, size_t bytes);
  int (*event_create)(void *ctx, hvd__copy_event **out);
  void (*event_destroy)(void *ctx, hvd__copy_event *ev);
  /* Mark the point after every copy queued so far. */
  int (*event_record)(void *ctx, hvd__copy_event *ev);
  /* 1 when the copies before the event are done, 0 not yet, or HVD_E_*. */
  int (*event_query)(void *ctx, hvd__copy_event *ev);
  /* Waits for the event; HVD_E_TIMEOUT past deadline (hvd__now_ms clock). */
  int (*event_wait)(void *ctx, hvd__copy_event *ev, uint64_t deadline);
  /* Device memory (the engine's device fusion buffer) and a copy within
   * the device, queued in order with the others. */
  int (*alloc_device)(void *ctx, size_t bytes, void **out);
  void (*free_device)(void *ctx, void *p);
  int (*copy_d2d_async)(void *ctx, void *dst, const void *src, size_t bytes);
  /* Copies queued from now on wait (on the device, not here) for an
   * event the caller recorded on its own stream (hvd_work.ready).  NULL
   * in a copier whose callers have no streams (the host stand-in). */
  int (*wait_ready)(void *ctx, void *ready);
} hvd__copier_ops;

typedef struct hvd__copier {
  const hvd__copier_ops *ops;
  void *ctx;
} hvd__copier;

#endif /* HVD_GPU_COPIER_H */
