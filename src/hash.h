/*
 * hash.h -- the one string hash the library's tables use (FNV-1a, 64-bit).
 *
 * Names are short and any spread will do; nothing on the wire or in an id
 * depends on the value, only lookups in this process.
 */
#ifndef HVD_HASH_H
#define HVD_HASH_H

#include <stdint.h>

static inline uint64_t hvd__hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

#endif /* HVD_HASH_H */
