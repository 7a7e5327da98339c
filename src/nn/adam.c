/*
 * adam.c -- Adam (Kingma and Ba 2015) as torch.optim.Adam, without weight
 * decay or AMSGrad:
 *
 *     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *     w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *
 * eps is added outside the square root and after the bias correction of
 * v, in that order, as PyTorch does; the bias corrections are computed in
 * double once per parameter and step, as PyTorch computes them in Python.
 *
 * hypers: {lr, beta1, beta2, eps}.
 */
#include <math.h>

#include "optimizer.h"

static const char *const adam_slots[] = {"exp_avg", "exp_avg_sq"};

static int adam_check(const double *h, int slots_per_param, const char *where) {
  (void)slots_per_param;
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "lr", h[0], 0.0, INFINITY));
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "beta1", h[1], 0.0, 1.0));
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "beta2", h[2], 0.0, 1.0));
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "eps", h[3], 0.0, INFINITY));
  return 0;
}

static void adam_update(const double *h, int64_t t, hvd_nn_param *p, float *const *slots) {
  const float b1 = (float)h[1], b2 = (float)h[2], eps = (float)h[3];
  const float step_size = (float)(h[0] / (1.0 - pow(h[1], (double)t)));
  const float v_scale = (float)sqrt(1.0 - pow(h[2], (double)t));
  float *w = p->value, *m = slots[0], *v = slots[1];
  const float *g = p->grad;
  for (size_t i = 0; i < p->count; i++) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    w[i] -= step_size * (m[i] / (sqrtf(v[i]) / v_scale + eps));
  }
}

static const hvd_nn__optimizer_kind adam = {adam_slots, adam_check, adam_update};

hvd_nn_optimizer *hvd_nn_adam_new(hvd_nn_model *m, float lr, float beta1, float beta2, float eps) {
  const double hypers[HVD_NN_HYPERS] = {lr, beta1, beta2, eps};
  return hvd_nn__optimizer_new(m, &adam, hypers, 2, "hvd_nn_adam_new");
}
