/*
 * test_nn_model.c -- building a model (model.c and the layers'
 * constructors): parameter names and the registry, output shapes, the
 * errors of bad shapes and arguments, and deterministic He-uniform
 * initialisation.  The arithmetic of the passes is test_nn_layers.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hvd_nn.h"

/* The Fashion-MNIST CNN: 1x28x28 -> 16x24x24 -> 16x12x12 -> 32x8x8 ->
 * 32x4x4 -> 10. */
static hvd_nn_model *cnn(void) {
  hvd_nn_model *m = hvd_nn_model_new(1, 28, 28);
  assert_non_null(m);
  assert_int_equal(hvd_nn_add_conv2d(m, 16, 5, 1, 0), 0);
  assert_int_equal(hvd_nn_add_relu(m), 0);
  assert_int_equal(hvd_nn_add_maxpool(m, 2, 2), 0);
  assert_int_equal(hvd_nn_add_conv2d(m, 32, 5, 1, 0), 0);
  assert_int_equal(hvd_nn_add_relu(m), 0);
  assert_int_equal(hvd_nn_add_maxpool(m, 2, 2), 0);
  assert_int_equal(hvd_nn_add_dense(m, 10), 0);
  return m;
}

static void test_names(void **state) {
  (void)state;
  hvd_nn_model *m = cnn();
  static const struct {
    const char *name;
    size_t count;
  } want[] = {{"0.conv2d.weight", 16 * 1 * 5 * 5},  {"0.conv2d.bias", 16},
              {"3.conv2d.weight", 32 * 16 * 5 * 5}, {"3.conv2d.bias", 32},
              {"6.dense.weight", 10 * 32 * 4 * 4},  {"6.dense.bias", 10}};
  assert_int_equal(hvd_nn_num_params(m), 6);
  for (int i = 0; i < 6; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    assert_non_null(p);
    assert_string_equal(p->name, want[i].name);
    assert_int_equal(p->count, want[i].count);
    assert_non_null(p->value);
    assert_non_null(p->grad);
    assert_ptr_equal(hvd_nn_param_find(m, want[i].name), p);
  }
  assert_int_equal(hvd_nn_model_outputs(m), 10);

  assert_null(hvd_nn_param_at(m, 6));
  assert_non_null(strstr(hvd_nn_last_error(), "index 6"));
  assert_null(hvd_nn_param_at(m, -1));
  assert_null(hvd_nn_param_find(m, "1.relu.weight"));
  assert_non_null(strstr(hvd_nn_last_error(), "1.relu.weight"));
  assert_null(hvd_nn_param_find(m, NULL));
  assert_null(hvd_nn_param_find(NULL, "0.conv2d.bias"));
  assert_null(hvd_nn_param_at(NULL, 0));
  assert_true(hvd_nn_num_params(NULL) < 0);
  hvd_nn_model_free(m);
}

static void test_outputs(void **state) {
  (void)state;
  hvd_nn_model *m = hvd_nn_model_new(3, 12, 10);
  assert_int_equal(hvd_nn_model_outputs(m), 3 * 12 * 10); /* no layers yet */
  assert_int_equal(hvd_nn_add_conv2d(m, 4, 3, 2, 1), 0);  /* (12+2-3)/2+1 = 6, (10+2-3)/2+1 = 5 */
  assert_int_equal(hvd_nn_model_outputs(m), 4 * 6 * 5);
  assert_int_equal(hvd_nn_add_maxpool(m, 3, 2), 0); /* (6-3)/2+1 = 2, (5-3)/2+1 = 2 */
  assert_int_equal(hvd_nn_model_outputs(m), 4 * 2 * 2);
  assert_int_equal(hvd_nn_add_relu(m), 0);
  assert_int_equal(hvd_nn_model_outputs(m), 4 * 2 * 2);
  assert_int_equal(hvd_nn_add_dense(m, 7), 0);
  assert_int_equal(hvd_nn_model_outputs(m), 7);
  assert_int_equal(hvd_nn_param_find(m, "3.dense.weight")->count, 7 * 16);
  /* A conv after a dense sees a 7x1x1 image. */
  assert_int_equal(hvd_nn_add_conv2d(m, 2, 1, 1, 0), 0);
  assert_int_equal(hvd_nn_model_outputs(m), 2);
  assert_true(hvd_nn_model_outputs(NULL) < 0);
  hvd_nn_model_free(m);
}

