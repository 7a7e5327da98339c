/*
 * test_reduce.c -- the reduction kernels (reduce.c) and dtype names (dtype.c).
 *
 * Every dtype x op runs on random arrays of several lengths, aligned and
 * not, in place and not, against a scalar reference written here without
 * reduce.c's tricks: integers are computed in 64 bits and truncated, floats
 * in double, and float16/bfloat16 are decoded from their definition and
 * rounded from double (test_half.c checks the same method against
 * _Float16).  Then the corner cases one by one: NaN and inf, wrap-around,
 * rounding of integer averages, bool bytes that are neither 0 nor 1,
 * Horovod's arithmetic for scale factors, and the errors of
 * hvd__reduce_check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half_ref.h"
#include "common.h"
#include "reduce.h"
#include "rng.h"

#define NDTYPES 11

static const size_t sizes[NDTYPES] = {1, 1, 2, 2, 4, 8, 2, 2, 4, 8, 1};

static rng gen = {0x2545f4914f6cdd1dull};

/* ---- element access by dtype ---- */

static int is_float(hvd_dtype dt) {
  return dt == HVD_FLOAT16 || dt == HVD_BFLOAT16 || dt == HVD_FLOAT32 || dt == HVD_FLOAT64;
}

static int is_signed(hvd_dtype dt) {
  return dt == HVD_INT8 || dt == HVD_INT16 || dt == HVD_INT32 || dt == HVD_INT64;
}

/* The raw bits of element i, zero-extended. */
static uint64_t get_bits(hvd_dtype dt, const unsigned char *p, size_t i) {
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (sizes[dt]) {
  case 1: memcpy(&u8, p + i, 1); return u8;
  case 2: memcpy(&u16, p + 2 * i, 2); return u16;
  case 4: memcpy(&u32, p + 4 * i, 4); return u32;
  default: memcpy(&u64, p + 8 * i, 8); return u64;
  }
}

static void put_bits(hvd_dtype dt, unsigned char *p, size_t i, uint64_t v) {
  uint8_t u8 = (uint8_t)v;
  uint16_t u16 = (uint16_t)v;
  uint32_t u32 = (uint32_t)v;
  switch (sizes[dt]) {
  case 1: memcpy(p + i, &u8, 1); break;
  case 2: memcpy(p + 2 * i, &u16, 2); break;
  case 4: memcpy(p + 4 * i, &u32, 4); break;
  default: memcpy(p + 8 * i, &v, 8); break;
  }
}

/* An integer element as int64, sign-extended for the signed types. */
static int64_t get_int(hvd_dtype dt, const unsigned char *p, size_t i) {
  uint64_t b = get_bits(dt, p, i);
  unsigned bits = (unsigned)sizes[dt] * 8;
  if (is_signed(dt) && bits < 64 && (b >> (bits - 1)))
    b |= ~(uint64_t)0 << bits;
  int64_t v;
  memcpy(&v, &b, sizeof v);
  return v;
}

static double get_float(hvd_dtype dt, const unsigned char *p, size_t i) {
  uint64_t b = get_bits(dt, p, i);
  float f;
  double d;
  switch (dt) {
  case HVD_FLOAT16: return ref_decode(&HALF_FMT, (uint16_t)b);
  case HVD_BFLOAT16: return ref_decode(&BF16_FMT, (uint16_t)b);
  case HVD_FLOAT32: memcpy(&f, p + 4 * i, 4); return f;
  default: memcpy(&d, &b, 8); return d;
  }
}

/* Stores v rounded once to dt. */
static void put_float(hvd_dtype dt, unsigned char *p, size_t i, double v) {
  float f = (float)v;
  switch (dt) {
  case HVD_FLOAT16: put_bits(dt, p, i, ref_encode(&HALF_FMT, v)); break;
  case HVD_BFLOAT16: put_bits(dt, p, i, ref_encode(&BF16_FMT, v)); break;
  case HVD_FLOAT32: memcpy(p + 4 * i, &f, 4); break;
  default: memcpy(p + 8 * i, &v, 8); break;
  }
}

