/*
 * rng.h -- the unit tests' one seeded generator (splitmix64): a test
 * names its seed, so the same inputs come on every machine and every run
 * and a failure replays.  State is the caller's (a test's file-level
 * variable, or one per rank thread).
 */
#ifndef HVD_TESTS_UNIT_RNG_H
#define HVD_TESTS_UNIT_RNG_H

#include <stdint.h>

typedef struct {
  uint64_t state; /* the seed, to begin with; any value will do */
} rng;

/* The next 64 random bits. */
static inline uint64_t rng_next(rng *g) {
  uint64_t z = (g->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A float in [-1, 1), from 53 random bits. */
static inline float rng_uniform(rng *g) {
  return (float)((double)(rng_next(g) >> 11) / 9007199254740992.0 * 2 - 1);
}

#endif
