/*
 * half.c -- float16 and bfloat16 <-> float32, by bit manipulation.
 *
 * Written by hand rather than with _Float16 so that every compiler and CPU
 * builds it and gets the same bits: results must be identical on every
 * rank of a job (float16 blocks use F16C where the CPU has it, which gives
 * these same bits; see below).  Narrowing rounds to nearest even, overflows to
 * infinity and produces subnormals; a NaN stays a NaN of the same sign,
 * made quiet, keeping the top bits of its payload.
 *
 * Layouts (sign, exponent, mantissa bits):
 *   float32  1, 8 (bias 127), 23
 *   float16  1, 5 (bias 15),  10
 *   bfloat16 1, 8 (bias 127), 7   -- the upper half of a float32
 *
 * The reduction kernels convert whole blocks, so each conversion computes
 * every case and picks one with masks instead of branching: the block
 * loops below then vectorise.  The scalar functions share the same code.
 */
#include <string.h>

#include "common.h"
#include "reduce.h"

/* Elements per inner loop of the block conversions: a fixed count the
 * compiler vectorises even at -O2. */
#define LANES 8

static inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* a if c (0 or 1) is 1, else b, without a branch. */
static inline uint32_t pick(uint32_t c, uint32_t a, uint32_t b) {
  uint32_t m = 0u - c;
  return (a & m) | (b & ~m);
}

static inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t em = h & 0x7fffu; /* exponent and mantissa */
  uint32_t man = h & 0x3ffu;

  /* Normal: rebias the exponent from 15 to 127. */
  uint32_t normal = (em << 13) + ((127 - 15) << 23);
  /* Inf and NaN: all-ones exponent; a NaN gets the quiet bit. */
  uint32_t special = (em << 13) | 0x7f800000u | (uint32_t)(man != 0) << 22;
  /* Subnormal man * 2^-24 is a normal float32.  Computing it in floating
   * point normalises it for us, exactly, in any rounding mode. */
  uint32_t sub = float_bits((float)(int32_t)man * 0x1p-24f);

  return bits_float(sign | pick(em >= 0x7c00, special, pick(em >= 0x400, normal, sub)));
}

static inline uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;

  /* NaN: quiet, the top of the payload kept. */
  uint32_t nan = 0x7e00 | ((x >> 13) & 0x3ff);
  /* Normal: rebias, then drop 13 bits rounding to nearest even (add just
   * under half, plus the kept lsb).  A carry out of the mantissa bumps the
   * exponent, as it should. */
  uint32_t y = x - ((127 - 15) << 23);
  uint32_t normal = (y + 0xfff + ((y >> 13) & 1)) >> 13;
  /* Subnormal: the result counts units of 2^-24.  Scaling by 2^24 is
   * exact; adding 2^23 leaves the count in the low mantissa bits, rounded
   * to nearest even by the FPU (in the default rounding mode, which the
   * float32 reductions assume too).  Values outside this range are zeroed
   * first so that the unused result cannot overflow or meet a signalling
   * NaN: a program that traps on FE_OVERFLOW or FE_INVALID must not trap
   * here. */
  uint32_t small = pick(x < 0x38800000, x, 0);
  uint32_t sub = float_bits(bits_float(small) * 0x1p24f + 0x1p23f) - 0x4b000000;

  uint32_t r = pick(x > 0x7f800000, nan,
                    pick(x >= 0x477ff000, 0x7c00, /* >= 65520, past 65504 by half an ulp */
                         pick(x >= 0x38800000, normal, sub))); /* >= 2^-14 */
  return (uint16_t)(sign | r);
}

static inline float bf16_to_float(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  return bits_float(x | (uint32_t)((x & 0x7fffffff) > 0x7f800000) << 22);
}

static inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  /* Round to nearest even on the low 16 bits; carries run into the
   * exponent and from the largest finite values into inf, as they should.
   * A NaN must not take this path: a payload only in the low half would
   * round to inf, and an all-ones one would carry into the sign. */
  uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
  uint32_t nan = (x >> 16) | 0x40;
  return (uint16_t)pick((x & 0x7fffffff) > 0x7f800000, nan, rounded);
}

float hvd__half_to_float(uint16_t h) { return half_to_float(h); }
uint16_t hvd__float_to_half(float f) { return float_to_half(f); }
float hvd__bf16_to_float(uint16_t b) { return bf16_to_float(b); }
uint16_t hvd__float_to_bf16(float f) { return float_to_bf16(f); }

#define CONVERT_N(scope, name, D, S, fn)                       \
  scope void name(D *dst, const S *src, size_t n) {            \
    for (; n >= LANES; n -= LANES, dst += LANES, src += LANES) \
      for (int i = 0; i < LANES; i++) dst[i] = fn(src[i]);     \
    for (size_t i = 0; i < n; i++) dst[i] = fn(src[i]);        \
  }