/* ---- the reference ---- */

/* Integer a / d rounded toward zero, from magnitudes. */
static int64_t div_trunc(int64_t a, int d) {
  uint64_t mag = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
  uint64_t q = mag / (uint64_t)d;
  return a < 0 ? (int64_t)(0 - q) : (int64_t)q;
}

/* Element i of a (op) b into out; for floats sets *nan when the answer
 * is NaN (whose bits are not checked).  divisor > 0 also averages. */
static void ref_elem(hvd_dtype dt, hvd_op op, int divisor, const unsigned char *a,
                     const unsigned char *b, unsigned char *out, size_t i, int *nan) {
  *nan = 0;
  if (dt == HVD_BOOL) {
    int x = get_bits(dt, a, i) != 0, y = get_bits(dt, b, i) != 0;
    put_bits(dt, out, i, (op == HVD_SUM || op == HVD_MAX) ? (x || y) : (x && y));
  } else if (!is_float(dt)) {
    int64_t x = get_int(dt, a, i), y = get_int(dt, b, i);
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case HVD_AVERAGE: /* the wrapped sum, read back as dt, then divided */
      put_bits(dt, out, i, ux + uy);
      put_bits(dt, out, i, (uint64_t)div_trunc(get_int(dt, out, i), divisor));
      break;
    case HVD_SUM: put_bits(dt, out, i, ux + uy); break;
    case HVD_PRODUCT: put_bits(dt, out, i, ux * uy); break;
    case HVD_MIN: put_bits(dt, out, i, (uint64_t)(x < y ? x : y)); break;
    default: put_bits(dt, out, i, (uint64_t)(x > y ? x : y)); break;
    }
  } else {
    double x = get_float(dt, a, i), y = get_float(dt, b, i), r;
    /* One double operation is exact or rounds innocuously before the
     * final rounding to dt (53 >= 2 * 24 + 2), so this is what a float32
     * operation rounded once gives. */
    switch (op) {
    case HVD_SUM: case HVD_AVERAGE: r = x + y; break;
    case HVD_PRODUCT: r = x * y; break;
    default:
      if (isnan(x) || isnan(y)) {
        *nan = 1;
      } else { /* one of the operands, bits and all; ties keep x */
        int take_y = op == HVD_MIN ? y < x : y > x;
        put_bits(dt, out, i, get_bits(dt, take_y ? b : a, i));
      }
      return;
    }
    if (isnan(r)) {
      *nan = 1;
      return;
    }
    put_float(dt, out, i, r);
    if (op == HVD_AVERAGE) {
      r = get_float(dt, out, i) / divisor;
      put_float(dt, out, i, r);
    }
  }
}

/* Random elements of dt: raw bits, and for floats mostly values near 1
 * so that sums and products do more than saturate. */
static void fill(hvd_dtype dt, unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next(&gen);
    if (dt == HVD_BOOL && (r & 0x300) == 0) r = 0;
    if (is_float(dt) && (r & 3) != 0) {
      double v = ldexp((double)(r >> 40), -24 + (int)((r >> 8) % 17) - 8);
      put_float(dt, p, i, (r & 4) ? -v : v);
    } else {
      put_bits(dt, p, i, r >> 8);
    }
  }
}

/* Runs one dtype x op x length, with `inout` at byte offset io_off and
 * `in` at in_off (or in == inout when in_off < 0), against ref_elem. */
