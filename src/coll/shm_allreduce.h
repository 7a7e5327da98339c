/*
 * shm_allreduce.h -- what the two ways of the shm allreduce share
 * (private to src/coll): through the windows (shm_allreduce.c), or
 * straight from the other ranks' buffers (shm_direct.c).  Both reduce
 * every element in rank order with hvd__shm_reduce, so they give the same
 * bits, and either may run for a given size.
 */
#ifndef HVD_SHM_ALLREDUCE_H
#define HVD_SHM_ALLREDUCE_H

#include "coll.h"

/* Bytes reduced at a time: a multiple of every element size, small
 * enough for L1. */
#define HVD_SHM_REDUCE_BLOCK HVD_SHM_WINDOW_MIN
/* The most ranks the shm allreduce runs on (a source pointer each on the
 * stack); hvd__shm_usable says no beyond. */
#define HVD_SHM_MAX_RANKS 256

typedef struct {
  hvd_comm *c;
  hvd_pieces all;
  hvd_dtype dtype;
  hvd_op op;
  size_t esize, total, chunk; /* bytes: the vector, a chunk */
  size_t block;               /* bytes reduced at a time (hvd__shm_reduce) */
  hvd_sync_stamp stamp;
  hvd_cursor in, out, mine; /* into windows, out of them, this rank's slice */
} hvd_shm_job;

/* acc = src[0] (op) src[1] (op) ... src[size-1] over n bytes (n <=
 * j->block): rank r's values at src[r], in rank order; AVERAGE divided,
 * half types summed in float32 and rounded once. */
void hvd__shm_reduce(hvd_shm_job *j, const void *const *src, size_t n, void *acc);

/* Through the windows, chunk by chunk, starting at window w0. */
int hvd__shm_pipeline(hvd_shm_job *j, uint64_t w0);

/* Straight from the other ranks' buffers (needs the transport's peer_read). */
int hvd__shm_direct(hvd_shm_job *j);

#endif /* HVD_SHM_ALLREDUCE_H */
