/*
 * layer.h -- the interface between a model (model.c) and its layers
 * (dense.c, conv2d.c, relu.c, maxpool.c, over layer.c).
 *
 * A layer is a struct that starts with an hvd_nn__layer and a table of
 * operations.  The model owns the activations: it hands each layer its
 * input x and output y, and in backward the gradient dy of y and a buffer
 * dx for the gradient of x.  Each layer owns its parameters (at most a
 * weight and a bias) and whatever scratch memory its kernels need.
 *
 * Tensors are float32, batch first, and every per-sample size fits an int
 * (checked when a layer is made), which is what cblas_sgemm takes.
 */
#ifndef HVD_NN_LAYER_H
#define HVD_NN_LAYER_H

#include <limits.h>
#include <stddef.h>

#include "nn_int.h"

/* A per-sample shape: channels, height, width (c = h = 1 for vectors). */
typedef struct {
  int c, h, w;
} hvd_nn__shape;

typedef struct hvd_nn__layer hvd_nn__layer;

typedef struct {
  const char *kind; /* "dense", "conv2d", ...: in names and messages */

  /* y = layer(x) for batch samples.  Fails only when growing the layer's
   * scratch fails (HVD_E_NOMEM). */
  int (*forward)(hvd_nn__layer *l, const float *x, float *y, int batch);

  /* From dy = d(loss)/dy of the last forward (whose x and y are passed
   * back), ADDS the parameters' gradients into params[].grad and, when dx
   * is not NULL, writes d(loss)/dx there.  Cannot fail: forward has made
   * everything it needs. */
  void (*backward)(hvd_nn__layer *l, const float *x, const float *y, const float *dy, float *dx,
                   int batch);

  /* Frees the layer's own scratch, NULL when it has none (the struct and
   * the parameters are hvd_nn__layer_free's). */
  void (*free)(hvd_nn__layer *l);
} hvd_nn__layer_ops;

#define HVD_NN__WEIGHT 0
#define HVD_NN__BIAS 1

struct hvd_nn__layer {
  const hvd_nn__layer_ops *ops;
  int index;             /* position in the model, for names and messages */
  hvd_nn__shape in, out; /* per sample */
  int fan_in;            /* inputs per output unit, for He initialisation */
  int num_params;        /* 0, or 2: weight and bias */
  hvd_nn_param params[2];
};

/* Layer constructors: 0 and the layer in *lp, or a negative code with the
 * message set (HVD_E_INVALID for a bad shape).  index is only for names
 * and messages. */
int hvd_nn__dense_new(hvd_nn__layer **lp, int index, hvd_nn__shape in, int out_features);
int hvd_nn__conv2d_new(hvd_nn__layer **lp, int index, hvd_nn__shape in, int out_channels,
                       int kernel, int stride, int padding);
int hvd_nn__relu_new(hvd_nn__layer **lp, int index, hvd_nn__shape in);
int hvd_nn__maxpool_new(hvd_nn__layer **lp, int index, hvd_nn__shape in, int kernel, int stride);

/* What the constructors share (layer.c).  hvd_nn__layer_new allocates a
 * zeroed struct of size bytes (which starts with an hvd_nn__layer) and
 * fills in the common fields; hvd_nn__layer_alloc_params gives it a zeroed
 * weight and bias, with their gradients.  Both set the message on failure. */
hvd_nn__layer *hvd_nn__layer_new(size_t size, const hvd_nn__layer_ops *ops, int index,
                                 hvd_nn__shape in, hvd_nn__shape out);
int hvd_nn__layer_alloc_params(hvd_nn__layer *l, size_t weight_count, size_t bias_count);
/* ops->free (if any), the parameters and their names, then the layer. */
void hvd_nn__layer_free(hvd_nn__layer *l);

/* A buffer of at least n * per * size bytes, for contents that need not be
 * kept: buf itself when its capacity *cap (in bytes) is enough, else a new
 * one (buf freed, *cap updated).  On failure, also when the product
 * overflows, frees buf, sets *cap to 0 and returns NULL; the caller writes
 * the message, which can say what the buffer was for. */
void *hvd_nn__reserve(void *buf, size_t *cap, size_t n, size_t per, size_t size);

/* a * b when a, b and the product are in [0, INT_MAX], else -1, so that a
 * chain of products carries a failure to its end. */
static inline int hvd_nn__imul(int a, int b) {
  if (a < 0 || b < 0 || (b != 0 && a > INT_MAX / b)) return -1;
  return a * b;
}

/* 0 when value >= min, else HVD_E_INVALID with a message naming the layer
 * and the argument. */
static inline int hvd_nn__check_arg(int index, const char *kind, const char *name, int value,
                                    int min) {
  if (value >= min) return 0;
  return hvd_nn__err(HVD_E_INVALID, "layer %d (%s): %s is %d, must be at least %d", index, kind,
                     name, value, min);
}

/* Values per sample of a shape, or -1 when that is more than INT_MAX. */
static inline int hvd_nn__shape_size(hvd_nn__shape s) {
  return hvd_nn__imul(hvd_nn__imul(s.c, s.h), s.w);
}

#endif /* HVD_NN_LAYER_H */