static void check_case(hvd_dtype dt, hvd_op op, size_t n, int io_off, int in_off, int divisor) {
  size_t bytes = n * sizes[dt];
  unsigned char *io = malloc(bytes + 16), *in = malloc(bytes + 16);
  unsigned char *want = malloc(bytes + 1), *orig = malloc(bytes + 1);
  assert_non_null(io);
  assert_non_null(in);
  assert_non_null(want);
  assert_non_null(orig);
  unsigned char *a = io + io_off, *b = in_off < 0 ? a : in + in_off;
  int *nan = malloc((n + 1) * sizeof *nan);
  assert_non_null(nan);

  fill(dt, a, n);
  if (b != a) fill(dt, b, n);
  memcpy(orig, a, bytes);
  for (size_t i = 0; i < n; i++)
    ref_elem(dt, op, divisor, orig, b == a ? orig : b, want, i, &nan[i]);

  hvd__reduce(a, b, n, dt, op);
  if (op == HVD_AVERAGE) hvd__reduce_average(a, n, dt, divisor);

  for (size_t i = 0; i < n; i++) {
    int ok = nan[i] ? isnan(get_float(dt, a, i)) : get_bits(dt, a, i) == get_bits(dt, want, i);
    if (!ok)
      fail_msg("%s %s n=%zu offsets %d/%d element %zu: %llx (op) %llx = %llx, want %llx%s",
               hvd_op_name(op), hvd_dtype_name(dt), n, io_off, in_off, i,
               (unsigned long long)get_bits(dt, orig, i),
               (unsigned long long)get_bits(dt, b == a ? orig : b, i),
               (unsigned long long)get_bits(dt, a, i),
               (unsigned long long)get_bits(dt, want, i), nan[i] ? " (NaN)" : "");
  }
  free(io);
  free(in);
  free(want);
  free(orig);
  free(nan);
}

static const hvd_op ops[] = {HVD_SUM, HVD_AVERAGE, HVD_MIN, HVD_MAX, HVD_PRODUCT};

static void test_all_dtypes_ops(void **state) {
  static const size_t lens[] = {0, 1, 7, 1000, 4099};
  static const int offs[][2] = {{0, 0}, {1, 3}, {3, 0}, {0, -1}, {1, -1}};
  static const int divisors[] = {1, 2, 3, 7, 1000};
  (void)state;
  for (int dt = 0; dt < NDTYPES; dt++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      if (dt == HVD_BOOL && ops[o] == HVD_AVERAGE) continue;
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++)
          check_case((hvd_dtype)dt, ops[o], lens[l], offs[k][0], offs[k][1],
                     divisors[(l + k) % (sizeof divisors / sizeof divisors[0])]);
    }
}

/* ---- corner cases ---- */

/* Reduces two float arrays given as doubles in dtype dt; returns element i. */
static double float_op(hvd_dtype dt, hvd_op op, double x, double y) {
  unsigned char a[9], b[9];
  put_float(dt, a, 0, x);
  put_float(dt, b + 1, 0, y);
  hvd__reduce(a, b + 1, 1, dt, op);
  return get_float(dt, a, 0);
}

