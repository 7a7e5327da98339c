/*
 * test_half.c -- float16 and bfloat16 conversions (half.c).
 *
 * The references here do not share code or method with half.c: values are
 * decoded from the format's definition with ldexp(), and rounding is done
 * on doubles with nearbyint() (round to nearest even in the default mode).
 * Where the compiler has _Float16, its conversions are a second reference.
 * Every one of the 65536 bit patterns is checked in both directions, and
 * float -> 16-bit rounding is checked at and around every rounding
 * boundary of both formats, plus random floats.  The block conversions
 * (_n) must give the scalar ones' bits exactly, for every length.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half_ref.h"
#include "reduce.h"
#include "rng.h"

#ifdef __FLT16_MAX__
__extension__ typedef _Float16 f16;
#define HAVE_F16 1
#else
#define HAVE_F16 0
#endif

/* A 16-bit format (half_ref.h) and hvd's conversions for it. */
struct fmt {
  struct half_fmt bits;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);
  void (*widen_n)(float *, const uint16_t *, size_t);
  void (*narrow_n)(uint16_t *, const float *, size_t);
};

static const struct fmt half = {{10, 5, 15}, hvd__half_to_float, hvd__float_to_half,
                                hvd__half_to_float_n, hvd__float_to_half_n};
static const struct fmt bf16 = {{7, 8, 127}, hvd__bf16_to_float, hvd__float_to_bf16,
                                hvd__bf16_to_float_n, hvd__float_to_bf16_n};

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static rng gen = {0x9e3779b97f4a7c15ull};

static int exp_max_field(const struct fmt *f) { return ref_exp_max(&f->bits); }

static int is_nan_bits(const struct fmt *f, uint16_t h) {
  return ((h >> f->bits.man_bits) & exp_max_field(f)) == exp_max_field(f) &&
         (h & ((1 << f->bits.man_bits) - 1)) != 0;
}

/* hvd's float -> format conversion against the references, NaNs included. */
static void check_narrow(const struct fmt *f, float x) {
  uint16_t got = f->narrow(x);
  if (isnan(x)) {
    if (!is_nan_bits(f, got) || !(got >> 15) != !signbit(x))
      fail_msg("%08x -> %04x: want a NaN of the same sign", fbits(x), got);
    return;
  }
  uint16_t want = ref_encode(&f->bits, x);
  if (got != want) fail_msg("%08x (%a) -> %04x, want %04x", fbits(x), (double)x, got, want);
#if HAVE_F16
  if (f == &half) {
    f16 r = (f16)x;
    uint16_t rb;
    memcpy(&rb, &r, sizeof rb);
    if (got != rb) fail_msg("%08x -> %04x, _Float16 gives %04x", fbits(x), got, rb);
  }
#endif
}

/* Every pattern widens to its value; NaNs widen quiet, sign and payload kept. */
static void check_widen_all(const struct fmt *f) {
  int shift = 23 - f->bits.man_bits;
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    float x = f->widen(h);
    double want = ref_decode(&f->bits, h);
    if (isnan(want)) {
      uint32_t man = (uint32_t)(h & ((1 << f->bits.man_bits) - 1));
      uint32_t quiet = (uint32_t)(h & 0x8000) << 16 | 0x7fc00000 | man << shift;
      if (fbits(x) != quiet) fail_msg("%04x -> %08x, want quiet NaN %08x", h, fbits(x), quiet);
      continue;
    }
    if ((double)x != want || !signbit(x) != !signbit(want))
      fail_msg("%04x -> %a, want %a", h, (double)x, want);
#if HAVE_F16
    if (f == &half) {
      f16 r;
      memcpy(&r, &h, sizeof r);
      if (fbits(x) != fbits((float)r))
        fail_msg("%04x -> %a, _Float16 gives %a", h, (double)x, (double)r);
    }
#endif
  }
}

