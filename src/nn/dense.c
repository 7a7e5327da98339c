/*
 * dense.c -- a fully connected layer, y = x W^T + b, as torch.nn.Linear.
 *
 * The input is flattened: a sample of shape (c, h, w) is a vector of
 * c * h * w features.  W is [out][in], PyTorch's layout.  Each of the
 * three products (output, weight gradient, input gradient) is one
 * cblas_sgemm over the whole batch.
 */
#include <cblas.h>
#include <string.h>

#include "layer.h"

static int dense_forward(hvd_nn__layer *l, const float *x, float *y, int batch) {
  const int in = hvd_nn__shape_size(l->in), out = l->out.c;
  const float *w = l->params[HVD_NN__WEIGHT].value, *b = l->params[HVD_NN__BIAS].value;
  for (int i = 0; i < batch; i++) memcpy(y + (size_t)i * out, b, (size_t)out * sizeof *b);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, y,
              out);
  return 0;
}

static void dense_backward(hvd_nn__layer *l, const float *x, const float *y, const float *dy,
                           float *dx, int batch) {
  (void)y;
  const int in = hvd_nn__shape_size(l->in), out = l->out.c;
  hvd_nn_param *w = &l->params[HVD_NN__WEIGHT], *b = &l->params[HVD_NN__BIAS];
  /* dW += dy^T x */
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 1.0f,
              w->grad, in);
  /* db += the sum of dy over the batch */
  for (int i = 0; i < batch; i++) {
    const float *dyi = dy + (size_t)i * out;
    for (int o = 0; o < out; o++) b->grad[o] += dyi[o];
  }
  /* dx = dy W */
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w->value,
                in, 0.0f, dx, in);
}

static const hvd_nn__layer_ops dense_ops = {"dense", dense_forward, dense_backward, NULL};

int hvd_nn__dense_new(hvd_nn__layer **lp, int index, hvd_nn__shape in, int out_features) {
  const int n_in = hvd_nn__shape_size(in);
  HVD_NN__CHECK(hvd_nn__check_arg(index, "dense", "out_features", out_features, 1));
  if (hvd_nn__imul(n_in, out_features) < 0)
    return hvd_nn__err(HVD_E_INVALID, "layer %d (dense): %d x %d weights are too many", index,
                       out_features, n_in);
  hvd_nn__shape out = {out_features, 1, 1};
  hvd_nn__layer *l = hvd_nn__layer_new(sizeof *l, &dense_ops, index, in, out);
  if (!l) return HVD_E_NOMEM;
  l->fan_in = n_in;
  int rc = hvd_nn__layer_alloc_params(l, (size_t)n_in * (size_t)out_features, (size_t)out_features);
  if (rc < 0) {
    hvd_nn__layer_free(l);
    return rc;
  }
  *lp = l;
  return 0;
}