static void test_nan_inf(void **state) {
  static const hvd_dtype fts[] = {HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64};
  (void)state;
  for (size_t k = 0; k < sizeof fts / sizeof fts[0]; k++) {
    hvd_dtype dt = fts[k];
    unsigned char nanv[8];
    memset(nanv, 0xff, sizeof nanv); /* all ones: a (negative) NaN in every format */
    double qnan = get_float(dt, nanv, 0);
    assert_true(isnan(qnan));
    for (size_t o = 0; o < 3; o++) {
      hvd_op op = (hvd_op[]){HVD_SUM, HVD_MIN, HVD_MAX}[o];
      assert_true(isnan(float_op(dt, op, qnan, 1.0)));
      assert_true(isnan(float_op(dt, op, 1.0, qnan)));
      assert_true(isnan(float_op(dt, op, qnan, qnan)));
      assert_true(isnan(float_op(dt, op, -INFINITY, qnan)));
      assert_true(isnan(float_op(dt, op, qnan, INFINITY)));
    }
    /* A NaN made by the operation itself. */
    unsigned char a[16], b[16];
    put_float(dt, a, 0, INFINITY);
    put_float(dt, b, 0, -INFINITY);
    hvd__reduce(a, b, 1, dt, HVD_SUM);
    assert_true(isnan(get_float(dt, a, 0)));

    assert_true(float_op(dt, HVD_SUM, INFINITY, 1.0) == INFINITY);
    assert_true(float_op(dt, HVD_SUM, -INFINITY, -INFINITY) == -INFINITY);
    assert_true(float_op(dt, HVD_MAX, INFINITY, 1.0) == INFINITY);
    assert_true(float_op(dt, HVD_MAX, -INFINITY, 1.0) == 1.0);
    assert_true(float_op(dt, HVD_MIN, -INFINITY, 1.0) == -INFINITY);
    assert_true(float_op(dt, HVD_MIN, 2.0, INFINITY) == 2.0);
    assert_true(float_op(dt, HVD_MIN, -3.0, 2.0) == -3.0);
    assert_true(float_op(dt, HVD_MAX, -3.0, 2.0) == 2.0);
    assert_true(float_op(dt, HVD_PRODUCT, INFINITY, -2.0) == -INFINITY);
    assert_true(signbit(float_op(dt, HVD_SUM, -0.0, -0.0)));
    assert_false(signbit(float_op(dt, HVD_SUM, -0.0, 0.0)));
    /* Equal operands keep inout's bits, so that a later SIMD kernel
     * (whose min/max instructions differ on this) must agree. */
    assert_true(signbit(float_op(dt, HVD_MIN, -0.0, 0.0)));
    assert_false(signbit(float_op(dt, HVD_MIN, 0.0, -0.0)));
    assert_true(signbit(float_op(dt, HVD_MAX, -0.0, 0.0)));
    assert_false(signbit(float_op(dt, HVD_MAX, 0.0, -0.0)));
  }
  /* Overflow of finite values to inf. */
  assert_true(float_op(HVD_FLOAT16, HVD_SUM, 65504, 65504) == INFINITY);
  assert_true(float_op(HVD_FLOAT16, HVD_SUM, 65504, 15) == 65504);
  assert_true(float_op(HVD_FLOAT16, HVD_SUM, 65504, 16) == INFINITY); /* tie: to "even" inf */
  assert_true(float_op(HVD_FLOAT16, HVD_PRODUCT, 256, -256) == -INFINITY);
  assert_true(float_op(HVD_BFLOAT16, HVD_SUM, 0x1.fcp127, 0x1.fcp127) == INFINITY);
  assert_true(float_op(HVD_FLOAT32, HVD_SUM, FLT_MAX, FLT_MAX) == INFINITY);
  assert_true(float_op(HVD_FLOAT64, HVD_SUM, DBL_MAX, DBL_MAX) == INFINITY);
  /* Half types round the float32 result once. */
  assert_true(float_op(HVD_FLOAT16, HVD_SUM, 2048, 1) == 2048);   /* tie: to even */
  assert_true(float_op(HVD_FLOAT16, HVD_SUM, 2048, 3) == 2052);   /* tie: to even */
  assert_true(float_op(HVD_BFLOAT16, HVD_SUM, 256, 1) == 256);
  assert_true(float_op(HVD_BFLOAT16, HVD_SUM, 256, 3) == 260);
}

