/*
 * half_ref.h -- float16 and bfloat16 from their definitions, for tests.
 *
 * An independent reference for the library's conversions: values are
 * computed with ldexp/frexp and rounding with nearbyint (ties to even in
 * the default rounding mode), never with the bit tricks src/half.c uses.
 */
#ifndef HVD_TEST_HALF_REF_H
#define HVD_TEST_HALF_REF_H

#include <math.h>
#include <stdint.h>

/* A 16-bit binary format: float16 is {10, 5, 15}, bfloat16 {7, 8, 127}. */
struct half_fmt {
  int man_bits, exp_bits, bias;
};

static const struct half_fmt HALF_FMT = {10, 5, 15}, BF16_FMT = {7, 8, 127};

static inline int ref_exp_max(const struct half_fmt *f) { return (1 << f->exp_bits) - 1; }

/* The value of bit pattern h. */
static inline double ref_decode(const struct half_fmt *f, uint16_t h) {
  int e = (h >> f->man_bits) & ref_exp_max(f);
  int m = h & ((1 << f->man_bits) - 1);
  double v;
  if (e == ref_exp_max(f))
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m, 1 - f->bias - f->man_bits);
  else
    v = ldexp(m + (1 << f->man_bits), e - f->bias - f->man_bits);
  return (h & 0x8000) ? -v : v;
}

/* v rounded to nearest even, as a bit pattern; a NaN becomes the quiet
 * NaN of its sign. */
static inline uint16_t ref_encode(const struct half_fmt *f, double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  int e, emax = ref_exp_max(f);
  if (isnan(v)) return (uint16_t)(sign | emax << f->man_bits | 1 << (f->man_bits - 1));
  if (a != 0 && !isinf(a)) {
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    int lsb = e - 1 - f->man_bits;
    if (lsb < 1 - f->bias - f->man_bits) lsb = 1 - f->bias - f->man_bits;
    a = ldexp(nearbyint(ldexp(a, -lsb)), lsb);
  }
  if (a > ldexp(2 - ldexp(1, -f->man_bits), f->bias)) return (uint16_t)(sign | emax << f->man_bits);
  if (a < ldexp(1, 1 - f->bias)) return (uint16_t)(sign | (int)ldexp(a, f->bias - 1 + f->man_bits));
  double m = frexp(a, &e);
  return (uint16_t)(sign | (e - 1 + f->bias) << f->man_bits | (int)ldexp(2 * m - 1, f->man_bits));
}

#endif /* HVD_TEST_HALF_REF_H */
