/*
 * reference.h -- inputs and expected results of reductions, computed
 * independently of the library (shared by test_collectives.c and
 * test_algorithms.c).
 *
 * Each rank can generate every rank's input (gen() is a pure function of
 * dtype, op, seed, rank and index), so each rank computes the expected
 * result by folding all inputs in rank order, in plain scalar code that
 * shares nothing with the library.  Inputs are chosen so the exact result
 * does not depend on the order of reduction (small integers for float
 * sums, powers of two for float products, modular arithmetic for
 * integers): then the comparison is bitwise.
 *
 * Like testing.h's CHECK, it uses the program's `rank`, `size`, `checks`
 * and `failures`, which must be declared before it is included.
 */
#ifndef HVD_TESTS_MPI_REFERENCE_H
#define HVD_TESTS_MPI_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static const hvd_dtype all_dtypes[] = {HVD_UINT8,   HVD_INT8,     HVD_UINT16,  HVD_INT16,
                                       HVD_INT32,   HVD_INT64,    HVD_FLOAT16, HVD_BFLOAT16,
                                       HVD_FLOAT32, HVD_FLOAT64,  HVD_BOOL};
static const hvd_op all_ops[] = {HVD_SUM, HVD_AVERAGE, HVD_MIN, HVD_MAX, HVD_PRODUCT};

/* ---- deterministic inputs ---- */

static inline uint64_t rnd(uint64_t seed, int who, size_t i) {
  return mix(seed * 1000003u + (uint64_t)who * 7919u + mix(i));
}

static inline int is_float(hvd_dtype t) {
  return t == HVD_FLOAT16 || t == HVD_BFLOAT16 || t == HVD_FLOAT32 || t == HVD_FLOAT64;
}

static inline int is_signed(hvd_dtype t) {
  return t == HVD_INT8 || t == HVD_INT16 || t == HVD_INT32 || t == HVD_INT64;
}

/* A float input whose folds are exact in every float type: small integers
 * for sums, powers of two for products, quarters below 64 for min/max. */
static inline double float_value(hvd_op op, uint64_t r) {
  static const double pow2[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
  switch (op) {
    case HVD_PRODUCT: return pow2[r % 6];
    case HVD_MIN:
    case HVD_MAX: return (double)((int)(r % 511) - 255) / 4.0;
    default: return (double)((int)(r % 17) - 8);
  }
}

/* ---- reference conversions, written independently of the library ---- */

static inline uint16_t ref_half(double x) {
  half h = (half)(float)x;
  uint16_t b;
  memcpy(&b, &h, 2);
  return b;
}

/* Rounds x to 8 significant bits, ties to even, by scaling (not by bit
 * tricks), then takes the upper half of the float. */
static inline uint16_t ref_bf16(double x) {
  if (x != 0 && isfinite(x)) {
    int e;
    double m = frexp(x, &e); /* x = m * 2^e, 0.5 <= |m| < 1 */
    x = ldexp(nearbyint(ldexp(m, 8)), e - 8);
  }
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* ---- one element as a number ---- */

typedef struct {
  int64_t i; /* integers and bool, normalised to the type's range */
  double d;  /* floats */
} num;

static inline int64_t wrap(hvd_dtype t, uint64_t v) {
  size_t bits = hvd_dtype_size(t) * 8;
  if (bits < 64) v &= (1ull << bits) - 1;
  if (is_signed(t) && bits < 64 && (v >> (bits - 1)) & 1) v |= ~0ull << bits;
  return (int64_t)v;
}

static inline num gen(hvd_dtype t, hvd_op op, uint64_t seed, int who, size_t i) {
  uint64_t r = rnd(seed, who, i);
  num v = {0, 0};
  if (t == HVD_BOOL) {
    static const int64_t bytes[] = {0, 1, 2, 255};
    v.i = bytes[r % 4];
  } else if (is_float(t)) {
    v.d = float_value(op, r);
  } else {
    v.i = wrap(t, r);
  }
  return v;
}

static inline void store(hvd_dtype t, num v, void *p) {
  switch (t) {
    case HVD_FLOAT16: { uint16_t b = ref_half(v.d); memcpy(p, &b, 2); break; }
    case HVD_BFLOAT16: { uint16_t b = ref_bf16(v.d); memcpy(p, &b, 2); break; }
    case HVD_FLOAT32: { float f = (float)v.d; memcpy(p, &f, 4); break; }
    case HVD_FLOAT64: memcpy(p, &v.d, 8); break;
    default: { uint64_t u = (uint64_t)v.i; memcpy(p, &u, hvd_dtype_size(t)); break; } /* LE */
  }
}

static inline num fold(hvd_dtype t, hvd_op op, num a, num b) {
  num r = {0, 0};
  if (t == HVD_BOOL) {
    int x = a.i != 0, y = b.i != 0;
    r.i = (op == HVD_MIN || op == HVD_PRODUCT) ? (x && y) : (x || y);
  } else if (is_float(t)) {
    r.d = op == HVD_PRODUCT ? a.d * b.d
        : op == HVD_MIN     ? fmin(a.d, b.d)
        : op == HVD_MAX     ? fmax(a.d, b.d)
                            : a.d + b.d;
  } else {
    uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
    r.i = op == HVD_PRODUCT ? wrap(t, x * y)
        : op == HVD_MIN     ? (a.i < b.i ? a.i : b.i)
        : op == HVD_MAX     ? (a.i > b.i ? a.i : b.i)
                            : wrap(t, x + y);
    if (!is_signed(t) && (op == HVD_MIN || op == HVD_MAX)) /* compare as unsigned */
      r.i = (int64_t)(op == HVD_MIN ? (x < y ? x : y) : (x > y ? x : y));
  }
  return r;
}

/* The expected reduction of element i over all ranks. */
static inline num expected(hvd_dtype t, hvd_op op, uint64_t seed, size_t i) {
  num acc = gen(t, op, seed, 0, i);
  for (int q = 1; q < size; q++) acc = fold(t, op, acc, gen(t, op, seed, q, i));
  if (op == HVD_AVERAGE) {
    if (is_float(t)) acc.d /= size;
    else acc.i = acc.i / size; /* C: toward zero */
  }
  if (t == HVD_BOOL && size > 1) acc.i = acc.i != 0; /* one rank: a plain copy */
  return acc;
}

static inline void fill(hvd_dtype t, hvd_op op, uint64_t seed, int who, void *buf, size_t count) {
  size_t es = hvd_dtype_size(t);
  for (size_t i = 0; i < count; i++) store(t, gen(t, op, seed, who, i), (char *)buf + i * es);
}

/* Compares count elements at got (element offset `first`) with the reference. */
static inline void compare(const char *what, hvd_dtype t, hvd_op op, uint64_t seed,
                           const void *got, size_t first, size_t count) {
  size_t es = hvd_dtype_size(t), bad = 0, first_bad = 0;
  unsigned char want[8];
  for (size_t i = 0; i < count; i++) {
    store(t, expected(t, op, seed, first + i), want);
    if (memcmp(want, (const char *)got + i * es, es) != 0 && bad++ == 0) first_bad = first + i;
  }
  CHECK(bad == 0, "%s %s %s count %zu: %zu elements differ, first at %zu", what,
        hvd_dtype_name(t), hvd_op_name(op), count, bad, first_bad);
}

#endif /* HVD_TESTS_MPI_REFERENCE_H */