static void test_int_wrap(void **state) {
  (void)state;
  int8_t i8[] = {INT8_MAX, INT8_MIN, -128, 100}, j8[] = {1, -1, -1, 3};
  hvd__reduce(i8, j8, 2, HVD_INT8, HVD_SUM);
  hvd__reduce(i8 + 2, j8 + 2, 2, HVD_INT8, HVD_PRODUCT);
  assert_int_equal(i8[0], INT8_MIN);
  assert_int_equal(i8[1], INT8_MAX);
  assert_int_equal(i8[2], -128); /* -128 * -1 wraps back */
  assert_int_equal(i8[3], 44);   /* 300 - 256 */

  uint8_t u8[] = {255, 16}, v8[] = {1, 16};
  hvd__reduce(u8, v8, 1, HVD_UINT8, HVD_SUM);
  hvd__reduce(u8 + 1, v8 + 1, 1, HVD_UINT8, HVD_PRODUCT);
  assert_int_equal(u8[0], 0);
  assert_int_equal(u8[1], 0);

  int16_t i16[] = {INT16_MAX, INT16_MIN}, j16[] = {1, INT16_MIN};
  hvd__reduce(i16, j16, 1, HVD_INT16, HVD_SUM);
  hvd__reduce(i16 + 1, j16 + 1, 1, HVD_INT16, HVD_PRODUCT);
  assert_int_equal(i16[0], INT16_MIN);
  assert_int_equal(i16[1], 0);

  uint16_t u16[] = {65535, 65535}, v16[] = {1, 65535}; /* would overflow int if promoted */
  hvd__reduce(u16, v16, 1, HVD_UINT16, HVD_SUM);
  hvd__reduce(u16 + 1, v16 + 1, 1, HVD_UINT16, HVD_PRODUCT);
  assert_int_equal(u16[0], 0);
  assert_int_equal(u16[1], 1);

  int32_t i32[] = {INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN}, j32[] = {1, -1, 2, -1};
  hvd__reduce(i32, j32, 2, HVD_INT32, HVD_SUM);
  hvd__reduce(i32 + 2, j32 + 2, 2, HVD_INT32, HVD_PRODUCT);
  assert_int_equal(i32[0], INT32_MIN);
  assert_int_equal(i32[1], INT32_MAX);
  assert_int_equal(i32[2], -2);
  assert_int_equal(i32[3], INT32_MIN);

  int64_t i64[] = {INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX}, j64[] = {1, -1, -1, INT64_MAX};
  hvd__reduce(i64, j64, 2, HVD_INT64, HVD_AVERAGE); /* accumulates like SUM */
  hvd__reduce(i64 + 2, j64 + 2, 2, HVD_INT64, HVD_PRODUCT);
  assert_true(i64[0] == INT64_MIN);
  assert_true(i64[1] == INT64_MAX);
  assert_true(i64[2] == INT64_MIN);
  assert_true(i64[3] == 1);
}

static void test_int_average(void **state) {
  (void)state;
  int32_t a[] = {-3, 3, -1, 0, INT32_MIN, 5}, b[] = {-4, 4, 0, -1, 0, 5};
  hvd__reduce(a, b, 6, HVD_INT32, HVD_AVERAGE);
  hvd__reduce_average(a, 6, HVD_INT32, 2);
  assert_int_equal(a[0], -3); /* -7 / 2 */
  assert_int_equal(a[1], 3);
  assert_int_equal(a[2], 0);  /* -1 / 2 */
  assert_int_equal(a[3], 0);
  assert_int_equal(a[4], INT32_MIN / 2);
  assert_int_equal(a[5], 5);

  int8_t c[] = {-128, -7, 127}, d[] = {0, 0, 0};
  hvd__reduce(c, d, 3, HVD_INT8, HVD_AVERAGE);
  hvd__reduce_average(c, 3, HVD_INT8, 3);
  assert_int_equal(c[0], -42);
  assert_int_equal(c[1], -2);
  assert_int_equal(c[2], 42);

  uint8_t u[] = {255, 7};
  hvd__reduce_average(u, 2, HVD_UINT8, 1000); /* divisor wider than the type */
  assert_int_equal(u[0], 0);
  assert_int_equal(u[1], 0);

  int64_t e[] = {INT64_MIN, -9, INT64_MAX};
  hvd__reduce_average(e, 3, HVD_INT64, 4);
  assert_true(e[0] == INT64_MIN / 4);
  assert_true(e[1] == -2);
  assert_true(e[2] == INT64_MAX / 4);

  int16_t s[] = {-7};
  hvd__reduce_average(s, 1, HVD_INT16, 1);
  assert_int_equal(s[0], -7);

  /* Floats divide exactly once: 1/3 of 3 is 1, 0.1f * 3 / 3 stays put. */
  float f[] = {3.0f, 0.3f};
  hvd__reduce_average(f, 2, HVD_FLOAT32, 3);
  assert_true(f[0] == 1.0f);
  assert_true(f[1] == 0.3f / 3);
  uint16_t h[] = {hvd__float_to_half(3.0f), hvd__float_to_half(-1.0f)};
  hvd__reduce_average(h, 2, HVD_FLOAT16, 3);
  assert_int_equal(h[0], 0x3c00);
  assert_int_equal(h[1], hvd__float_to_half(-1.0f / 3));
}

