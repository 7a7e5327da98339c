/*
 * gathered.c -- an allreduce finished locally, from every rank's vector
 * already in hand (the engine's fast path carries small tensors in its
 * exchange: engine/rider.c).
 *
 * The point is the bits: a tensor must come out exactly as the algorithm
 * that would otherwise reduce it leaves it, so the same tensor never
 * depends on which way it went.  Two algorithms run at the sizes this
 * serves, and each has a fixed order of combination that needs no
 * network to reproduce:
 *
 *   shm                  rank 0's value, then rank 1's, ... (shm_pipeline.c,
 *                        the same function: hvd__shm_reduce)
 *   recursive doubling   the extra ranks folded into the first n - p, then
 *                        a balanced tree over ranks 0..p-1, the lower
 *                        rank's operand on the left (recursive_doubling.c)
 */
#include <string.h>

#include "reduce.h"
#include "shm_allreduce.h"

static void rank_order(hvd_comm *c, void *const *vecs, size_t count, hvd_dtype dtype, hvd_op op,
                       void *out) {
  size_t esize = hvd_dtype_size(dtype), bytes = count * esize;
  hvd_shm_job j = {.c = c, .dtype = dtype, .op = op, .esize = esize,
                   .block = hvd__shm_block(dtype)};
  const void *src[HVD_SHM_MAX_RANKS];
  for (size_t b = 0; b < bytes; b += j.block) {
    size_t n = bytes - b < j.block ? bytes - b : j.block;
    for (int r = 0; r < c->size; r++) src[r] = (const char *)vecs[r] + b;
    hvd__shm_reduce(&j, src, n, (char *)out + b);
  }
}

static void tree(const hvd_comm *c, void *const *vecs, size_t count, hvd_dtype dtype, hvd_op op,
                 void *out) {
  int n = c->size, p = hvd__pow2_floor(n);
  for (int r = 0; r + p < n; r++) hvd__reduce(vecs[r], vecs[r + p], count, dtype, op);
  for (int mask = 1; mask < p; mask <<= 1)
    for (int r = 0; r < p; r += 2 * mask) hvd__reduce(vecs[r], vecs[r + mask], count, dtype, op);
  if (op == HVD_AVERAGE) hvd__reduce_average(vecs[0], count, dtype, n);
  memcpy(out, vecs[0], count * hvd_dtype_size(dtype));
}

int hvd__reduce_gathered(hvd_comm *c, hvd_ar_algo algo, void *const *vecs, size_t count,
                         hvd_dtype dtype, hvd_op op, void *out) {
  if (algo == HVD_AR_SHM && c->size <= HVD_SHM_MAX_RANKS) {
    rank_order(c, vecs, count, dtype, op, out);
    return 0;
  }
  if (algo == HVD_AR_RECURSIVE_DOUBLING) {
    tree(c, vecs, count, dtype, op, out);
    return 0;
  }
  return hvd__err(HVD_E_UNSUPPORTED, "reducing gathered vectors as %s",
                  hvd__allreduce_algo_name(algo));
}
