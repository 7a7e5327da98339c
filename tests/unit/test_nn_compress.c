/*
 * test_nn_compress.c -- PowerSGD's and top-k's arithmetic (powersgd.c,
 * topk.c), on deterministic inputs.
 *
 *   - orthogonalisation leaves orthonormal columns (P^T P = I, in double);
 *   - at full rank (rank = min(rows, cols)) P Q^T reconstructs M, for tall
 *     and wide matrices, and the error left is ~0;
 *   - error feedback: the error is exactly M - approx, the next step's M is
 *     exactly grad + error, and over steps what was sent plus the last
 *     error adds up to the gradients given (nothing is lost);
 *   - the same seed gives the same Q, bit for bit; another seed does not;
 *   - top-k picks the k largest magnitudes (against a full sort), ties to
 *     the smaller index, NaN first; k from the ratio.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lossy.h"
#include "rng.h"

static rng gen = {0x9d2c5680ull};

static void fill(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = rng_uniform(&gen);
}

/* One whole PowerSGD step on one process (the allreduces are identities). */
static void psgd_step(hvd_nn__psgd *s, const float *grad, float *out) {
  hvd_nn__psgd_project(s, grad, 1.0f);
  hvd_nn__psgd_orthogonalize(s->p, s->rows, s->rank);
  hvd_nn__psgd_backproject(s);
  hvd_nn__psgd_decompress(s, out);
}

static void test_orthogonalize(void **state) {
  (void)state;
  enum { R = 9, K = 4 };
  float p[R * K];
  fill(p, R * K);
  hvd_nn__psgd_orthogonalize(p, R, K);
  for (int i = 0; i < K; i++)
    for (int j = 0; j < K; j++) {
      double dot = 0;
      for (int r = 0; r < R; r++) dot += (double)p[r * K + i] * p[r * K + j];
      assert_true(fabs(dot - (i == j)) < 1e-5);
    }
}

static void full_rank(int rows, int cols) {
  size_t n = (size_t)rows * (size_t)cols;
  float *g = malloc(n * sizeof *g), *out = malloc(n * sizeof *out);
  fill(g, n);
  hvd_nn__psgd s;
  assert_int_equal(hvd_nn__psgd_init(&s, rows, cols, 1000, 7), 0);
  assert_int_equal(s.rank, rows < cols ? rows : cols); /* clamped */
  psgd_step(&s, g, out);
  for (size_t i = 0; i < n; i++) {
    assert_true(fabsf(out[i] - g[i]) < 1e-4f);
    assert_true(fabsf(s.error[i]) < 1e-4f);
  }
  hvd_nn__psgd_free(&s);
  free(g);
  free(out);
}

static void test_full_rank_reconstructs(void **state) {
  (void)state;
  full_rank(12, 5); /* tall */
  full_rank(4, 11); /* wide */
  full_rank(6, 6);
}

static void test_full_rank_of_a_low_rank_matrix(void **state) {
  (void)state;
  /* M of rank 2 (a batch of two samples) at "full" rank 6: the four
   * columns of P that cancel must not bring noise back into P Q^T. */
  enum { R = 9, C = 6, N = R * C };
  float u[2][R], v[2][C], g[N], out[N];
  fill(u[0], R), fill(u[1], R), fill(v[0], C), fill(v[1], C);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) g[r * C + c] = u[0][r] * v[0][c] + u[1][r] * v[1][c];
  hvd_nn__psgd s;
  assert_int_equal(hvd_nn__psgd_init(&s, R, C, C, 21), 0);
  psgd_step(&s, g, out);
  for (int i = 0; i < N; i++) assert_true(fabsf(out[i] - g[i]) < 1e-4f);
  hvd_nn__psgd_free(&s);
}

static void test_low_rank_is_best_direction(void **state) {
  (void)state;
  /* M = u v^T exactly rank 1: rank-1 PowerSGD recovers it in one step. */
  enum { R = 7, C = 5 };
  float u[R], v[C], g[R * C], out[R * C];
  fill(u, R);
  fill(v, C);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) g[r * C + c] = u[r] * v[c];
  hvd_nn__psgd s;
  assert_int_equal(hvd_nn__psgd_init(&s, R, C, 1, 3), 0);
  psgd_step(&s, g, out);
  for (int i = 0; i < R * C; i++) assert_true(fabsf(out[i] - g[i]) < 1e-5f);
  hvd_nn__psgd_free(&s);
}

static void test_error_feedback(void **state) {
  (void)state;
  enum { R = 8, C = 6, STEPS = 5, N = R * C };
  float g[STEPS][N], out[N], prev_error[N];
  double given[N] = {0}, sent[N] = {0};
  hvd_nn__psgd s;
  assert_int_equal(hvd_nn__psgd_init(&s, R, C, 1, 11), 0);
  for (int t = 0; t < STEPS; t++) {
    fill(g[t], N);
    memcpy(prev_error, s.error, sizeof prev_error);
    psgd_step(&s, g[t], out);
    for (int i = 0; i < N; i++) {
      /* what was not sent is carried: M = grad + the last error, and the
       * error is what this step left of M */
      assert_true(s.m[i] == g[t][i] + prev_error[i]);
      assert_true(s.error[i] == s.m[i] - out[i]);
      given[i] += g[t][i];
      sent[i] += out[i];
    }
  }
  /* rank 1 of a random 8 x 6 matrix leaves a real residual ... */
  double resid = 0;
  for (int i = 0; i < N; i++) resid += fabs(s.error[i]);
  assert_true(resid > 0.1);
  /* ... and none of it is lost: sent + error = given */
  for (int i = 0; i < N; i++) assert_true(fabs(sent[i] + s.error[i] - given[i]) < 1e-4);
  hvd_nn__psgd_free(&s);
}