static void test_bool(void **state) {
  (void)state;
  static const uint8_t x[] = {0, 1, 2, 255, 0, 2, 128, 0}, y[] = {0, 0, 255, 2, 7, 0, 128, 1};
  static const uint8_t or_[] = {0, 1, 1, 1, 1, 1, 1, 1}, and_[] = {0, 0, 1, 1, 0, 0, 1, 0};
  static const hvd_op bops[] = {HVD_SUM, HVD_MAX, HVD_MIN, HVD_PRODUCT};
  for (size_t k = 0; k < 4; k++) {
    uint8_t a[sizeof x + 1];
    memcpy(a + 1, x, sizeof x);
    hvd__reduce(a + 1, y, sizeof x, HVD_BOOL, bops[k]);
    assert_memory_equal(a + 1, k < 2 ? or_ : and_, sizeof x);
    /* In place: true values come back as exactly 1. */
    memcpy(a, x, sizeof x);
    hvd__reduce(a, a, sizeof x, HVD_BOOL, bops[k]);
    for (size_t i = 0; i < sizeof x; i++) assert_int_equal(a[i], x[i] != 0);
  }
}

static void test_unaligned_wide(void **state) {
  (void)state;
  unsigned char a[8 * 5 + 1], b[8 * 5 + 3];
  double da[5] = {1, 2, 3, 4, 5}, db[5] = {10, 20, 30, 40, 50};
  memcpy(a + 1, da, sizeof da);
  memcpy(b + 3, db, sizeof db);
  hvd__reduce(a + 1, b + 3, 5, HVD_FLOAT64, HVD_SUM);
  memcpy(da, a + 1, sizeof da);
  for (int i = 0; i < 5; i++) assert_true(da[i] == 11.0 * (i + 1));

  int64_t ia[3] = {-5, 6, INT64_MAX}, ib[3] = {5, -7, 1};
  memcpy(a + 1, ia, sizeof ia);
  memcpy(b + 3, ib, sizeof ib);
  hvd__reduce(a + 1, b + 3, 3, HVD_INT64, HVD_MIN);
  memcpy(ia, a + 1, sizeof ia);
  assert_true(ia[0] == -5 && ia[1] == -7 && ia[2] == 1);
}

static void test_count_zero(void **state) {
  (void)state;
  unsigned char a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  for (int dt = 0; dt < NDTYPES; dt++) {
    hvd__reduce(a, b, 0, (hvd_dtype)dt, HVD_SUM);
    if (dt != HVD_BOOL) hvd__reduce_average(a, 0, (hvd_dtype)dt, 3);
  }
  assert_memory_equal(a, ((unsigned char[]){1, 2, 3, 4}), 4);
}

/* Scale factors as Horovod computes them: float32 in float with the factor
 * rounded to float first (which differs from a product taken in double and
 * rounded once for some elements: asserted, so the check means something),
 * float64 in double, integers in double and back toward zero. */
static void test_scale_rounding(void **state) {
  (void)state;
  enum { N = 257 };
  const double f = 0.1;
  float x[N];
  double d[N];
  int32_t k[N];
  size_t differ_from_double = 0;
  for (size_t i = 0; i < N; i++) {
    x[i] = (float)i * 1.37f - 91.0f;
    d[i] = (double)i * 1.37 - 91.0;
    k[i] = (int32_t)i - 128;
  }
  float want[N];
  for (size_t i = 0; i < N; i++) {
    want[i] = x[i] * (float)f;
    differ_from_double += want[i] != (float)((double)x[i] * f);
  }
  hvd__reduce_scale(x, N, HVD_FLOAT32, f);
  hvd__reduce_scale(d, N, HVD_FLOAT64, f);
  hvd__reduce_scale(k, N, HVD_INT32, f);
  assert_true(differ_from_double > 0);
  assert_memory_equal(x, want, sizeof want);
  for (size_t i = 0; i < N; i++) {
    assert_true(d[i] == ((double)i * 1.37 - 91.0) * f);
    assert_int_equal(k[i], (int32_t)(((double)i - 128) * f));
  }
}