/* narrow(widen(h)) == h, NaNs coming back quiet. */
static void check_round_trip_all(const struct fmt *f) {
  uint16_t quiet_bit = (uint16_t)(1 << (f->bits.man_bits - 1));
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    uint16_t want = is_nan_bits(f, h) ? (uint16_t)(h | quiet_bit) : h;
    uint16_t got = f->narrow(f->widen(h));
    if (got != want) fail_msg("%04x -> %04x, want %04x", h, got, want);
  }
}

/* Each representable value, the midpoint to the next one (a tie), and
 * the floats just either side of both, with both signs.  Past the largest
 * finite value the "next" is where infinity would be if the exponent
 * went on. */
static void check_boundaries(const struct fmt *f) {
  uint16_t inf = (uint16_t)(exp_max_field(f) << f->bits.man_bits);
  for (uint16_t h = 0; h < inf; h++) {
    double lo = ref_decode(&f->bits, h);
    double hi = h + 1 < inf ? ref_decode(&f->bits, (uint16_t)(h + 1)) : 2 * lo - ref_decode(&f->bits, (uint16_t)(h - 1));
    float mid = (float)((lo + hi) / 2); /* exact: one more bit than the format */
    float xs[] = {(float)lo, nextafterf((float)lo, INFINITY), nextafterf((float)lo, 0),
                  mid, nextafterf(mid, INFINITY), nextafterf(mid, 0)};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
      check_narrow(f, xs[i]);
      check_narrow(f, -xs[i]);
    }
  }
}

/* Random patterns over the whole float range, then ones whose exponent
 * falls near the format's range, where rounding has work to do. */
static void check_random(const struct fmt *f) {
  int lo = 127 - f->bits.bias - f->bits.man_bits - 2, hi = 127 + f->bits.bias + 2;
  if (lo < 0) lo = 0;
  if (hi > 255) hi = 255;
  for (int i = 0; i < 1000000; i++) {
    uint64_t r = rng_next(&gen);
    check_narrow(f, bitsf((uint32_t)r));
    uint32_t exp = (uint32_t)lo + (uint32_t)(r >> 32) % (uint32_t)(hi - lo + 1);
    check_narrow(f, bitsf((uint32_t)(r >> 63) << 31 | exp << 23 | ((uint32_t)r & 0x7fffff)));
  }
}

/* The block conversions, over pieces of every length up to 40 (so both
 * the vector loop and its tail run), against the scalar ones. */
static void check_blocks(const struct fmt *f) {
  enum { N = 65536 };
  uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
  float *x = malloc(N * sizeof *x);
  assert_non_null(h);
  assert_non_null(h2);
  assert_non_null(x);

  for (size_t i = 0; i < N; i++) h[i] = (uint16_t)i;
  for (size_t i = 0, len = 0; i < N; i += len, len = (len + 1) % 41)
    f->widen_n(x + i, h + i, i + len <= N ? len : N - i);
  for (size_t i = 0; i < N; i++)
    if (fbits(x[i]) != fbits(f->widen(h[i])))
      fail_msg("%04zx: block %08x, scalar %08x", i, fbits(x[i]), fbits(f->widen(h[i])));

  /* Floats around every 16-bit value, and random ones. */
  for (size_t i = 0; i < N; i++) {
    uint32_t r = (uint32_t)rng_next(&gen);
    x[i] = (i & 1) ? bitsf(r) : bitsf(fbits(f->widen((uint16_t)i)) + (r & 0xffff) - 0x8000);
  }
  for (size_t i = 0, len = 0; i < N; i += len, len = (len + 1) % 41)
    f->narrow_n(h2 + i, x + i, i + len <= N ? len : N - i);
  for (size_t i = 0; i < N; i++)
    if (h2[i] != f->narrow(x[i]))
      fail_msg("%08x: block %04x, scalar %04x", fbits(x[i]), h2[i], f->narrow(x[i]));
  free(h);
  free(h2);
  free(x);
}

