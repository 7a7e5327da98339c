/*
 * shm_allreduce.h -- what the ways of the shm allreduce share (private to
 * src/coll): shm_allreduce.c chooses one and runs the small ones; large
 * vectors go through the windows (shm_pipeline.c), or straight from the
 * other ranks' buffers (shm_direct.c).  All reduce every element in rank
 * order with hvd__shm_reduce, so they give the same bits, and any may run
 * for a given size.
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

/* Bytes reduced at a time for dtype: half types widen a block to float32
 * in HVD_SHM_REDUCE_BLOCK bytes. */
static inline size_t hvd__shm_block(hvd_dtype dtype) {
  int half = dtype == HVD_FLOAT16 || dtype == HVD_BFLOAT16;
  return half ? HVD_SHM_REDUCE_BLOCK / 2 : HVD_SHM_REDUCE_BLOCK;
}

typedef struct {
  hvd_comm *c;
  hvd_pieces all;
  hvd_dtype dtype;
  hvd_op op;
  size_t esize, total, chunk; /* bytes: the vector, a chunk */
  size_t block;               /* bytes reduced at a time (hvd__shm_block) */
  hvd_sync_stamp stamp;
  hvd_cursor in, out, mine; /* into windows, out of them, this rank's slice */
} hvd_shm_job;

/* acc = src[0] (op) src[1] (op) ... src[size-1] over n bytes (n <=
 * j->block): rank r's values at src[r], in rank order; AVERAGE divided,
 * half types summed in float32 and rounded once. */
void hvd__shm_reduce(hvd_shm_job *j, const void *const *src, size_t n, void *acc);

/* hvd__shm_reduce of bytes [off, off + n) of every rank's window w, this
 * rank's own values taken from own where not NULL (shm_pipeline.c). */
void hvd__shm_reduce_window(hvd_shm_job *j, uint64_t w, size_t off, size_t n, const void *own,
                            void *acc);

/* Through the windows, chunk by chunk (shm_pipeline.c). */
int hvd__shm_pipeline(hvd_shm_job *j);

/* Straight from the other ranks' buffers (needs the transport's peer_read). */
int hvd__shm_direct(hvd_shm_job *j);

#endif /* HVD_SHM_ALLREDUCE_H */
