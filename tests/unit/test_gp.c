/*
 * test_gp.c -- the autotuner's Gaussian process and Bayesian optimisation
 * (engine/gp.c).
 *
 * The regression: with little noise it goes through its samples, with
 * little doubt there and more far from them; with noise it smooths.  The
 * optimisation: on a synthetic objective with a known maximum, measured
 * with noise, starting from four fixed points and adding what expected
 * improvement proposes, the best setting found after 20 samples is close
 * to the true one, in one and in two dimensions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/gp.h"

static hvd_gp g;

static void test_interpolates_its_samples(void **state) {
  (void)state;
  static const double xs[4][2] = {{0.1, 0.2}, {0.5, 0.5}, {0.9, 0.1}, {0.3, 0.8}};
  static const double ys[4] = {3, 7, 1, 5};
  hvd__gp_init(&g, 2, 1e-6);
  for (int i = 0; i < 4; i++) assert_int_equal(hvd__gp_add(&g, xs[i], ys[i]), 0);
  assert_int_equal(hvd__gp_fit(&g), 0);
  for (int i = 0; i < 4; i++) {
    double mu, sd;
    hvd__gp_predict(&g, xs[i], &mu, &sd);
    assert_true(fabs(mu - ys[i]) < 1e-3);
    assert_true(sd < 1e-2);
  }
  double far[2] = {1, 1}, mu, sd_far, sd_near;
  hvd__gp_predict(&g, far, &mu, &sd_far);
  double near[2] = {0.52, 0.5};
  hvd__gp_predict(&g, near, &mu, &sd_near);
  assert_true(sd_far > 10 * sd_near);
  /* noise: the same point measured twice, 2 and 4, is fitted near 3 */
  hvd__gp_init(&g, 1, 0.8);
  double a = 0.5;
  hvd__gp_add(&g, &a, 2);
  hvd__gp_add(&g, &a, 4);
  assert_int_equal(hvd__gp_fit(&g), 0);
  hvd__gp_predict(&g, &a, &mu, &sd_far);
  assert_true(fabs(mu - 3) < 0.01);
}

static void test_full_is_refused(void **state) {
  (void)state;
  double x = 0.5;
  hvd__gp_init(&g, 1, 0.1);
  for (int i = 0; i < HVD_GP_MAX_SAMPLES; i++) assert_int_equal(hvd__gp_add(&g, &x, i), 0);
  assert_int_equal(hvd__gp_add(&g, &x, 0), -1);
}

/* A deterministic noise in [-1, 1]. */
static double noise(int i) {
  uint32_t x = (uint32_t)i * 2654435761u;
  x ^= x >> 15, x *= 0x2c1b3c6du, x ^= x >> 12;
  return (double)x / 2147483648.0 - 1;
}

/* The objective: a peak of 10 at `peak`, measured with noise of 0.2. */
static double objective(const double *x, const double *peak, int d, int sample) {
  double r2 = 0;
  for (int k = 0; k < d; k++) r2 += (x[k] - peak[k]) * (x[k] - peak[k]);
  return 10 - 30 * r2 + 0.2 * noise(sample);
}

static double optimise(int d, const double *peak) {
  static const double start[4][2] = {{0.1, 0.9}, {0.6, 0.6}, {0.4, 0.3}, {0.2, 0.5}};
  hvd__gp_init(&g, d, 0.1);
  for (int i = 0; i < 20; i++) {
    double x[2];
    if (i < 4) {
      x[0] = start[i][0], x[1] = start[i][1];
    } else {
      assert_int_equal(hvd__gp_fit(&g), 0);
      hvd__gp_propose(&g, x);
    }
    assert_int_equal(hvd__gp_add(&g, x, objective(x, peak, d, i)), 0);
  }
  assert_int_equal(hvd__gp_fit(&g), 0);
  const double *best = g.x[hvd__gp_best_sample(&g)];
  double r2 = 0;
  for (int k = 0; k < d; k++) r2 += (best[k] - peak[k]) * (best[k] - peak[k]);
  printf("%dd: best sample %.3f %.3f, %.3f from the peak\n", d, best[0], d > 1 ? best[1] : 0,
         sqrt(r2));
  return sqrt(r2);
}

static void test_converges_on_a_synthetic_objective(void **state) {
  (void)state;
  static const double peak1[1] = {0.83}, peak2[2] = {0.7, 0.25}, corner[2] = {0.05, 0.95};
  assert_true(optimise(1, peak1) < 0.05);
  assert_true(optimise(2, peak2) < 0.1);
  assert_true(optimise(2, corner) < 0.1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_interpolates_its_samples),
      cmocka_unit_test(test_full_is_refused),
      cmocka_unit_test(test_converges_on_a_synthetic_objective),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
