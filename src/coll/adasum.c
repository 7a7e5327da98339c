/*
 * adasum.c -- Adasum (Maleki et al., 2020), Horovod's HVD_ADASUM.
 *
 * Two gradients a and b combine as
 *     adasum(a, b) = (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b
 * which adds orthogonal gradients and averages parallel ones.  Across n
 * ranks (a power of two) it is applied recursively: at level l each rank
 * pairs with rank ^ 2^l, the two exchange their vectors and both compute
 * adasum(lower rank's, higher rank's).  Both ends evaluate the same
 * expression on the same operands in the same order, so after log2(n)
 * levels every rank holds bitwise the same result.
 *
 * This is the simple recursive-doubling form: each level moves the whole
 * vector (log2(n) vectors in all); the vector-halving form that moves
 * about two vectors whatever n is comes with the speed work.  Dot products
 * accumulate in double; the combination rounds once per element (float16:
 * from double to float, then to float16).
 */
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "reduce.h"

typedef struct {
  double dot, aa, bb;
} dots;

/* LOAD turns an element into a double, STORE a double into an element. */
#define DOTS(name, T, LOAD, STORE)                                                    \
  static dots dots_##name(const T *a, const T *b, size_t n) {                         \
    dots d = {0, 0, 0};                                                               \
    for (size_t i = 0; i < n; i++) {                                                  \
      double x = LOAD(a[i]), y = LOAD(b[i]);                                          \
      d.dot += x * y;                                                                 \
      d.aa += x * x;                                                                  \
      d.bb += y * y;                                                                  \
    }                                                                                 \
    return d;                                                                         \
  }                                                                                   \
  static void combine_##name(T *out, const T *a, const T *b, size_t n, double ca,     \
                             double cb) {                                             \
    for (size_t i = 0; i < n; i++) out[i] = STORE(ca * LOAD(a[i]) + cb * LOAD(b[i])); \
  }

#define AS_DOUBLE(x) ((double)(x))
#define TO_FLOAT(v) ((float)(v))
#define TO_DOUBLE(v) (v)
/* float16 as Horovod's CPU Adasum takes it: computed from float values,
 * rounded to float16 once per element (through float). */
#define HALF_AS_DOUBLE(h) ((double)hvd__half_to_float(h))
#define TO_HALF(v) hvd__float_to_half((float)(v))

DOTS(float, float, AS_DOUBLE, TO_FLOAT)
DOTS(double, double, AS_DOUBLE, TO_DOUBLE)
DOTS(half, uint16_t, HALF_AS_DOUBLE, TO_HALF)

/* The coefficients of a and b; a zero vector simply yields the other. */
static void coefficients(dots d, double *ca, double *cb) {
  *ca = d.aa > 0 ? 1.0 - d.dot / (2.0 * d.aa) : 1.0;
  *cb = d.bb > 0 ? 1.0 - d.dot / (2.0 * d.bb) : 1.0;
}

/* out = adasum(a, b), over count elements of dtype (float16, float32 or
 * float64). */
static void adasum_pair(void *out, const void *a, const void *b, size_t count, hvd_dtype dtype) {
  double ca, cb;
  if (dtype == HVD_FLOAT32) {
    coefficients(dots_float(a, b, count), &ca, &cb);
    combine_float(out, a, b, count, ca, cb);
  } else if (dtype == HVD_FLOAT16) {
    coefficients(dots_half(a, b, count), &ca, &cb);
    combine_half(out, a, b, count, ca, cb);
  } else {
    coefficients(dots_double(a, b, count), &ca, &cb);
    combine_double(out, a, b, count, ca, cb);
  }
}

static int adasum_body(hvd_comm *c, uint32_t tag, void *buf, size_t count, hvd_dtype dtype) {
  size_t bytes = count * hvd_dtype_size(dtype);
  void *theirs = bytes ? malloc(bytes) : NULL;
  if (bytes && !theirs) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes for Adasum", bytes);
  int rc = 0;
  for (int d = 1; rc == 0 && d < c->size; d *= 2) {
    int peer = c->rank ^ d;
    rc = hvd__stream(c, tag, peer, buf, bytes, peer, theirs, bytes, NULL);
    if (rc < 0) break;
    /* Lower rank's vector first, on both ends: identical bits. */
    if (c->rank < peer) adasum_pair(buf, buf, theirs, count, dtype);
    else adasum_pair(buf, theirs, buf, count, dtype);
  }
  free(theirs);
  return rc;
}

int hvd__adasum_check(hvd_dtype dtype, int size) {
  if (dtype != HVD_FLOAT16 && dtype != HVD_FLOAT32 && dtype != HVD_FLOAT64)
    return hvd__err(HVD_E_UNSUPPORTED, "Adasum reduces float16, float32 and float64 tensors, "
                    "not %s", hvd_dtype_name(dtype));
  if (size < 1 || (size & (size - 1)) != 0)
    return hvd__err(HVD_E_UNSUPPORTED,
                    "Adasum needs a power-of-two number of ranks; this set has %d", size);
  return 0;
}

int hvd__adasum(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype) {
  uint32_t tag;
  HVD__CHECK(hvd__adasum_check(dtype, c->size));
  HVD__CHECK(hvd__comm_begin(c, &tag));
  int rc = adasum_body(c, tag, buf, count, dtype);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