CONVERT_N(static, soft_half_to_float_n, float, uint16_t, half_to_float)
CONVERT_N(static, soft_float_to_half_n, uint16_t, float, float_to_half)
/* bfloat16 has no conversion instructions before AVX-512 BF16: the
 * branch-free loops above, vectorised for each instruction set. */
CONVERT_N(HVD_MULTIVERSION, hvd__bf16_to_float_n, float, uint16_t, bf16_to_float)
CONVERT_N(HVD_MULTIVERSION, hvd__float_to_bf16_n, uint16_t, float, float_to_bf16)

/*
 * float16 blocks through the CPU's F16C instructions where it has them,
 * chosen at run time (the build does not assume the CPU it runs on).  The
 * portable code above costs about 5 ns per element; F16C converts 8 per
 * instruction.  Both round to nearest even, make NaNs quiet keeping the
 * top of the payload, and produce subnormals: unit tests check every
 * 16-bit pattern and every rounding boundary against the scalar code, so
 * ranks on different CPUs still agree bit for bit.
 *
 * One difference is not in the bits: the instructions raise floating-point
 * exception flags (overflow for 65520.0f, invalid for a signalling NaN)
 * that the portable code never raises.  So the control and status word is
 * saved and restored around them (flags raised here are not the caller's),
 * and a program running with traps enabled gets the portable code.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define F16C_ATTR __attribute__((target("f16c,avx")))
#define MXCSR_MASKS 0x1f80u /* all exceptions masked: no traps */

static int use_f16c(void) {
  return __builtin_cpu_supports("f16c") && (_mm_getcsr() & MXCSR_MASKS) == MXCSR_MASKS;
}

F16C_ATTR static void f16c_half_to_float_n(float *dst, const uint16_t *src, size_t n) {
  unsigned csr = _mm_getcsr();
  for (; n >= 8; n -= 8, dst += 8, src += 8)
    _mm256_storeu_ps(dst, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)src)));
  _mm_setcsr(csr);
  soft_half_to_float_n(dst, src, n);
}

F16C_ATTR static void f16c_float_to_half_n(uint16_t *dst, const float *src, size_t n) {
  unsigned csr = _mm_getcsr();
  for (; n >= 8; n -= 8, dst += 8, src += 8)
    _mm_storeu_si128((__m128i *)dst,
                     _mm256_cvtps_ph(_mm256_loadu_ps(src), _MM_FROUND_TO_NEAREST_INT));
  _mm_setcsr(csr);
  soft_float_to_half_n(dst, src, n);
}

void hvd__half_to_float_n(float *dst, const uint16_t *src, size_t n) {
  if (use_f16c())
    f16c_half_to_float_n(dst, src, n);
  else
    soft_half_to_float_n(dst, src, n);
}

void hvd__float_to_half_n(uint16_t *dst, const float *src, size_t n) {
  if (use_f16c())
    f16c_float_to_half_n(dst, src, n);
  else
    soft_float_to_half_n(dst, src, n);
}
#else
void hvd__half_to_float_n(float *dst, const uint16_t *src, size_t n) {
  soft_half_to_float_n(dst, src, n);
}

void hvd__float_to_half_n(uint16_t *dst, const float *src, size_t n) {
  soft_float_to_half_n(dst, src, n);
}
#endif

int hvd_convert(const void *src, hvd_dtype src_dtype, void *dst, hvd_dtype dst_dtype,
                size_t count) {
  if (count > 0 && (!src || !dst))
    return hvd__err(HVD_E_INVALID, "convert: NULL buffer for %zu elements", count);
  if (src_dtype == dst_dtype && hvd__dtype_valid((int)src_dtype)) {
    if (count > 0) memcpy(dst, src, count * hvd_dtype_size(src_dtype));
    return HVD_OK;
  }
  if (src_dtype == HVD_FLOAT32 && dst_dtype == HVD_FLOAT16)
    hvd__float_to_half_n(dst, src, count);
  else if (src_dtype == HVD_FLOAT32 && dst_dtype == HVD_BFLOAT16)
    hvd__float_to_bf16_n(dst, src, count);
  else if (src_dtype == HVD_FLOAT16 && dst_dtype == HVD_FLOAT32)
    hvd__half_to_float_n(dst, src, count);
  else if (src_dtype == HVD_BFLOAT16 && dst_dtype == HVD_FLOAT32)
    hvd__bf16_to_float_n(dst, src, count);
  else
    return hvd__err(HVD_E_UNSUPPORTED, "convert: %s to %s is not supported "
                    "(float32 to and from float16 or bfloat16 only)",
                    hvd_dtype_name(src_dtype), hvd_dtype_name(dst_dtype));
  return HVD_OK;
}