/* ---- checks and names ---- */

static void expect_error(hvd_dtype dt, hvd_op op, int code, const char *w1, const char *w2) {
  hvd__err_clear();
  assert_int_equal(hvd__reduce_check(dt, op), code);
  const char *msg = hvd_last_error();
  if (!strstr(msg, w1) || !strstr(msg, w2))
    fail_msg("message \"%s\" should mention \"%s\" and \"%s\"", msg, w1, w2);
}

static void test_check(void **state) {
  (void)state;
  for (int dt = 0; dt < NDTYPES; dt++) {
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      if (dt == HVD_BOOL && ops[o] == HVD_AVERAGE) continue;
      assert_int_equal(hvd__reduce_check((hvd_dtype)dt, ops[o]), HVD_OK);
    }
    /* Adasum takes float16, float32 and float64 (coll/adasum.c), nothing else. */
    if (dt == HVD_FLOAT16 || dt == HVD_FLOAT32 || dt == HVD_FLOAT64)
      assert_int_equal(hvd__reduce_check((hvd_dtype)dt, HVD_ADASUM), HVD_OK);
    else
      expect_error((hvd_dtype)dt, HVD_ADASUM, HVD_E_UNSUPPORTED, "Adasum",
                   hvd_dtype_name((hvd_dtype)dt));
  }
  expect_error(HVD_BOOL, HVD_AVERAGE, HVD_E_UNSUPPORTED, "average", "bool");
  expect_error((hvd_dtype)99, HVD_SUM, HVD_E_INVALID, "dtype", "99");
  expect_error((hvd_dtype)-1, HVD_SUM, HVD_E_INVALID, "dtype", "-1");
  expect_error(HVD_FLOAT32, (hvd_op)-1, HVD_E_INVALID, "op", "-1");
  expect_error(HVD_FLOAT32, (hvd_op)6, HVD_E_INVALID, "op", "6");
}

static void test_names(void **state) {
  static const char *const dnames[NDTYPES] = {"uint8",   "int8",     "uint16",  "int16",
                                              "int32",   "int64",    "float16", "bfloat16",
                                              "float32", "float64",  "bool"};
  static const char *const onames[] = {"average", "sum", "adasum", "min", "max", "product"};
  (void)state;
  for (int dt = 0; dt < NDTYPES; dt++) {
    assert_int_equal(hvd_dtype_size((hvd_dtype)dt), sizes[dt]);
    assert_string_equal(hvd_dtype_name((hvd_dtype)dt), dnames[dt]);
    assert_true(hvd__dtype_valid(dt));
  }
  for (int op = 0; op < 6; op++) {
    assert_string_equal(hvd_op_name((hvd_op)op), onames[op]);
    assert_true(hvd__op_valid(op));
  }
  assert_int_equal(hvd_dtype_size(HVD_FLOAT64), 8);
  assert_int_equal(hvd_dtype_size(HVD_BFLOAT16), 2);
  static const int bad[] = {-1, 11, 99, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(hvd_dtype_size((hvd_dtype)bad[i]), 0);
    assert_string_equal(hvd_dtype_name((hvd_dtype)bad[i]), "unknown");
    assert_false(hvd__dtype_valid(bad[i]));
    if (bad[i] != 11) {
      assert_string_equal(hvd_op_name((hvd_op)bad[i]), "unknown");
      assert_false(hvd__op_valid(bad[i]));
    }
  }
  assert_string_equal(hvd_op_name((hvd_op)6), "unknown");
  assert_false(hvd__op_valid(6));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_dtypes_ops), cmocka_unit_test(test_nan_inf),
      cmocka_unit_test(test_int_wrap),       cmocka_unit_test(test_int_average),
      cmocka_unit_test(test_bool),           cmocka_unit_test(test_unaligned_wide),
      cmocka_unit_test(test_count_zero),     cmocka_unit_test(test_check),
      cmocka_unit_test(test_names),          cmocka_unit_test(test_scale_rounding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