static void test_half_blocks(void **state) {
  (void)state;
  check_blocks(&half);
}

static void test_bf16_blocks(void **state) {
  (void)state;
  check_blocks(&bf16);
}

static void test_half_widen_exhaustive(void **state) {
  (void)state;
  check_widen_all(&half);
}

static void test_half_round_trip_exhaustive(void **state) {
  (void)state;
  check_round_trip_all(&half);
}

static void test_half_boundaries(void **state) {
  (void)state;
  check_boundaries(&half);
}

static void test_half_random(void **state) {
  (void)state;
  check_random(&half);
}

static void test_half_edges(void **state) {
  (void)state;
  assert_int_equal(hvd__float_to_half(1.0f), 0x3c00);
  assert_int_equal(hvd__float_to_half(-2.0f), 0xc000);
  assert_int_equal(hvd__float_to_half(65504.0f), 0x7bff);  /* max finite */
  assert_int_equal(hvd__float_to_half(nextafterf(65520.0f, 0)), 0x7bff);
  assert_int_equal(hvd__float_to_half(65520.0f), 0x7c00);  /* tie: to inf */
  assert_int_equal(hvd__float_to_half(-1e10f), 0xfc00);
  assert_int_equal(hvd__float_to_half(FLT_MAX), 0x7c00);
  assert_int_equal(hvd__float_to_half(INFINITY), 0x7c00);
  assert_int_equal(hvd__float_to_half(-INFINITY), 0xfc00);
  assert_int_equal(hvd__float_to_half(0x1p-14f), 0x0400);  /* min normal */
  assert_int_equal(hvd__float_to_half(0x1.ffcp-15f), 0x0400);  /* tie up into normal */
  assert_int_equal(hvd__float_to_half(0x1p-24f), 0x0001);  /* min subnormal */
  assert_int_equal(hvd__float_to_half(0x1p-25f), 0x0000);  /* tie to even: 0 */
  assert_int_equal(hvd__float_to_half(nextafterf(0x1p-25f, 1)), 0x0001);
  assert_int_equal(hvd__float_to_half(0x1.8p-24f), 0x0002);  /* 1.5 units: to 2 */
  assert_int_equal(hvd__float_to_half(0x1.4p-23f), 0x0002);  /* 2.5 units: to 2 */
  assert_int_equal(hvd__float_to_half(1e-10f), 0x0000);  /* underflow */
  assert_int_equal(hvd__float_to_half(-1e-10f), 0x8000);
  assert_int_equal(hvd__float_to_half(FLT_TRUE_MIN), 0x0000);
  assert_int_equal(hvd__float_to_half(-0.0f), 0x8000);
  assert_int_equal(hvd__float_to_half(0.0f), 0x0000);
  assert_int_equal(hvd__float_to_half(1.0f + 0x1p-11f), 0x3c00);  /* tie to even */
  assert_int_equal(hvd__float_to_half(1.0f + 0x3p-11f), 0x3c02);  /* tie to even */
  assert_int_equal(hvd__float_to_half(bitsf(0x7fc00000)), 0x7e00);
  assert_int_equal(hvd__float_to_half(bitsf(0xffc00000)), 0xfe00);
  assert_int_equal(hvd__float_to_half(bitsf(0x7f800001)), 0x7e00);  /* sNaN: quiet */
  assert_int_equal(hvd__float_to_half(bitsf(0x7fa00000)), 0x7f00);  /* payload kept */
  assert_int_equal(fbits(hvd__half_to_float(0x0001)), fbits(0x1p-24f));
  assert_int_equal(fbits(hvd__half_to_float(0x03ff)), fbits(0x3ffp-24f));
  assert_int_equal(fbits(hvd__half_to_float(0x8000)), 0x80000000);
  assert_int_equal(fbits(hvd__half_to_float(0x7c01)), 0x7fc02000);  /* sNaN: quiet */
}

static void test_bf16_widen_exhaustive(void **state) {
  (void)state;
  check_widen_all(&bf16);
}

