/*
 * staging.h -- a collective on device memory, staged through pinned host
 * memory in chunks pipelined against the host collective.
 *
 * The device buffer is cut into chunks.  Each chunk is copied to a slot
 * of pinned host memory; as soon as its copy completes, the host
 * collective runs on it (in place) while the copier already moves the
 * next chunks; then the result is copied back to the device.  `slots`
 * chunks of pinned memory are in flight at once: the copy of chunk k+slots
 * into a slot is queued behind the copy of chunk k out of it, so the
 * copier's in-order queue is what keeps a slot from being overwritten.
 * This is Horovod's path for GPU tensors without NCCL (any number of
 * ranks per GPU, any transport); the engine is to call it with its
 * collective on the fused buffer (docs/gpu.md says how it will be wired).
 *
 * Device-agnostic: it sees device memory only through a copier
 * (copier.h), so the unit tests run it against a host-memory stand-in.
 */
#ifndef HVD_GPU_STAGING_H
#define HVD_GPU_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/copier.h"

/* The host collective on one chunk, in place: host holds bytes bytes of
 * the tensor starting at byte offset.  Every rank calls it with the same
 * chunks in the same order.  0 or an HVD_E_* code (with its message). */
typedef int (*hvd__staged_fn)(void *arg, void *host, size_t offset, size_t bytes);

typedef struct hvd__staging hvd__staging;

/* A pipeline with slots (>= 1) chunks of chunk_bytes (> 0) pinned host
 * memory, allocated now through copier (kept; not owned).  HVD_E_INVALID
 * for bad sizes, the copier's error when pinned memory or events fail. */
int hvd__staging_create(hvd__staging **out, const hvd__copier *copier, size_t chunk_bytes,
                        int slots);
void hvd__staging_destroy(hvd__staging *s);

/* Runs fn over dev_src's bytes (a multiple of elem_size; chunks are cut on
 * element boundaries) and leaves the results in dev_dst (may equal
 * dev_src).  Returns 0 once every result is on the device, or the first
 * error -- of a copy, of fn (prefixed with the chunk) or HVD_E_TIMEOUT past
 * deadline -- after the copies already queued have finished, so no copy
 * touches the pinned memory afterwards.  When even those do not finish by
 * the deadline, the pipeline is broken: later runs fail with HVD_E_ABORTED
 * and destroy leaves the pinned memory allocated rather than free memory
 * a copy may still write.  One run at a time per pipeline. */
int hvd__staging_run(hvd__staging *s, void *dev_dst, const void *dev_src, size_t bytes,
                     size_t elem_size, hvd__staged_fn fn, void *arg, uint64_t deadline);

#endif /* HVD_GPU_STAGING_H */
