/*
 * model.c -- a model: a sequence of layers, the registry of their
 * parameters, and the forward and backward passes over a batch.
 *
 * Forward keeps what backward needs: a copy of the input (so the caller
 * may reuse its buffer at once) and every layer's output, in buffers that
 * grow with the batch and are never shrunk.  Backward walks the layers
 * from the last, passing the gradient between them through two buffers
 * used in turn (a layer reads one and writes the other), and reports each
 * layer's parameters to the hook as soon as that layer is done: the
 * moment a distributed optimizer can start reducing them while the layers
 * below are still being differentiated.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

/* One layer and its output for the last forward. */
typedef struct {
  hvd_nn__layer *layer;
  float *out;
  size_t out_cap; /* bytes */
} stage;

struct hvd_nn_model {
  hvd_nn__shape in;  /* per sample */
  hvd_nn__shape out; /* the last layer's, per sample (in while there is none) */
  stage *stages;
  int num_layers;
  hvd_nn_param **params; /* the registry: every layer's, in layer order */
  int num_params;

  int batch; /* of the last forward; 0 when backward has nothing to use */
  float *input;
  size_t input_cap;
  float *grads[2];
  size_t grads_cap[2];
};

/* ---- Building ---- */

hvd_nn_model *hvd_nn_model_new(int in_c, int in_h, int in_w) {
  hvd_nn__shape in = {in_c, in_h, in_w};
  if (in_c <= 0 || in_h <= 0 || in_w <= 0) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_model_new: input shape %dx%dx%d must be positive", in_c,
                in_h, in_w);
    return NULL;
  }
  if (hvd_nn__shape_size(in) < 0) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_model_new: input shape %dx%dx%d is too large", in_c, in_h,
                in_w);
    return NULL;
  }
  hvd_nn_model *m = calloc(1, sizeof *m);
  if (!m) {
    hvd_nn__err(HVD_E_NOMEM, "hvd_nn_model_new: out of memory");
    return NULL;
  }
  m->in = in;
  m->out = in;
  return m;
}

void hvd_nn_model_free(hvd_nn_model *m) {
  if (!m) return;
  for (int i = 0; i < m->num_layers; i++) {
    hvd_nn__layer_free(m->stages[i].layer);
    free(m->stages[i].out);
  }
  free(m->stages);
  free(m->params);
  free(m->input);
  free(m->grads[0]);
  free(m->grads[1]);
  free(m);
}

/* "<layer index>.<kind>.<what>", the names checkpoints and the engine use. */
static char *param_name(const hvd_nn__layer *l, const char *what) {
  int n = snprintf(NULL, 0, "%d.%s.%s", l->index, l->ops->kind, what);
  char *name = malloc((size_t)n + 1);
  if (name) snprintf(name, (size_t)n + 1, "%d.%s.%s", l->index, l->ops->kind, what);
  return name;
}

/* Takes l (freeing it on failure): names its parameters and appends it and
 * them to the model. */
static int append(hvd_nn_model *m, hvd_nn__layer *l) {
  static const char *const what[2] = {"weight", "bias"};
  stage *stages = realloc(m->stages, ((size_t)m->num_layers + 1) * sizeof *stages);
  if (stages) m->stages = stages;
  int ok = stages != NULL;
  if (ok && l->num_params > 0) { /* realloc(p, 0) may free p */
    size_t n = (size_t)m->num_params + (size_t)l->num_params;
    hvd_nn_param **params = realloc(m->params, n * sizeof *params);
    if (params) m->params = params;
    ok = params != NULL;
  }
  for (int i = 0; ok && i < l->num_params; i++)
    ok = (l->params[i].name = param_name(l, what[i])) != NULL;
  if (!ok) {
    hvd_nn__err(HVD_E_NOMEM, "layer %d (%s): out of memory", l->index, l->ops->kind);
    hvd_nn__layer_free(l);
    return HVD_E_NOMEM;
  }
  m->stages[m->num_layers++] = (stage){l, NULL, 0};
  for (int i = 0; i < l->num_params; i++) m->params[m->num_params++] = &l->params[i];
  m->out = l->out;
  m->batch = 0; /* the new layer has no output to go back through */
  return 0;
}