static void test_recovers_after_a_zero_gradient(void **state) {
  (void)state;
  /* A zero gradient makes Q = M^T P zero; warm-started from that, P would
   * stay zero and nothing would ever be sent again.  Q's dead columns are
   * drawn afresh, so full rank reconstructs again at once. */
  enum { R = 5, C = 4, N = R * C };
  float zero[N] = {0}, g[N], out[N];
  fill(g, N);
  hvd_nn__psgd s;
  assert_int_equal(hvd_nn__psgd_init(&s, R, C, C, 8), 0);
  psgd_step(&s, zero, out);
  for (int i = 0; i < N; i++) assert_true(out[i] == 0.0f);
  psgd_step(&s, g, out);
  for (int i = 0; i < N; i++) assert_true(fabsf(out[i] - g[i]) < 1e-4f);
  hvd_nn__psgd_free(&s);
}

static void test_same_seed_same_bits(void **state) {
  (void)state;
  enum { R = 10, C = 7, N = R * C };
  float g[N], out_a[N], out_b[N];
  fill(g, N);
  hvd_nn__psgd a, b, c;
  assert_int_equal(hvd_nn__psgd_init(&a, R, C, 2, 42), 0);
  assert_int_equal(hvd_nn__psgd_init(&b, R, C, 2, 42), 0);
  assert_int_equal(hvd_nn__psgd_init(&c, R, C, 2, 43), 0);
  assert_memory_equal(a.q, b.q, C * 2 * sizeof(float));
  assert_memory_not_equal(a.q, c.q, C * 2 * sizeof(float));
  for (int t = 0; t < 3; t++) {
    psgd_step(&a, g, out_a);
    psgd_step(&b, g, out_b);
    assert_memory_equal(out_a, out_b, sizeof out_a);
    assert_memory_equal(a.error, b.error, sizeof out_a);
  }
  hvd_nn__psgd_free(&a);
  hvd_nn__psgd_free(&b);
  hvd_nn__psgd_free(&c);
}

/* ---- top-k ---- */

static const float *ref_values;

static int ref_order(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  float mx = isnan(ref_values[x]) ? INFINITY : fabsf(ref_values[x]);
  float my = isnan(ref_values[y]) ? INFINITY : fabsf(ref_values[y]);
  if (mx != my) return mx > my ? -1 : 1;
  return (x > y) - (x < y);
}

static int ascending(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Against a full sort by (magnitude desc, index asc). */
static void check_topk(const float *v, size_t n, size_t k) {
  uint32_t *got = malloc(k * sizeof *got), *want = malloc(n * sizeof *want);
  for (size_t i = 0; i < n; i++) want[i] = (uint32_t)i;
  ref_values = v;
  qsort(want, n, sizeof *want, ref_order);
  qsort(want, k, sizeof *want, ascending);
  assert_int_equal(hvd_nn__topk_select(v, n, k, got), 0);
  assert_memory_equal(got, want, k * sizeof *got);
  free(got);
  free(want);
}

static void test_topk_largest(void **state) {
  (void)state;
  for (size_t n = 1; n <= 64; n += 7) {
    float *v = malloc(n * sizeof *v);
    fill(v, n);
    for (size_t k = 1; k <= n; k++) check_topk(v, n, k);
    free(v);
  }
  enum { BIG = 5000 };
  static float big[BIG];
  fill(big, BIG);
  check_topk(big, BIG, 50);
  check_topk(big, BIG, 2500);
}

static void test_topk_ties(void **state) {
  (void)state;
  /* all magnitudes equal: the smallest indices win */
  float same[10] = {1, -1, 1, -1, 1, -1, 1, -1, 1, -1};
  uint32_t idx[4];
  assert_int_equal(hvd_nn__topk_select(same, 10, 4, idx), 0);
  for (uint32_t i = 0; i < 4; i++) assert_int_equal(idx[i], i);
  /* many duplicates among distinct values, and a NaN that counts first */
  float dup[40];
  for (int i = 0; i < 40; i++) dup[i] = (float)((i * 7) % 5) * (i % 2 ? -1.0f : 1.0f);
  dup[33] = NAN;
  for (size_t k = 1; k <= 40; k++) check_topk(dup, 40, k);
  assert_int_equal(hvd_nn__topk_select(dup, 40, 1, idx), 0);
  assert_int_equal(idx[0], 33);
}

static void test_topk_count(void **state) {
  (void)state;
  assert_int_equal(hvd_nn__topk_count(1000, 0.01), 10);
  assert_int_equal(hvd_nn__topk_count(1001, 0.01), 11); /* rounds up */
  assert_int_equal(hvd_nn__topk_count(10, 1e-9), 1);    /* at least one */
  assert_int_equal(hvd_nn__topk_count(10, 1.0), 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_orthogonalize),
      cmocka_unit_test(test_full_rank_reconstructs),
      cmocka_unit_test(test_full_rank_of_a_low_rank_matrix),
      cmocka_unit_test(test_low_rank_is_best_direction),
      cmocka_unit_test(test_error_feedback),
      cmocka_unit_test(test_recovers_after_a_zero_gradient),
      cmocka_unit_test(test_same_seed_same_bits),
      cmocka_unit_test(test_topk_largest),
      cmocka_unit_test(test_topk_ties),
      cmocka_unit_test(test_topk_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
