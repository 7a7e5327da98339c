/*
 * rng.c -- SplitMix64 (Steele, Lea and Flood 2014), the generator behind
 * weight initialisation and the sampler's shuffles.  Its output depends
 * only on the seed, so every rank draws the same numbers.
 */
#include "nn_int.h"

void hvd_nn__rng_seed(hvd_nn__rng *r, uint64_t seed) { r->state = seed; }

uint64_t hvd_nn__rng_next(hvd_nn__rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

float hvd_nn__rng_float(hvd_nn__rng *r) {
  return (float)(hvd_nn__rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Rejection sampling: draws that fall in the short last stretch of the
 * 64-bit range would favour small values, so they are drawn again. */
uint64_t hvd_nn__rng_below(hvd_nn__rng *r, uint64_t bound) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = hvd_nn__rng_next(r);
  } while (x >= limit);
  return x % bound;
}
