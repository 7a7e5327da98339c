/*
 * test_nn_optim.c -- SGD and Adam (sgd.c, adam.c, optimizer.c).
 *
 * Several steps with fresh random gradients each, against the update
 * rules of torch.optim.SGD and torch.optim.Adam written out here in
 * double.  Then the state as broadcasts and checkpoints see it: slot
 * names and sizes, the step count, the hyper-parameters, and that writing
 * them (as a broadcast does) changes the next step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd_nn.h"
#include "rng.h"

static rng gen = {0x51ed2705ull};

/* A dense 5 -> 3 model: "0.dense.weight" (15) and "0.dense.bias" (3). */
enum { NP = 2, TOTAL = 18 };

static hvd_nn_model *model(void) {
  hvd_nn_model *m = hvd_nn_model_new(1, 1, 5);
  assert_non_null(m);
  assert_int_equal(hvd_nn_add_dense(m, 3), 0);
  assert_int_equal(hvd_nn_model_init(m, 3), 0);
  return m;
}

/* The parameters as one vector: p[k] for k in [0, TOTAL). */
static float *value_at(hvd_nn_model *m, int k) {
  hvd_nn_param *w = hvd_nn_param_at(m, 0), *b = hvd_nn_param_at(m, 1);
  return k < (int)w->count ? &w->value[k] : &b->value[k - w->count];
}

static float *grad_at(hvd_nn_model *m, int k) {
  hvd_nn_param *w = hvd_nn_param_at(m, 0), *b = hvd_nn_param_at(m, 1);
  return k < (int)w->count ? &w->grad[k] : &b->grad[k - w->count];
}

/* New random gradients, also returned in g. */
static void new_grads(hvd_nn_model *m, double *g) {
  for (int k = 0; k < TOTAL; k++) g[k] = *grad_at(m, k) = rng_uniform(&gen);
}

static void expect_values(hvd_nn_model *m, const double *want, double tol) {
  for (int k = 0; k < TOTAL; k++) {
    double got = *value_at(m, k);
    if (fabs(got - want[k]) > tol * (1 + fabs(want[k])))
      fail_msg("parameter %d: got %.9g, want %.9g", k, got, want[k]);
  }
}

static void start(hvd_nn_model *m, double *w) {
  for (int k = 0; k < TOTAL; k++) w[k] = *value_at(m, k);
}

/* torch.optim.SGD, dampening 0, no Nesterov: buf = g' on the first step. */
static void ref_sgd(double *w, double *buf, const double *g, int first, double lr, double mom,
                    double wd) {
  for (int k = 0; k < TOTAL; k++) {
    double d = g[k] + wd * w[k];
    if (mom != 0) d = buf[k] = first ? d : mom * buf[k] + d;
    w[k] -= lr * d;
  }
}

