/*
 * layer.c -- what every layer shares (layer.h): making one, its
 * parameters, freeing it, and the scratch buffers its kernels grow.  The
 * layers (dense.c, conv2d.c, relu.c, maxpool.c) are built over it, and the
 * model (model.c) over them.
 */
#include <stdint.h>
#include <stdlib.h>

#include "layer.h"

hvd_nn__layer *hvd_nn__layer_new(size_t size, const hvd_nn__layer_ops *ops, int index,
                                 hvd_nn__shape in, hvd_nn__shape out) {
  hvd_nn__layer *l = calloc(1, size);
  if (!l) {
    hvd_nn__err(HVD_E_NOMEM, "layer %d (%s): out of memory", index, ops->kind);
    return NULL;
  }
  l->ops = ops;
  l->index = index;
  l->in = in;
  l->out = out;
  return l;
}

int hvd_nn__layer_alloc_params(hvd_nn__layer *l, size_t weight_count, size_t bias_count) {
  const size_t counts[2] = {weight_count, bias_count};
  l->num_params = 2; /* first, so that hvd_nn__layer_free frees a partial set */
  for (int i = 0; i < 2; i++) {
    hvd_nn_param *p = &l->params[i];
    p->count = counts[i];
    p->value = calloc(counts[i], sizeof *p->value);
    p->grad = calloc(counts[i], sizeof *p->grad);
    if (!p->value || !p->grad)
      return hvd_nn__err(HVD_E_NOMEM, "layer %d (%s): out of memory for %zu parameters", l->index,
                         l->ops->kind, counts[i]);
  }
  return 0;
}

void hvd_nn__layer_free(hvd_nn__layer *l) {
  if (!l) return;
  if (l->ops->free) l->ops->free(l);
  for (int i = 0; i < l->num_params; i++) {
    free((char *)l->params[i].name);
    free(l->params[i].value);
    free(l->params[i].grad);
  }
  free(l);
}

void *hvd_nn__reserve(void *buf, size_t *cap, size_t n, size_t per, size_t size) {
  const int overflow = (per != 0 && n > SIZE_MAX / per) || (size != 0 && n * per > SIZE_MAX / size);
  const size_t bytes = overflow ? 0 : n * per * size;
  if (!overflow && buf && bytes <= *cap) return buf;
  free(buf);
  buf = overflow ? NULL : malloc(bytes ? bytes : 1);
  *cap = buf ? bytes : 0;
  return buf;
}
