/*
 * test_nn_layers.c -- the layers (dense.c, conv2d.c, relu.c, maxpool.c),
 * a whole model's forward and backward (model.c) and the loss (loss.c).
 *
 * The references here share nothing with the library: every layer is
 * written as the direct nested loops of its definition, in double.
 * Forward is checked against them; backward (the gradients of the input
 * and of the parameters) against central finite differences of those
 * double references, for the loss sum(y * r) with random r, whose
 * gradient d(loss)/dy is r.  Layers are driven through their internal
 * interface (layer.h) so that d(input) can be checked directly; the whole
 * model conv -> relu -> maxpool -> dense goes through the public API.
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
#include "layer.h"
#include "rng.h"

/* ---- Random numbers (rng.h), independent of the library's rng.c ---- */

static rng gen = {0x9d2c5680u};

static void fill(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = rng_uniform(&gen);
}

/* Values at least 0.05 away from 0, where relu has its kink. */
static void fill_away_from_zero(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float u = rng_uniform(&gen);
    v[i] = u < 0 ? u - 0.05f : u + 0.05f;
  }
}

/* Distinct values 0.01 apart in random order: no near ties for maxpool. */
static void fill_distinct(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = 0.01f * (float)i - 0.005f * (float)n;
  for (size_t i = n; i > 1; i--) {
    size_t j = rng_next(&gen) % i;
    float t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

static double *widen(const float *v, size_t n) {
  double *d = malloc((n ? n : 1) * sizeof *d);
  for (size_t i = 0; i < n; i++) d[i] = v[i];
  return d;
}

/* ---- The references, in double ---- */

static void ref_dense(const double *x, int batch, int in, const double *w, const double *b, int out,
                      double *y) {
  for (int n = 0; n < batch; n++)
    for (int o = 0; o < out; o++) {
      double s = b[o];
      for (int i = 0; i < in; i++) s += x[n * in + i] * w[o * in + i];
      y[n * out + o] = s;
    }
}

static void ref_conv(const double *x, int batch, int c, int h, int wd, const double *w,
                     const double *b, int oc, int k, int s, int p, double *y) {
  int oh = (h + 2 * p - k) / s + 1, ow = (wd + 2 * p - k) / s + 1;
  for (int n = 0; n < batch; n++)
    for (int o = 0; o < oc; o++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          double sum = b[o];
          for (int ci = 0; ci < c; ci++)
            for (int ky = 0; ky < k; ky++)
              for (int kx = 0; kx < k; kx++) {
                int iy = oy * s - p + ky, ix = ox * s - p + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                sum += x[((n * c + ci) * h + iy) * wd + ix] * w[((o * c + ci) * k + ky) * k + kx];
              }
          y[((n * oc + o) * oh + oy) * ow + ox] = sum;
        }
}

static void ref_relu(const double *x, size_t count, double *y) {
  for (size_t i = 0; i < count; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

static void ref_maxpool(const double *x, int batch, int c, int h, int wd, int k, int s, double *y) {
  int oh = (h - k) / s + 1, ow = (wd - k) / s + 1;
  for (int n = 0; n < batch * c; n++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        double m = -INFINITY;
        for (int ky = 0; ky < k; ky++)
          for (int kx = 0; kx < k; kx++) m = fmax(m, x[(n * h + oy * s + ky) * wd + ox * s + kx]);
        y[(n * oh + oy) * ow + ox] = m;
      }
}

/* ---- One layer through layer.h ---- */

enum { DENSE, CONV, RELU, POOL };

typedef struct {
  int kind;
  hvd_nn__shape in;
  int out, k, s, p; /* out_features or out_channels, kernel, stride, padding */
} layer_case;

static hvd_nn__layer *make_layer(const layer_case *lc) {
  hvd_nn__layer *l = NULL;
  int rc = -1;
  switch (lc->kind) {
    case DENSE:
      rc = hvd_nn__dense_new(&l, 0, lc->in, lc->out);
      break;
    case CONV:
      rc = hvd_nn__conv2d_new(&l, 0, lc->in, lc->out, lc->k, lc->s, lc->p);
      break;
    case RELU:
      rc = hvd_nn__relu_new(&l, 0, lc->in);
      break;
    case POOL:
      rc = hvd_nn__maxpool_new(&l, 0, lc->in, lc->k, lc->s);
      break;
  }
  assert_int_equal(rc, 0);
  return l;
}

static void ref_layer(const layer_case *lc, int batch, const double *x, const double *w,
                      const double *b, double *y) {
  const hvd_nn__shape in = lc->in;
  switch (lc->kind) {
    case DENSE:
      ref_dense(x, batch, in.c * in.h * in.w, w, b, lc->out, y);
      break;
    case CONV:
      ref_conv(x, batch, in.c, in.h, in.w, w, b, lc->out, lc->k, lc->s, lc->p, y);
      break;
    case RELU:
      ref_relu(x, (size_t)batch * in.c * in.h * in.w, y);
      break;
    case POOL:
      ref_maxpool(x, batch, in.c, in.h, in.w, lc->k, lc->s, y);
      break;
  }
}

/* The inputs of a loss evaluation: sum(ref(x, w, b) * r). */
typedef struct {
  const layer_case *lc;
  int batch;
  double *x, *w, *b, *r, *y;
  size_t ny;
} loss_args;

static double ref_loss(const loss_args *a) {
  ref_layer(a->lc, a->batch, a->x, a->w, a->b, a->y);
  double s = 0;
  for (size_t i = 0; i < a->ny; i++) s += a->y[i] * a->r[i];
  return s;
}

/* Central difference of ref_loss in v[i]: exact for the linear layers up
 * to rounding, and no kink is within h of the inputs used here. */
static double central(const loss_args *a, double *v, size_t i) {
  const double h = 1e-6, saved = v[i];
  v[i] = saved + h;
  double up = ref_loss(a);
  v[i] = saved - h;
  double down = ref_loss(a);
  v[i] = saved;
  return (up - down) / (2 * h);
}

static void assert_close(double got, double want, double tol, const char *what, size_t i) {
  if (fabs(got - want) > tol * (1 + fabs(want))) {
    fprintf(stderr, "%s[%zu]: got %.9g, want %.9g\n", what, i, got, want);
    fail();
  }
}

/* The analytic gradient g (n floats) against central differences of v. */
static void check_grad(const loss_args *a, const float *g, double *v, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++) assert_close(g[i], central(a, v, i), 1e-4, what, i);
}

static void check_layer(const layer_case *lc, int batch) {
  hvd_nn__layer *l = make_layer(lc);
  const size_t nx = (size_t)batch * hvd_nn__shape_size(l->in);
  const size_t ny = (size_t)batch * hvd_nn__shape_size(l->out);
  float *x = malloc(nx * sizeof *x), *dx = malloc(nx * sizeof *dx);
  float *y = malloc(ny * sizeof *y), *r = malloc(ny * sizeof *r);
  if (lc->kind == RELU)
    fill_away_from_zero(x, nx);
  else if (lc->kind == POOL)
    fill_distinct(x, nx);
  else
    fill(x, nx);
  fill(r, ny);
  hvd_nn_param *w = NULL, *b = NULL;
  if (l->num_params) {
    w = &l->params[HVD_NN__WEIGHT];
    b = &l->params[HVD_NN__BIAS];
    fill(w->value, w->count);
    fill(b->value, b->count);
  }
  loss_args a = {lc,
                 batch,
                 widen(x, nx),
                 w ? widen(w->value, w->count) : NULL,
                 b ? widen(b->value, b->count) : NULL,
                 widen(r, ny),
                 malloc(ny * sizeof(double)),
                 ny};

  assert_int_equal(l->ops->forward(l, x, y, batch), 0);
  ref_layer(lc, batch, a.x, a.w, a.b, a.y);
  for (size_t i = 0; i < ny; i++) assert_close(y[i], a.y[i], 1e-5, "y", i);

  l->ops->backward(l, x, y, r, dx, batch);
  check_grad(&a, dx, a.x, nx, "dx");
  if (w) {
    check_grad(&a, w->grad, a.w, w->count, "dW");
    check_grad(&a, b->grad, a.b, b->count, "db");
  }

  /* Without dx (a model's first layer), the parameter gradients are the
   * same again: added to what is there. */
  if (w) {
    float *once = malloc(w->count * sizeof *once);
    memcpy(once, w->grad, w->count * sizeof *once);
    l->ops->backward(l, x, y, r, NULL, batch);
    for (size_t i = 0; i < w->count; i++) assert_close(w->grad[i], 2.0 * once[i], 1e-5, "2dW", i);
    free(once);
  }

  hvd_nn__layer_free(l);
  free(x), free(dx), free(y), free(r);
  free(a.x), free(a.w), free(a.b), free(a.r), free(a.y);
}

static void test_dense(void **state) {
  (void)state;
  check_layer(&(layer_case){DENSE, {1, 1, 7}, 5, 0, 0, 0}, 3);
  check_layer(&(layer_case){DENSE, {2, 3, 2}, 4, 0, 0, 0}, 1); /* flattens (c, h, w) */
  check_layer(&(layer_case){DENSE, {1, 1, 1}, 1, 0, 0, 0}, 2);
}

static void test_conv2d(void **state) {
  (void)state;
  for (int s = 1; s <= 2; s++)
    for (int p = 0; p <= 1; p++) {
      check_layer(&(layer_case){CONV, {2, 6, 7}, 3, 3, s, p}, 2);
      check_layer(&(layer_case){CONV, {3, 5, 5}, 2, 2, s, p}, 1);
    }
  check_layer(&(layer_case){CONV, {1, 4, 4}, 2, 1, 1, 0}, 2); /* 1x1 kernel */
  check_layer(&(layer_case){CONV, {2, 3, 3}, 2, 5, 1, 1}, 2); /* kernel = padded input */
  check_layer(&(layer_case){CONV, {1, 5, 4}, 2, 3, 3, 2}, 2); /* stride > 2, wide padding */
}

static void test_relu(void **state) {
  (void)state;
  check_layer(&(layer_case){RELU, {2, 3, 4}, 0, 0, 0, 0}, 3);
  /* At 0 the gradient is 0, as PyTorch's; NaN stays NaN. */
  hvd_nn__layer *l = make_layer(&(layer_case){RELU, {1, 1, 4}, 0, 0, 0, 0});
  const float x[4] = {0.0f, -2.0f, 3.0f, NAN}, dy[4] = {1, 1, 1, 1};
  float y[4], dx[4];
  assert_int_equal(l->ops->forward(l, x, y, 1), 0);
  assert_true(y[0] == 0 && y[1] == 0 && y[2] == 3 && isnan(y[3]));
  l->ops->backward(l, x, y, dy, dx, 1);
  assert_true(dx[0] == 0 && dx[1] == 0 && dx[2] == 1);
  hvd_nn__layer_free(l);
}

static void test_maxpool(void **state) {
  (void)state;
  check_layer(&(layer_case){POOL, {2, 6, 6}, 0, 2, 2, 0}, 2);
  check_layer(&(layer_case){POOL, {1, 7, 5}, 0, 3, 2, 0}, 2); /* overlapping, ragged edge */
  check_layer(&(layer_case){POOL, {3, 4, 4}, 0, 1, 1, 0}, 1);
}

/* On ties the gradient goes to the first maximum in row order, once. */
static void test_maxpool_ties(void **state) {
  (void)state;
  hvd_nn__layer *l = make_layer(&(layer_case){POOL, {2, 2, 2}, 0, 2, 2, 0});
  const float x[8] = {1, 1, 1, 1, 0, 5, -1, 5};
  const float dy[2] = {3, 7};
  float y[2], dx[8];
  assert_int_equal(l->ops->forward(l, x, y, 1), 0);
  assert_true(y[0] == 1 && y[1] == 5);
  l->ops->backward(l, x, y, dy, dx, 1);
  const float want[8] = {3, 0, 0, 0, 0, 7, 0, 0};
  assert_memory_equal(dx, want, sizeof want);
  hvd_nn__layer_free(l);
}

/* ---- A whole model: conv -> relu -> maxpool -> dense, public API ---- */

enum { IN_C = 2, IN_H = 7, IN_W = 6, CONV_C = 3, POOL_H = 3, POOL_W = 3, CLASSES = 4, BATCH = 3 };

static hvd_nn_model *small_model(void) {
  hvd_nn_model *m = hvd_nn_model_new(IN_C, IN_H, IN_W);
  assert_non_null(m);
  assert_int_equal(hvd_nn_add_conv2d(m, CONV_C, 3, 1, 1), 0);
  assert_int_equal(hvd_nn_add_relu(m), 0);
  assert_int_equal(hvd_nn_add_maxpool(m, 2, 2), 0);
  assert_int_equal(hvd_nn_add_dense(m, CLASSES), 0);
  assert_int_equal(hvd_nn_model_outputs(m), CLASSES);
  assert_int_equal(hvd_nn_model_init(m, 42), 0);
  /* biases too, so that they matter */
  fill(hvd_nn_param_find(m, "0.conv2d.bias")->value, CONV_C);
  fill(hvd_nn_param_find(m, "3.dense.bias")->value, CLASSES);
  return m;
}

/* The model's parameters in double, in registry order: conv W, b, dense W, b. */
typedef struct {
  double *v[4];
  double *x, *r;
} model_args;

static void ref_model(const model_args *a, double *y) {
  double conv[BATCH * CONV_C * IN_H * IN_W], relu[BATCH * CONV_C * IN_H * IN_W];
  double pool[BATCH * CONV_C * POOL_H * POOL_W];
  ref_conv(a->x, BATCH, IN_C, IN_H, IN_W, a->v[0], a->v[1], CONV_C, 3, 1, 1, conv);
  ref_relu(conv, BATCH * CONV_C * IN_H * IN_W, relu);
  ref_maxpool(relu, BATCH, CONV_C, IN_H, IN_W, 2, 2, pool);
  ref_dense(pool, BATCH, CONV_C * POOL_H * POOL_W, a->v[2], a->v[3], CLASSES, y);
}

static double ref_model_loss(const model_args *a) {
  double y[BATCH * CLASSES], s = 0;
  ref_model(a, y);
  for (int i = 0; i < BATCH * CLASSES; i++) s += y[i] * a->r[i];
  return s;
}

static void test_model(void **state) {
  (void)state;
  hvd_nn_model *m = small_model();
  float x[BATCH * IN_C * IN_H * IN_W], r[BATCH * CLASSES];
  fill(x, sizeof x / sizeof *x);
  fill(r, sizeof r / sizeof *r);
  model_args a = {{NULL}, widen(x, sizeof x / sizeof *x), widen(r, BATCH * CLASSES)};
  assert_int_equal(hvd_nn_num_params(m), 4);
  for (int i = 0; i < 4; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    a.v[i] = widen(p->value, p->count);
  }

  const float *y = hvd_nn_forward(m, x, BATCH);
  assert_non_null(y);
  double want[BATCH * CLASSES];
  ref_model(&a, want);
  for (int i = 0; i < BATCH * CLASSES; i++) assert_close(y[i], want[i], 1e-5, "y", (size_t)i);

  hvd_nn_model_zero_grad(m);
  assert_int_equal(hvd_nn_backward(m, r, NULL, NULL), 0);
  for (int i = 0; i < 4; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    for (size_t j = 0; j < p->count; j++) {
      const double h = 1e-6, saved = a.v[i][j];
      a.v[i][j] = saved + h;
      double up = ref_model_loss(&a);
      a.v[i][j] = saved - h;
      double down = ref_model_loss(&a);
      a.v[i][j] = saved;
      assert_close(p->grad[j], (up - down) / (2 * h), 1e-4, p->name, j);
    }
  }

  /* Same input, same bits. */
  float first[BATCH * CLASSES];
  memcpy(first, y, sizeof first);
  assert_memory_equal(hvd_nn_forward(m, x, BATCH), first, sizeof first);

  for (int i = 0; i < 4; i++) free(a.v[i]);
  free(a.x), free(a.r);
  hvd_nn_model_free(m);
}

/* Batches that grow and shrink give each sample what it gets alone. */
static void test_model_batch_sizes(void **state) {
  (void)state;
  hvd_nn_model *m = small_model();
  enum { N = 9, IN = IN_C * IN_H * IN_W };
  float x[N * IN], alone[N * CLASSES];
  fill(x, N * IN);
  for (int i = 0; i < N; i++) {
    const float *y = hvd_nn_forward(m, x + i * IN, 1);
    assert_non_null(y);
    memcpy(alone + i * CLASSES, y, CLASSES * sizeof *y);
  }
  const int batches[] = {2, 9, 1, 5};
  for (size_t t = 0; t < sizeof batches / sizeof *batches; t++) {
    const float *y = hvd_nn_forward(m, x, batches[t]);
    assert_non_null(y);
    for (int i = 0; i < batches[t] * CLASSES; i++)
      assert_close(y[i], alone[i], 1e-5, "y", (size_t)i);
  }
  hvd_nn_model_free(m);
}

/* Backward adds: two passes give twice the gradient of one. */
static void test_grad_accumulation(void **state) {
  (void)state;
  hvd_nn_model *m = small_model();
  float x[BATCH * IN_C * IN_H * IN_W], r[BATCH * CLASSES];
  fill(x, sizeof x / sizeof *x);
  fill(r, sizeof r / sizeof *r);
  assert_non_null(hvd_nn_forward(m, x, BATCH));
  hvd_nn_model_zero_grad(m);
  assert_int_equal(hvd_nn_backward(m, r, NULL, NULL), 0);
  float *once[4];
  for (int i = 0; i < 4; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    once[i] = malloc(p->count * sizeof(float));
    memcpy(once[i], p->grad, p->count * sizeof(float));
  }
  assert_int_equal(hvd_nn_backward(m, r, NULL, NULL), 0);
  for (int i = 0; i < 4; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    for (size_t j = 0; j < p->count; j++)
      assert_close(p->grad[j], 2.0 * once[i][j], 1e-5, p->name, j);
    free(once[i]);
  }
  hvd_nn_model_zero_grad(m);
  for (int i = 0; i < 4; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    for (size_t j = 0; j < p->count; j++) assert_true(p->grad[j] == 0.0f);
  }
  hvd_nn_model_free(m);
}

/* ---- The gradient hook ---- */

typedef struct {
  const char *names[8];
  int calls;
  int fail_at;  /* the call that returns an error, -1 for none */
  int complete; /* every call saw its own gradient finished */
} hook_log;

static int record(hvd_nn_param *p, void *arg) {
  hook_log *log = arg;
  if (log->calls < 8) log->names[log->calls] = p->name;
  /* The conv's gradient is done when its hook runs, the dense one's too:
   * no grad of a reported parameter may still be zero everywhere. */
  int nonzero = 0;
  for (size_t i = 0; i < p->count; i++) nonzero |= p->grad[i] != 0.0f;
  log->complete &= nonzero;
  return log->calls++ == log->fail_at ? HVD_E_ABORTED : 0;
}

static void test_hook_order(void **state) {
  (void)state;
  hvd_nn_model *m = small_model();
  float x[BATCH * IN_C * IN_H * IN_W], r[BATCH * CLASSES];
  fill(x, sizeof x / sizeof *x);
  fill(r, sizeof r / sizeof *r);
  assert_non_null(hvd_nn_forward(m, x, BATCH));
  hvd_nn_model_zero_grad(m);

  hook_log log = {{NULL}, 0, -1, 1};
  assert_int_equal(hvd_nn_backward(m, r, record, &log), 0);
  assert_int_equal(log.calls, 4);
  assert_true(log.complete);
  assert_string_equal(log.names[0], "3.dense.weight");
  assert_string_equal(log.names[1], "3.dense.bias");
  assert_string_equal(log.names[2], "0.conv2d.weight");
  assert_string_equal(log.names[3], "0.conv2d.bias");

  /* An error stops backward there, and is what backward returns. */
  hvd_nn_model_zero_grad(m);
  hook_log stop = {{NULL}, 0, 1, 1};
  assert_int_equal(hvd_nn_backward(m, r, record, &stop), HVD_E_ABORTED);
  assert_int_equal(stop.calls, 2);
  hvd_nn_param *conv_w = hvd_nn_param_find(m, "0.conv2d.weight");
  for (size_t i = 0; i < conv_w->count; i++) assert_true(conv_w->grad[i] == 0.0f);
  hvd_nn_model_free(m);
}

/* ---- Softmax cross-entropy ---- */

/* The definition, -log(softmax(z)[label]), without any shift: fine for the
 * small logits it is used on. */
static double ref_xent(const float *z, int label, int classes, double *grad) {
  double sum = 0;
  for (int j = 0; j < classes; j++) sum += exp(z[j]);
  for (int j = 0; j < classes; j++) grad[j] = exp(z[j]) / sum - (j == label);
  return -log(exp(z[label]) / sum);
}

static void test_xent(void **state) {
  (void)state;
  enum { B = 6, C = 7 };
  float z[B * C], d[B * C];
  int labels[B], correct = -1, want_correct = 0;
  double want = 0, grad[B * C];
  fill(z, B * C);
  for (int i = 0; i < B; i++) {
    labels[i] = (int)(rng_next(&gen) % C);
    if (i < 2) z[i * C + labels[i]] = 3; /* some right answers */
    want += ref_xent(z + i * C, labels[i], C, grad + i * C) / B;
    int top = 0;
    for (int j = 1; j < C; j++)
      if (z[i * C + j] > z[i * C + top]) top = j;
    want_correct += top == labels[i];
  }
  float loss = hvd_nn_softmax_xent(z, labels, B, C, d, &correct);
  assert_close(loss, want, 1e-6, "loss", 0);
  for (int i = 0; i < B * C; i++) assert_close(d[i], grad[i] / B, 1e-6, "dlogits", (size_t)i);
  assert_int_equal(correct, want_correct);
  assert_true(want_correct >= 2);
  /* dlogits and correct are optional */
  assert_true(hvd_nn_softmax_xent(z, labels, B, C, NULL, NULL) == loss);
}

static void test_xent_large_logits(void **state) {
  (void)state;
  const float z[3 * 3] = {1000, 0, -1000, 1000, 0, -1000, 1000, 1000, -1000};
  const int labels[3] = {0, 1, 1};
  float d[9];
  int correct;
  /* log(1 + e^-1000 + e^-2000) = 0;  1000 + that;  log 2 + e^-2000 */
  float loss = hvd_nn_softmax_xent(z, labels, 3, 3, d, &correct);
  assert_true(isfinite(loss));
  assert_close(loss, (0 + 1000 + log(2.0)) / 3, 1e-6, "loss", 0);
  const double want[9] = {0, 0, 0, 1, -1, 0, 0.5, -0.5, 0};
  for (int i = 0; i < 9; i++) assert_close(d[i], want[i] / 3, 1e-6, "dlogits", (size_t)i);
  assert_int_equal(correct, 1); /* the tie goes to the first: not label 1 */
}

static void test_xent_errors(void **state) {
  (void)state;
  const float z[4] = {0, 1, 2, 3};
  float d[4] = {9, 9, 9, 9};
  int bad[2] = {1, 2};
  assert_true(hvd_nn_softmax_xent(z, bad, 2, 2, d, NULL) < 0);
  assert_non_null(strstr(hvd_nn_last_error(), "label 2 of sample 1"));
  assert_true(d[0] == 9); /* nothing written */
  bad[1] = -1;
  assert_true(hvd_nn_softmax_xent(z, bad, 2, 2, NULL, NULL) < 0);
  assert_non_null(strstr(hvd_nn_last_error(), "label -1"));
  const int ok[2] = {0, 1};
  assert_true(hvd_nn_softmax_xent(NULL, ok, 2, 2, NULL, NULL) < 0);
  assert_true(hvd_nn_softmax_xent(z, NULL, 2, 2, NULL, NULL) < 0);
  assert_true(hvd_nn_softmax_xent(z, ok, 0, 2, NULL, NULL) < 0);
  assert_true(hvd_nn_softmax_xent(z, ok, 2, 0, NULL, NULL) < 0);
  assert_non_null(strstr(hvd_nn_last_error(), "classes 0"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dense),
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_relu),
      cmocka_unit_test(test_maxpool),
      cmocka_unit_test(test_maxpool_ties),
      cmocka_unit_test(test_model),
      cmocka_unit_test(test_model_batch_sizes),
      cmocka_unit_test(test_grad_accumulation),
      cmocka_unit_test(test_hook_order),
      cmocka_unit_test(test_xent),
      cmocka_unit_test(test_xent_large_logits),
      cmocka_unit_test(test_xent_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
