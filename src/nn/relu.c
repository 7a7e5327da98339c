/*
 * relu.c -- y = max(x, 0), element-wise.  Its gradient passes where the
 * input was positive (0 at 0, as PyTorch's).  A NaN input stays NaN, as in
 * PyTorch, so that a diverging run shows in its loss.
 */
#include "layer.h"

static int relu_forward(hvd_nn__layer *l, const float *x, float *y, int batch) {
  const size_t n = (size_t)batch * (size_t)hvd_nn__shape_size(l->in);
  for (size_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
  return 0;
}

static void relu_backward(hvd_nn__layer *l, const float *x, const float *y, const float *dy,
                          float *dx, int batch) {
  (void)y;
  if (!dx) return; /* no parameters: nothing else to compute */
  const size_t n = (size_t)batch * (size_t)hvd_nn__shape_size(l->in);
  for (size_t i = 0; i < n; i++) {
    const float g = dy[i]; /* loaded either way: a select, not a branch, so it vectorises */
    dx[i] = x[i] > 0.0f ? g : 0.0f;
  }
}

static const hvd_nn__layer_ops relu_ops = {"relu", relu_forward, relu_backward, NULL};

int hvd_nn__relu_new(hvd_nn__layer **lp, int index, hvd_nn__shape in) {
  hvd_nn__layer *l = hvd_nn__layer_new(sizeof *l, &relu_ops, index, in, in);
  if (!l) return HVD_E_NOMEM;
  *lp = l;
  return 0;
}