/* The call failed with HVD_E_INVALID and a message containing w1 and w2. */
static void expect_invalid(int rc, const char *w1, const char *w2) {
  assert_int_equal(rc, HVD_E_INVALID);
  const char *msg = hvd_nn_last_error();
  if (!strstr(msg, w1) || (w2 && !strstr(msg, w2)))
    fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", msg, w1, w2 ? w2 : "");
}

static void test_shape_errors(void **state) {
  (void)state;
  assert_null(hvd_nn_model_new(0, 28, 28));
  assert_non_null(strstr(hvd_nn_last_error(), "0x28x28"));
  assert_null(hvd_nn_model_new(1, -1, 28));
  assert_null(hvd_nn_model_new(65536, 65536, 2)); /* more than INT_MAX values */

  hvd_nn_model *m = hvd_nn_model_new(2, 5, 6);
  expect_invalid(hvd_nn_add_conv2d(m, 4, 6, 1, 0), "layer 0 (conv2d)", "kernel 6");
  expect_invalid(hvd_nn_add_conv2d(m, 4, 8, 1, 1), "height 5", "padding 1");
  expect_invalid(hvd_nn_add_conv2d(m, 0, 3, 1, 0), "layer 0 (conv2d)", "out_channels is 0");
  expect_invalid(hvd_nn_add_conv2d(m, 4, 0, 1, 0), "kernel is 0", NULL);
  expect_invalid(hvd_nn_add_conv2d(m, 4, 3, 0, 0), "stride is 0", NULL);
  expect_invalid(hvd_nn_add_conv2d(m, 4, 3, 1, -1), "padding is -1", NULL);
  expect_invalid(hvd_nn_add_maxpool(m, 6, 6), "layer 0 (maxpool)", "kernel 6");
  expect_invalid(hvd_nn_add_maxpool(m, 0, 1), "layer 0 (maxpool)", "kernel is 0");
  expect_invalid(hvd_nn_add_maxpool(m, 2, -2), "stride is -2", NULL);
  expect_invalid(hvd_nn_add_dense(m, 0), "layer 0 (dense)", "out_features is 0");
  expect_invalid(hvd_nn_add_dense(m, 1 << 30), "layer 0 (dense)", "too many");
  /* Nothing was added by the failures. */
  assert_int_equal(hvd_nn_num_params(m), 0);
  assert_int_equal(hvd_nn_model_outputs(m), 2 * 5 * 6);

  /* kernel = padded input is fine; the next layer is checked against
   * the shape it leaves: 1x1. */
  assert_int_equal(hvd_nn_add_conv2d(m, 3, 7, 1, 1), 0);
  assert_int_equal(hvd_nn_model_outputs(m), 3 * 1 * 2);
  assert_int_equal(hvd_nn_add_relu(m), 0);
  expect_invalid(hvd_nn_add_maxpool(m, 2, 2), "layer 2 (maxpool)", "1x2");
  assert_int_equal(hvd_nn_add_maxpool(m, 1, 1), 0);
  assert_string_equal(hvd_nn_param_at(m, 0)->name, "0.conv2d.weight");

  assert_int_equal(hvd_nn_add_dense(NULL, 3), HVD_E_INVALID);
  assert_int_equal(hvd_nn_add_conv2d(NULL, 3, 1, 1, 0), HVD_E_INVALID);
  assert_int_equal(hvd_nn_add_relu(NULL), HVD_E_INVALID);
  assert_int_equal(hvd_nn_add_maxpool(NULL, 1, 1), HVD_E_INVALID);
  hvd_nn_model_free(m);
  hvd_nn_model_free(NULL);
}

static int same_params(hvd_nn_model *a, hvd_nn_model *b) {
  for (int i = 0; i < hvd_nn_num_params(a); i++) {
    hvd_nn_param *p = hvd_nn_param_at(a, i), *q = hvd_nn_param_at(b, i);
    if (memcmp(p->value, q->value, p->count * sizeof(float)) != 0) return 0;
  }
  return 1;
}

