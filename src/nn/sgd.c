/*
 * sgd.c -- stochastic gradient descent with momentum and weight decay,
 * torch.optim.SGD (dampening 0, no Nesterov):
 *
 *     d = g + weight_decay * w;  v = momentum * v + d;  w -= lr * v
 *
 * PyTorch starts v at the first d; starting it at zero gives the same v
 * after the first step and keeps the state a plain buffer.  Without
 * momentum there is no v (and no slot): w -= lr * d.
 *
 * hypers: {lr, momentum, weight_decay, 0}.
 */
#include <math.h>

#include "optimizer.h"

static const char *const sgd_slots[] = {"momentum"};

static int sgd_check(const double *h, int slots_per_param, const char *where) {
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "lr", h[0], 0.0, INFINITY));
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "momentum", h[1], 0.0, INFINITY));
  HVD_NN__CHECK(hvd_nn__check_hyper(where, "weight_decay", h[2], 0.0, INFINITY));
  if (h[1] != 0.0 && slots_per_param == 0)
    return hvd_nn__err(HVD_E_INVALID,
                       "%s: momentum %g for an SGD optimizer made without momentum (no buffers)",
                       where, h[1]);
  return 0;
}

static void sgd_update(const double *h, int64_t t, hvd_nn_param *p, float *const *slots) {
  (void)t;
  const float lr = (float)h[0], momentum = (float)h[1], decay = (float)h[2];
  float *w = p->value, *v = slots[0];
  const float *g = p->grad;
  for (size_t i = 0; i < p->count; i++) {
    float d = g[i] + decay * w[i];
    if (v) d = v[i] = momentum * v[i] + d;
    w[i] -= lr * d;
  }
}

static const hvd_nn__optimizer_kind sgd = {sgd_slots, sgd_check, sgd_update};

hvd_nn_optimizer *hvd_nn_sgd_new(hvd_nn_model *m, float lr, float momentum, float weight_decay) {
  const double hypers[HVD_NN_HYPERS] = {lr, momentum, weight_decay, 0.0};
  return hvd_nn__optimizer_new(m, &sgd, hypers, momentum != 0.0f, "hvd_nn_sgd_new");
}
