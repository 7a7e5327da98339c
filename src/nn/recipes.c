/*
 * recipes.c -- the small numeric recipes of Horovod's examples: scaling
 * the learning rate with a warmup, and averaging metrics across ranks.
 */
#include "nn_int.h"

/* Goyal et al. 2017: with k times the global batch, k times the learning
 * rate, reached gradually because a large rate diverges in the first
 * epochs.  Horovod's LearningRateWarmupCallback ramps linearly from the
 * single-process rate; so does this. */
double hvd_nn_lr_warmup(double base_lr, double scale, double epoch, double warmup_epochs) {
  double progress = warmup_epochs > 0.0 ? epoch / warmup_epochs : 1.0;
  if (progress > 1.0) progress = 1.0;
  if (progress < 0.0) progress = 0.0;
  return base_lr * (1.0 + (scale - 1.0) * progress);
}

int hvd_nn_metric_average(double value, const char *name, double *avg) {
  if (!avg) return hvd_nn__err(HVD_E_INVALID, "metric_average: NULL result for '%s'",
                               name ? name : "(unnamed)");
  double v = value;
  hvd_handle h = hvd_allreduce_async(&v, &v, 1, HVD_FLOAT64, HVD_AVERAGE, name);
  int rc = h < 0 ? (int)h : hvd_wait(h);
  if (rc < 0)
    return hvd_nn__err_hvd(rc, "metric_average of '%s'", name ? name : "(unnamed)");
  *avg = v;
  return 0;
}
