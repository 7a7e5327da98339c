/*
 * sampler.c -- the distributed sampler, with the rules of PyTorch's
 * torch.utils.data.DistributedSampler so that a Horovod user's data
 * sharding carries over unchanged:
 *
 *   - each epoch, one permutation of [0, n) drawn from (seed, epoch):
 *     every rank computes the same one, so the shards never overlap;
 *   - the permutation is padded by repeating its head up to a multiple of
 *     the number of replicas, so every rank runs the same number of steps
 *     (a rank with fewer batches would leave the others waiting);
 *   - rank r takes positions r, r + replicas, r + 2 * replicas, ...
 *
 * The permutation is a Fisher-Yates shuffle driven by SplitMix64 (PyTorch
 * uses its own generator, so the order differs; the rules do not).
 */
#include <stdlib.h>

#include "nn_int.h"

int hvd_nn_sampler_init(hvd_nn_sampler *s, int n, int replicas, int rank, uint64_t seed) {
  if (!s) return hvd_nn__err(HVD_E_INVALID, "sampler: NULL");
  *s = (hvd_nn_sampler){0};
  if (n < 1 || replicas < 1 || rank < 0 || rank >= replicas)
    return hvd_nn__err(HVD_E_INVALID, "sampler: %d samples over %d replicas at rank %d; "
                       "expected n >= 1 and 0 <= rank < replicas", n, replicas, rank);
  s->n = n;
  s->replicas = replicas;
  s->rank = rank;
  s->seed = seed;
  s->shuffle = 1;
  s->num_samples = (int)(((int64_t)n + replicas - 1) / replicas);
  s->indices = malloc((size_t)s->num_samples * sizeof *s->indices);
  if (!s->indices) return hvd_nn__err(HVD_E_NOMEM, "sampler: %d indices", s->num_samples);
  return hvd_nn_sampler_set_epoch(s, 0);
}

/* The epoch's permutation of [0, n), the same on every rank. */
static void permute(int *perm, int n, uint64_t seed, int64_t epoch, int shuffle) {
  for (int i = 0; i < n; i++) perm[i] = i;
  if (!shuffle) return;
  hvd_nn__rng rng;
  hvd_nn__rng_seed(&rng, seed ^ ((uint64_t)epoch * 0xD1B54A32D192ED03ULL));
  for (int i = n - 1; i > 0; i--) {
    int j = (int)hvd_nn__rng_below(&rng, (uint64_t)i + 1);
    int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

int hvd_nn_sampler_set_epoch(hvd_nn_sampler *s, int64_t epoch) {
  if (!s || !s->indices) return hvd_nn__err(HVD_E_INVALID, "sampler: not initialised");
  int *perm = malloc((size_t)s->n * sizeof *perm);
  if (!perm) return hvd_nn__err(HVD_E_NOMEM, "sampler: permutation of %d", s->n);
  permute(perm, s->n, s->seed, epoch, s->shuffle);
  /* Position p of the padded list is perm[p mod n]. */
  for (int k = 0; k < s->num_samples; k++) {
    int64_t p = (int64_t)k * s->replicas + s->rank;
    s->indices[k] = perm[p % s->n];
  }
  free(perm);
  return 0;
}

void hvd_nn_sampler_free(hvd_nn_sampler *s) {
  if (!s) return;
  free(s->indices);
  *s = (hvd_nn_sampler){0};
}