static void test_sgd_momentum(void **state) {
  (void)state;
  hvd_nn_model *m = model();
  hvd_nn_optimizer *o = hvd_nn_sgd_new(m, 0.1f, 0.9f, 0.01f);
  assert_non_null(o);
  assert_ptr_equal(hvd_nn_optimizer_model(o), m);
  double w[TOTAL], buf[TOTAL], g[TOTAL];
  start(m, w);
  for (int t = 0; t < 6; t++) {
    new_grads(m, g);
    assert_int_equal(hvd_nn_optimizer_step(o), 0);
    ref_sgd(w, buf, g, t == 0, 0.1, (double)0.9f, (double)0.01f);
    expect_values(m, w, 1e-5);
  }
  assert_int_equal(*hvd_nn_optimizer_steps(o), 6);

  /* A broadcast overwrites the hyper-parameters: the next step uses them. */
  double *h = hvd_nn_optimizer_hypers(o);
  h[1] = 0.5;
  h[2] = 0;
  new_grads(m, g);
  assert_int_equal(hvd_nn_optimizer_step(o), 0);
  ref_sgd(w, buf, g, 0, 0.1, 0.5, 0);
  expect_values(m, w, 1e-5);

  hvd_nn_optimizer_set_lr(o, 0.25f);
  assert_true(hvd_nn_optimizer_lr(o) == 0.25f);
  assert_true(h[0] == 0.25);
  new_grads(m, g);
  assert_int_equal(hvd_nn_optimizer_step(o), 0);
  ref_sgd(w, buf, g, 0, 0.25, 0.5, 0);
  expect_values(m, w, 1e-5);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

static void test_sgd_plain(void **state) {
  (void)state;
  hvd_nn_model *m = model();
  hvd_nn_optimizer *o = hvd_nn_sgd_new(m, 0.05f, 0.0f, 0.1f);
  assert_non_null(o);
  assert_int_equal(hvd_nn_optimizer_num_slots(o), 0); /* no momentum, no buffers */
  assert_null(hvd_nn_optimizer_slot(o, 0, NULL, NULL));
  double w[TOTAL], g[TOTAL];
  start(m, w);
  for (int t = 0; t < 3; t++) {
    new_grads(m, g);
    assert_int_equal(hvd_nn_optimizer_step(o), 0);
    ref_sgd(w, NULL, g, t == 0, (double)0.05f, 0, (double)0.1f);
    expect_values(m, w, 1e-6);
  }
  /* lr 0 leaves the weights alone */
  hvd_nn_optimizer_set_lr(o, 0.0f);
  float before[TOTAL];
  for (int k = 0; k < TOTAL; k++) before[k] = *value_at(m, k);
  assert_int_equal(hvd_nn_optimizer_step(o), 0);
  for (int k = 0; k < TOTAL; k++) assert_true(*value_at(m, k) == before[k]);
  /* Momentum cannot be switched on without buffers to keep it in. */
  hvd_nn_optimizer_hypers(o)[1] = 0.9;
  assert_int_equal(hvd_nn_optimizer_step(o), HVD_E_INVALID);
  assert_non_null(strstr(hvd_nn_last_error(), "momentum"));
  assert_int_equal(*hvd_nn_optimizer_steps(o), 4);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

/* torch.optim.Adam: t counts from 1. */
static void ref_adam(double *w, double *m1, double *m2, const double *g, int64_t t, double lr,
                     double b1, double b2, double eps) {
  for (int k = 0; k < TOTAL; k++) {
    m1[k] = b1 * m1[k] + (1 - b1) * g[k];
    m2[k] = b2 * m2[k] + (1 - b2) * g[k] * g[k];
    double mhat = m1[k] / (1 - pow(b1, (double)t)), vhat = m2[k] / (1 - pow(b2, (double)t));
    w[k] -= lr * mhat / (sqrt(vhat) + eps);
  }
}

/* Adam with these hyper-parameters, 8 steps against ref_adam. */
static void run_adam(hvd_nn_model *m, hvd_nn_optimizer *o, double *w, double *m1, double *m2) {
  const double *h = hvd_nn_optimizer_hypers(o);
  double g[TOTAL];
  start(m, w);
  for (int t = 1; t <= 8; t++) {
    new_grads(m, g);
    if (t == 5) /* a zero gradient: eps keeps 0 / 0 away */
      for (int k = 0; k < TOTAL; k++) g[k] = *grad_at(m, k) = 0.0f;
    assert_int_equal(hvd_nn_optimizer_step(o), 0);
    ref_adam(w, m1, m2, g, t, h[0], h[1], h[2], h[3]);
    expect_values(m, w, 1e-5);
  }
}

static void test_adam(void **state) {
  (void)state;
  hvd_nn_model *m = model();
  double w[TOTAL], m1[TOTAL] = {0}, m2[TOTAL] = {0}, g[TOTAL];
  /* A large eps, where it matters whether it is added inside the root. */
  hvd_nn_optimizer *o = hvd_nn_adam_new(m, 0.1f, 0.8f, 0.99f, 0.05f);
  assert_non_null(o);
  run_adam(m, o, w, m1, m2);
  hvd_nn_optimizer_free(o);

  memset(m1, 0, sizeof m1);
  memset(m2, 0, sizeof m2);
  const double lr = (double)0.01f, b1 = (double)0.9f, b2 = (double)0.999f, eps = (double)1e-8f;
  o = hvd_nn_adam_new(m, 0.01f, 0.9f, 0.999f, 1e-8f);
  assert_non_null(o);
  run_adam(m, o, w, m1, m2);
  /* The step count, as a resumed run sets it, drives the bias correction. */
  *hvd_nn_optimizer_steps(o) = 100;
  new_grads(m, g);
  assert_int_equal(hvd_nn_optimizer_step(o), 0);
  ref_adam(w, m1, m2, g, 101, lr, b1, b2, eps);
  expect_values(m, w, 1e-5);
  assert_int_equal(*hvd_nn_optimizer_steps(o), 101);

  /* The slots hold m and v. */
  size_t count;
  const char *name;
  float *avg = hvd_nn_optimizer_slot(o, 0, &count, &name);
  float *avg_sq = hvd_nn_optimizer_slot(o, 1, NULL, NULL);
  assert_int_equal(count, 15);
  for (int k = 0; k < 15; k++) {
    assert_true(fabs(avg[k] - m1[k]) < 1e-5);
    assert_true(fabs(avg_sq[k] - m2[k]) < 1e-5);
  }
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

/* o's slots are named names[i], hold counts[i] floats, and start at zero. */
static void check_slots(hvd_nn_optimizer *o, const char *const *names, const size_t *counts,
                        int n) {
  assert_int_equal(hvd_nn_optimizer_num_slots(o), n);
  for (int i = 0; i < n; i++) {
    size_t count = 0;
    const char *name = NULL;
    const float *data = hvd_nn_optimizer_slot(o, i, &count, &name);
    assert_non_null(data);
    assert_string_equal(name, names[i]);
    assert_int_equal(count, counts[i]);
    for (size_t k = 0; k < count; k++) assert_true(data[k] == 0.0f);
  }
}

static void test_slots(void **state) {
  (void)state;
  hvd_nn_model *m = model();
  hvd_nn_optimizer *sgd = hvd_nn_sgd_new(m, 0.1f, 0.9f, 0.0f);
  hvd_nn_optimizer *adam = hvd_nn_adam_new(m, 0.001f, 0.9f, 0.999f, 1e-8f);
  static const char *const sgd_names[] = {"0.dense.weight.momentum", "0.dense.bias.momentum"};
  static const char *const adam_names[] = {"0.dense.weight.exp_avg", "0.dense.weight.exp_avg_sq",
                                           "0.dense.bias.exp_avg", "0.dense.bias.exp_avg_sq"};
  static const size_t sgd_counts[] = {15, 3}, adam_counts[] = {15, 15, 3, 3};
  check_slots(sgd, sgd_names, sgd_counts, 2);
  check_slots(adam, adam_names, adam_counts, 4);
  assert_null(hvd_nn_optimizer_slot(sgd, 2, NULL, NULL));
  assert_non_null(strstr(hvd_nn_last_error(), "index 2"));
  assert_null(hvd_nn_optimizer_slot(adam, -1, NULL, NULL));

  assert_int_equal(*hvd_nn_optimizer_steps(sgd), 0);
  const double *h = hvd_nn_optimizer_hypers(sgd);
  assert_true(h[0] == (double)0.1f && h[1] == (double)0.9f && h[2] == 0 && h[3] == 0);
  h = hvd_nn_optimizer_hypers(adam);
  assert_true(h[0] == (double)0.001f && h[1] == (double)0.9f && h[2] == (double)0.999f &&
              h[3] == (double)1e-8f);
  assert_true(hvd_nn_optimizer_lr(adam) == 0.001f);

  /* The optimizer was made for the model as it was. */
  assert_int_equal(hvd_nn_add_dense(m, 2), 0);
  assert_int_equal(hvd_nn_optimizer_step(sgd), HVD_E_INVALID);
  assert_non_null(strstr(hvd_nn_last_error(), "4 parameters"));
  hvd_nn_optimizer_free(sgd);
  hvd_nn_optimizer_free(adam);
  hvd_nn_model_free(m);
}

static void test_bad_arguments(void **state) {
  (void)state;
  hvd_nn_model *m = model();
  assert_null(hvd_nn_sgd_new(m, -0.1f, 0.9f, 0.0f));
  assert_non_null(strstr(hvd_nn_last_error(), "lr -0.1"));
  assert_null(hvd_nn_sgd_new(m, 0.1f, -1.0f, 0.0f));
  assert_non_null(strstr(hvd_nn_last_error(), "momentum"));
  assert_null(hvd_nn_sgd_new(m, 0.1f, 0.9f, NAN));
  assert_non_null(strstr(hvd_nn_last_error(), "weight_decay"));
  assert_null(hvd_nn_sgd_new(m, INFINITY, 0.9f, 0.0f));
  assert_null(hvd_nn_sgd_new(NULL, 0.1f, 0.9f, 0.0f));
  assert_null(hvd_nn_adam_new(m, 0.1f, 1.0f, 0.999f, 1e-8f));
  assert_non_null(strstr(hvd_nn_last_error(), "beta1 1 is not in [0, 1)"));
  assert_null(hvd_nn_adam_new(m, 0.1f, 0.9f, -0.5f, 1e-8f));
  assert_non_null(strstr(hvd_nn_last_error(), "beta2"));
  assert_null(hvd_nn_adam_new(m, 0.1f, 0.9f, 0.999f, -1.0f));
  assert_non_null(strstr(hvd_nn_last_error(), "eps"));

  /* Hyper-parameters overwritten with nonsense fail the step, which then
   * changes nothing. */
  hvd_nn_optimizer *o = hvd_nn_adam_new(m, 0.1f, 0.9f, 0.999f, 1e-8f);
  hvd_nn_optimizer_hypers(o)[1] = 1.0;
  float before = *value_at(m, 0);
  *grad_at(m, 0) = 1.0f;
  assert_int_equal(hvd_nn_optimizer_step(o), HVD_E_INVALID);
  assert_true(*value_at(m, 0) == before);
  assert_int_equal(*hvd_nn_optimizer_steps(o), 0);
  hvd_nn_optimizer_free(o);

  assert_int_equal(hvd_nn_optimizer_step(NULL), HVD_E_INVALID);
  assert_true(hvd_nn_optimizer_num_slots(NULL) < 0);
  hvd_nn_optimizer_free(NULL);
  hvd_nn_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd_momentum),  cmocka_unit_test(test_sgd_plain),
      cmocka_unit_test(test_adam),          cmocka_unit_test(test_slots),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