#define CHECK_MODEL(m, where)                                             \
  do {                                                                    \
    if (!(m)) return hvd_nn__err(HVD_E_INVALID, where ": model is NULL"); \
  } while (0)

int hvd_nn_add_dense(hvd_nn_model *m, int out_features) {
  hvd_nn__layer *l;
  CHECK_MODEL(m, "hvd_nn_add_dense");
  HVD_NN__CHECK(hvd_nn__dense_new(&l, m->num_layers, m->out, out_features));
  return append(m, l);
}

int hvd_nn_add_conv2d(hvd_nn_model *m, int out_channels, int kernel, int stride, int padding) {
  hvd_nn__layer *l;
  CHECK_MODEL(m, "hvd_nn_add_conv2d");
  HVD_NN__CHECK(
      hvd_nn__conv2d_new(&l, m->num_layers, m->out, out_channels, kernel, stride, padding));
  return append(m, l);
}

int hvd_nn_add_relu(hvd_nn_model *m) {
  hvd_nn__layer *l;
  CHECK_MODEL(m, "hvd_nn_add_relu");
  HVD_NN__CHECK(hvd_nn__relu_new(&l, m->num_layers, m->out));
  return append(m, l);
}

int hvd_nn_add_maxpool(hvd_nn_model *m, int kernel, int stride) {
  hvd_nn__layer *l;
  CHECK_MODEL(m, "hvd_nn_add_maxpool");
  HVD_NN__CHECK(hvd_nn__maxpool_new(&l, m->num_layers, m->out, kernel, stride));
  return append(m, l);
}

int hvd_nn_model_outputs(const hvd_nn_model *m) {
  CHECK_MODEL(m, "hvd_nn_model_outputs");
  return hvd_nn__shape_size(m->out);
}

/* He-uniform (PyTorch's kaiming_uniform_ with a = 0): the bound keeps the
 * variance of a ReLU network's activations about constant from layer to
 * layer.  One generator runs through the layers in order, and everything
 * is exact IEEE arithmetic, so the bits depend only on seed. */
int hvd_nn_model_init(hvd_nn_model *m, uint64_t seed) {
  CHECK_MODEL(m, "hvd_nn_model_init");
  hvd_nn__rng rng;
  hvd_nn__rng_seed(&rng, seed);
  for (int i = 0; i < m->num_layers; i++) {
    hvd_nn__layer *l = m->stages[i].layer;
    if (l->num_params == 0) continue;
    hvd_nn_param *w = &l->params[HVD_NN__WEIGHT], *b = &l->params[HVD_NN__BIAS];
    float bound = (float)sqrt(6.0 / l->fan_in);
    for (size_t j = 0; j < w->count; j++)
      w->value[j] = (2.0f * hvd_nn__rng_float(&rng) - 1.0f) * bound;
    memset(b->value, 0, b->count * sizeof *b->value);
  }
  return 0;
}

/* ---- The parameter registry ---- */

int hvd_nn_num_params(const hvd_nn_model *m) {
  CHECK_MODEL(m, "hvd_nn_num_params");
  return m->num_params;
}

hvd_nn_param *hvd_nn_param_at(hvd_nn_model *m, int i) {
  if (!m) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_param_at: model is NULL");
    return NULL;
  }
  if (i < 0 || i >= m->num_params) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_param_at: index %d is not in [0, %d)", i, m->num_params);
    return NULL;
  }
  return m->params[i];
}

hvd_nn_param *hvd_nn_param_find(hvd_nn_model *m, const char *name) {
  if (!m || !name) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_param_find: %s is NULL", m ? "name" : "model");
    return NULL;
  }
  for (int i = 0; i < m->num_params; i++)
    if (strcmp(m->params[i]->name, name) == 0) return m->params[i];
  hvd_nn__err(HVD_E_INVALID, "hvd_nn_param_find: no parameter named \"%s\"", name);
  return NULL;
}

/* ---- Forward and backward ---- */