static void test_bf16_round_trip_exhaustive(void **state) {
  (void)state;
  check_round_trip_all(&bf16);
}

static void test_bf16_boundaries(void **state) {
  (void)state;
  check_boundaries(&bf16);
}

static void test_bf16_random(void **state) {
  (void)state;
  check_random(&bf16);
}

static void test_bf16_edges(void **state) {
  (void)state;
  assert_int_equal(hvd__float_to_bf16(1.0f), 0x3f80);
  assert_int_equal(hvd__float_to_bf16(bitsf(0x3f808000)), 0x3f80);  /* tie to even */
  assert_int_equal(hvd__float_to_bf16(bitsf(0x3f818000)), 0x3f82);  /* tie to even */
  assert_int_equal(hvd__float_to_bf16(bitsf(0x3f808001)), 0x3f81);
  assert_int_equal(hvd__float_to_bf16(bitsf(0x3f807fff)), 0x3f80);
  assert_int_equal(hvd__float_to_bf16(bitsf(0x7f7f7fff)), 0x7f7f);  /* max finite */
  assert_int_equal(hvd__float_to_bf16(bitsf(0x7f7f8000)), 0x7f80);  /* tie: to inf */
  assert_int_equal(hvd__float_to_bf16(FLT_MAX), 0x7f80);
  assert_int_equal(hvd__float_to_bf16(-FLT_MAX), 0xff80);
  assert_int_equal(hvd__float_to_bf16(INFINITY), 0x7f80);
  assert_int_equal(hvd__float_to_bf16(-INFINITY), 0xff80);
  assert_int_equal(hvd__float_to_bf16(-0.0f), 0x8000);
  assert_int_equal(hvd__float_to_bf16(FLT_TRUE_MIN), 0x0000);  /* underflow */
  assert_int_equal(hvd__float_to_bf16(bitsf(0x00008000)), 0x0000);  /* subnormal tie */
  assert_int_equal(hvd__float_to_bf16(bitsf(0x00018000)), 0x0002);
  assert_int_equal(hvd__float_to_bf16(bitsf(0x00008001)), 0x0001);
  /* NaNs whose payload lies only in the low half must stay NaN, not
   * round to inf; all-ones must not carry into the sign. */
  assert_int_equal(hvd__float_to_bf16(bitsf(0x7f800001)), 0x7fc0);
  assert_int_equal(hvd__float_to_bf16(bitsf(0xff800001)), 0xffc0);
  assert_int_equal(hvd__float_to_bf16(bitsf(0x7fffffff)), 0x7fff);
  assert_int_equal(hvd__float_to_bf16(bitsf(0xffffffff)), 0xffff);
  assert_int_equal(hvd__float_to_bf16(bitsf(0x7fc00000)), 0x7fc0);
  assert_int_equal(fbits(hvd__bf16_to_float(0x7f81)), 0x7fc10000);  /* sNaN: quiet */
  assert_int_equal(fbits(hvd__bf16_to_float(0x0001)), 0x00010000);  /* subnormal */
  assert_int_equal(fbits(hvd__bf16_to_float(0xc040)), fbits(-3.0f));
}

/* Programs hunting for NaNs run with floating-point traps on; a value
 * converted here must only trap if its own conversion is invalid, never
 * through a path computed and thrown away.  A trap kills the test. */