static void test_init_determinism(void **state) {
  (void)state;
  hvd_nn_model *a = cnn(), *b = cnn();
  assert_int_equal(hvd_nn_model_init(a, 7), 0);
  assert_int_equal(hvd_nn_model_init(b, 7), 0);
  assert_true(same_params(a, b));
  /* Again, after the values have changed: still the same bits. */
  hvd_nn_param_at(b, 1)->value[0] = 3.0f;
  assert_int_equal(hvd_nn_model_init(b, 7), 0);
  assert_true(same_params(a, b));
  assert_int_equal(hvd_nn_model_init(b, 8), 0);
  for (int i = 0; i < hvd_nn_num_params(a); i += 2) { /* every weight differs */
    hvd_nn_param *p = hvd_nn_param_at(a, i), *q = hvd_nn_param_at(b, i);
    assert_true(memcmp(p->value, q->value, p->count * sizeof(float)) != 0);
  }
  assert_int_equal(hvd_nn_model_init(NULL, 7), HVD_E_INVALID);
  hvd_nn_model_free(a);
  hvd_nn_model_free(b);
}

static void test_init_he_uniform(void **state) {
  (void)state;
  hvd_nn_model *m = cnn();
  for (int i = 0; i < hvd_nn_num_params(m); i++) /* init must overwrite these */
    hvd_nn_param_at(m, i)->value[0] = 100.0f;
  assert_int_equal(hvd_nn_model_init(m, 1), 0);
  const int fan_in[3] = {1 * 5 * 5, 16 * 5 * 5, 32 * 4 * 4};
  for (int l = 0; l < 3; l++) {
    hvd_nn_param *w = hvd_nn_param_at(m, 2 * l), *b = hvd_nn_param_at(m, 2 * l + 1);
    const double bound = sqrt(6.0 / fan_in[l]);
    double sum = 0, sq = 0, top = 0;
    for (size_t j = 0; j < w->count; j++) {
      double v = w->value[j];
      assert_true(fabs(v) <= bound * (1 + 1e-7));
      sum += v;
      sq += v * v;
      top = fmax(top, fabs(v));
    }
    /* uniform on [-bound, bound]: mean 0, variance bound^2 / 3 */
    const double n = (double)w->count, mean = sum / n, var = sq / n - mean * mean;
    assert_true(fabs(mean) < 4 * bound / sqrt(3 * n));
    assert_true(fabs(var / (bound * bound / 3) - 1) < 0.15);
    assert_true(top > 0.95 * bound);
    for (size_t j = 0; j < b->count; j++) assert_true(b->value[j] == 0.0f);
  }
  hvd_nn_model_free(m);
}

static void test_pass_errors(void **state) {
  (void)state;
  hvd_nn_model *m = hvd_nn_model_new(1, 2, 2);
  float x[8] = {0}, dout[4] = {0};
  assert_null(hvd_nn_forward(m, x, 1));
  assert_non_null(strstr(hvd_nn_last_error(), "no layers"));
  assert_int_equal(hvd_nn_add_dense(m, 2), 0);
  assert_int_equal(hvd_nn_backward(m, dout, NULL, NULL), HVD_E_INVALID); /* before forward */
  assert_non_null(strstr(hvd_nn_last_error(), "no forward"));
  assert_null(hvd_nn_forward(m, x, 0));
  assert_non_null(strstr(hvd_nn_last_error(), "batch 0"));
  assert_null(hvd_nn_forward(m, x, -3));
  assert_null(hvd_nn_forward(m, NULL, 1));
  assert_non_null(strstr(hvd_nn_last_error(), "input is NULL"));
  assert_null(hvd_nn_forward(NULL, x, 1));
  assert_non_null(hvd_nn_forward(m, x, 2));
  assert_int_equal(hvd_nn_backward(m, NULL, NULL, NULL), HVD_E_INVALID);
  assert_int_equal(hvd_nn_backward(NULL, dout, NULL, NULL), HVD_E_INVALID);
  assert_int_equal(hvd_nn_backward(m, dout, NULL, NULL), 0);
  /* A layer added after a forward has no output to go back through. */
  assert_int_equal(hvd_nn_add_relu(m), 0);
  assert_int_equal(hvd_nn_backward(m, dout, NULL, NULL), HVD_E_INVALID);
  assert_non_null(hvd_nn_forward(m, x, 2));
  assert_int_equal(hvd_nn_backward(m, dout, NULL, NULL), 0);
  hvd_nn_model_zero_grad(NULL);
  hvd_nn_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),           cmocka_unit_test(test_outputs),
      cmocka_unit_test(test_shape_errors),    cmocka_unit_test(test_init_determinism),
      cmocka_unit_test(test_init_he_uniform), cmocka_unit_test(test_pass_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