/* Sizes every buffer forward and backward use for batch samples. */
static int reserve_batch(hvd_nn_model *m, int batch) {
  const size_t n = (size_t)batch, f = sizeof(float);
  int largest_dx = 0; /* backward writes d(input) of every layer but the first */
  m->input = hvd_nn__reserve(m->input, &m->input_cap, n, (size_t)hvd_nn__shape_size(m->in), f);
  if (!m->input) goto nomem;
  for (int i = 0; i < m->num_layers; i++) {
    stage *s = &m->stages[i];
    s->out = hvd_nn__reserve(s->out, &s->out_cap, n, (size_t)hvd_nn__shape_size(s->layer->out), f);
    if (!s->out) goto nomem;
    int in = hvd_nn__shape_size(s->layer->in);
    if (i > 0 && in > largest_dx) largest_dx = in;
  }
  for (int i = 0; i < 2; i++) {
    m->grads[i] = hvd_nn__reserve(m->grads[i], &m->grads_cap[i], n, (size_t)largest_dx, f);
    if (!m->grads[i]) goto nomem;
  }
  return 0;
nomem:
  return hvd_nn__err(HVD_E_NOMEM, "hvd_nn_forward: out of memory for a batch of %d", batch);
}

const float *hvd_nn_forward(hvd_nn_model *m, const float *x, int batch) {
  if (!m || !x) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_forward: %s is NULL", m ? "input" : "model");
    return NULL;
  }
  if (batch <= 0) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_forward: batch %d must be positive", batch);
    return NULL;
  }
  if (m->num_layers == 0) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_forward: the model has no layers");
    return NULL;
  }
  m->batch = 0;
  if (reserve_batch(m, batch) < 0) return NULL;
  memcpy(m->input, x, (size_t)batch * (size_t)hvd_nn__shape_size(m->in) * sizeof *x);
  const float *in = m->input;
  for (int i = 0; i < m->num_layers; i++) {
    hvd_nn__layer *l = m->stages[i].layer;
    if (l->ops->forward(l, in, m->stages[i].out, batch) < 0) return NULL;
    in = m->stages[i].out;
  }
  m->batch = batch;
  return in;
}

int hvd_nn_backward(hvd_nn_model *m, const float *dout, hvd_nn_grad_hook hook, void *arg) {
  CHECK_MODEL(m, "hvd_nn_backward");
  if (!dout) return hvd_nn__err(HVD_E_INVALID, "hvd_nn_backward: dout is NULL");
  if (m->batch == 0)
    return hvd_nn__err(HVD_E_INVALID, "hvd_nn_backward: no forward pass to go back through");
  const float *dy = dout;
  for (int i = m->num_layers - 1; i >= 0; i--) {
    hvd_nn__layer *l = m->stages[i].layer;
    const float *x = i > 0 ? m->stages[i - 1].out : m->input;
    float *dx = i > 0 ? m->grads[i % 2] : NULL; /* nobody wants d(model input) */
    l->ops->backward(l, x, m->stages[i].out, dy, dx, m->batch);
    for (int j = 0; hook && j < l->num_params; j++) {
      int rc = hook(&l->params[j], arg);
      if (rc != 0) return rc;
    }
    dy = dx;
  }
  return 0;
}

void hvd_nn_model_zero_grad(hvd_nn_model *m) {
  if (!m) return;
  for (int i = 0; i < m->num_params; i++)
    memset(m->params[i]->grad, 0, m->params[i]->count * sizeof *m->params[i]->grad);
}

/* ---- Shapes for gradient compression ---- */

int hvd_nn__param_matrix(const hvd_nn_model *m, const hvd_nn_param *p, int *rows, int *cols) {
  for (int s = 0; s < m->num_layers; s++) {
    const hvd_nn__layer *l = m->stages[s].layer;
    if (l->num_params == 0 || p != &l->params[HVD_NN__WEIGHT]) continue;
    /* dense (out, in) and conv2d (out, in, k, k) alike: one row per
     * output unit, fan_in columns, as torch views a weight (shape[0], -1). */
    *cols = l->fan_in;
    *rows = (int)(p->count / (size_t)l->fan_in);
    return 1;
  }
  return 0;
}