static void test_no_spurious_traps(void **state) {
  (void)state;
#if defined(__GLIBC__) && defined(FE_OVERFLOW) && defined(FE_INVALID)
  /* Large, infinite, signalling NaN, quiet NaN, tiny. */
  static const uint32_t xs[] = {0x7f7fffff, 0x7f800000, 0xff800000, 0x7f800001,
                                0xff800001, 0x7fc00000, 0x70000000, 0x00000001};
  enum { N = sizeof xs / sizeof xs[0] };
  float f[N], w[N];
  uint16_t h[N], b[N];
  for (size_t i = 0; i < N; i++) f[i] = bitsf(xs[i]);

  feclearexcept(FE_ALL_EXCEPT);
  int old = feenableexcept(FE_OVERFLOW | FE_INVALID | FE_DIVBYZERO);
  for (size_t i = 0; i < N; i++) {
    h[i] = hvd__float_to_half(f[i]);
    b[i] = hvd__float_to_bf16(f[i]);
    w[i] = hvd__half_to_float(h[i]);
    w[i] = hvd__bf16_to_float(b[i]);
  }
  hvd__float_to_half_n(h, f, N);
  hvd__float_to_bf16_n(b, f, N);
  hvd__half_to_float_n(w, h, N);
  hvd__bf16_to_float_n(w, b, N);
  w[0] = hvd__half_to_float(0x7c01); /* signalling NaNs */
  w[1] = hvd__bf16_to_float(0xff81);
  fedisableexcept(FE_ALL_EXCEPT);
  feenableexcept(old);
  assert_int_equal(h[0], 0x7c00);
  assert_int_equal(b[3], 0x7fc0);
#endif
}

/* hvd_convert, the public face of the block conversions: every pair it
 * takes gives the scalar conversions' bits; other pairs are refused. */
static void test_convert(void **state) {
  (void)state;
  enum { N = 1000 };
  float x[N], back[N];
  uint16_t h[N];
  for (int i = 0; i < N; i++) x[i] = bitsf((uint32_t)rng_next(&gen));
  assert_int_equal(hvd_convert(x, HVD_FLOAT32, h, HVD_FLOAT16, N), HVD_OK);
  assert_int_equal(hvd_convert(h, HVD_FLOAT16, back, HVD_FLOAT32, N), HVD_OK);
  for (int i = 0; i < N; i++) {
    assert_int_equal(h[i], hvd__float_to_half(x[i]));
    assert_int_equal(fbits(back[i]), fbits(hvd__half_to_float(h[i])));
  }
  assert_int_equal(hvd_convert(x, HVD_FLOAT32, h, HVD_BFLOAT16, N), HVD_OK);
  assert_int_equal(hvd_convert(h, HVD_BFLOAT16, back, HVD_FLOAT32, N), HVD_OK);
  for (int i = 0; i < N; i++) {
    assert_int_equal(h[i], hvd__float_to_bf16(x[i]));
    assert_int_equal(fbits(back[i]), fbits(hvd__bf16_to_float(h[i])));
  }
  assert_int_equal(hvd_convert(x, HVD_FLOAT32, back, HVD_FLOAT32, N), HVD_OK);
  assert_memory_equal(x, back, sizeof x);
  assert_int_equal(hvd_convert(x, HVD_FLOAT64, h, HVD_FLOAT16, 1), HVD_E_UNSUPPORTED);
  assert_non_null(strstr(hvd_last_error(), "float64 to float16"));
  assert_int_equal(hvd_convert(NULL, HVD_FLOAT32, h, HVD_FLOAT16, 1), HVD_E_INVALID);
  assert_int_equal(hvd_convert(NULL, HVD_FLOAT32, NULL, HVD_FLOAT16, 0), HVD_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_widen_exhaustive),
      cmocka_unit_test(test_half_round_trip_exhaustive),
      cmocka_unit_test(test_half_boundaries),
      cmocka_unit_test(test_half_random),
      cmocka_unit_test(test_half_edges),
      cmocka_unit_test(test_half_blocks),
      cmocka_unit_test(test_bf16_widen_exhaustive),
      cmocka_unit_test(test_bf16_round_trip_exhaustive),
      cmocka_unit_test(test_bf16_boundaries),
      cmocka_unit_test(test_bf16_random),
      cmocka_unit_test(test_bf16_edges),
      cmocka_unit_test(test_bf16_blocks),
      cmocka_unit_test(test_no_spurious_traps),
      cmocka_unit_test(test_convert),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
