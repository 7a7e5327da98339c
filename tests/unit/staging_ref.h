/*
 * staging_ref.h -- the stand-in collective of the staging tests: a
 * byte-wise transform that depends on each byte's position in the whole
 * tensor, out[i] = in[i] * 3 + i (mod 256), so a chunk run at the wrong
 * offset, skipped, run twice or copied back to the wrong place shows in
 * the result; staging_ref_expect computes that result independently.
 */
#ifndef HVD_TEST_STAGING_REF_H
#define HVD_TEST_STAGING_REF_H

#include <stddef.h>

/* The transform on one chunk, in place (offset: its first byte's index). */
static void staging_ref_apply(unsigned char *p, size_t offset, size_t bytes) {
  for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(p[i] * 3 + offset + i);
}

/* A tensor's contents before (seeded) and after the transform. */
static void staging_ref_fill(unsigned char *in, unsigned char *want, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    in[i] = (unsigned char)(i * 131 + seed * 17 + (i >> 8));
    want[i] = (unsigned char)(in[i] * 3 + i);
  }
}

#endif /* HVD_TEST_STAGING_REF_H */
