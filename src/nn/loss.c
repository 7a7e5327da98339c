/*
 * loss.c -- softmax cross-entropy, torch.nn.functional.cross_entropy with
 * its default mean over the batch.
 *
 * Per sample, loss = log(sum_j exp(z_j)) - z_label, with the log-sum-exp
 * taken around the largest logit so that no exp() overflows however large
 * the logits are.  Its gradient is softmax(z) - onehot(label), divided by
 * the batch for the mean.  The arithmetic is in double: ten classes cost
 * nothing, and the loss is what a run reports.
 */
#include <math.h>
#include <stddef.h>

#include "nn_int.h"

/* The first largest of n values. */
static int argmax(const float *z, int n) {
  int best = 0;
  for (int j = 1; j < n; j++)
    if (z[j] > z[best]) best = j;
  return best;
}

static float fail(int code) { return (float)code; }

float hvd_nn_softmax_xent(const float *logits, const int *labels, int batch, int classes,
                          float *dlogits, int *correct) {
  if (!logits || !labels)
    return fail(hvd_nn__err(HVD_E_INVALID, "hvd_nn_softmax_xent: %s is NULL",
                            logits ? "labels" : "logits"));
  if (batch <= 0 || classes <= 0)
    return fail(hvd_nn__err(HVD_E_INVALID,
                            "hvd_nn_softmax_xent: batch %d and classes %d must be positive", batch,
                            classes));
  for (int i = 0; i < batch; i++)
    if (labels[i] < 0 || labels[i] >= classes)
      return fail(hvd_nn__err(HVD_E_INVALID,
                              "hvd_nn_softmax_xent: label %d of sample %d is not in [0, %d)",
                              labels[i], i, classes));

  double total = 0.0;
  int right = 0;
  for (int i = 0; i < batch; i++) {
    const float *z = logits + (size_t)i * classes;
    const int top = argmax(z, classes);
    double sum = 0.0;
    for (int j = 0; j < classes; j++) sum += exp((double)z[j] - z[top]);
    const double lse = z[top] + log(sum);
    total += lse - z[labels[i]];
    right += top == labels[i];
    if (dlogits) {
      float *d = dlogits + (size_t)i * classes;
      for (int j = 0; j < classes; j++)
        d[j] = (float)((exp(z[j] - lse) - (j == labels[i])) / batch);
    }
  }
  if (correct) *correct = right;
  return (float)(total / batch);
}
