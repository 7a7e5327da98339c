/*
 * dist.c -- the DistributedOptimizer: horovod.torch.DistributedOptimizer's
 * semantics over a hvd_nn optimizer.
 *
 * On the last backward pass of a step, each parameter's gradient is handed
 * to the engine the moment its layer's backward is done (the model's grad
 * hook), so the reduction of the last layers runs while the first layers
 * are still differentiating.  step() waits for all of them, brings
 * compressed ones back to float32 in place, and runs the wrapped
 * optimizer.  Gradients of earlier passes simply accumulate in place
 * (backward adds), which is backward_passes_per_step.
 *
 * PowerSGD and top-k layers (lossy.c) start their first collective in
 * the same hook and finish in synchronize, in two passes over all of them.
 *
 * Scaling follows Horovod: for AVERAGE the engine multiplies by
 * 1/predivide before the sum and by predivide/size after; the 1/N of
 * average_aggregated_gradients rides on the prescale factor too, so no
 * pass over the gradients is spent on it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lossy.h"

typedef struct {
  hvd_nn_param *p;
  char *name;          /* "grad.<param name>": the engine's tensor name */
  uint16_t *wire;      /* the fp16/bf16 gradient, or NULL without them */
  hvd_nn__lossy *lossy; /* PowerSGD or top-k, or NULL: reduced uncompressed */
  hvd_handle handle;
  int in_flight;
} grad;

struct hvd_nn_dist {
  hvd_nn_optimizer *opt;
  hvd_nn_dist_opts o;
  grad *grads;
  int n;
  int passes;          /* backward passes since the last step */
  int synced;          /* this step's reductions are back in the gradients */
  double wait_s;       /* time blocked in synchronize, for the benchmark */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static hvd_dtype wire_dtype(const hvd_nn_dist *d) {
  switch (d->o.compression) {
    case HVD_NN_COMPRESS_FP16: return HVD_FLOAT16;
    case HVD_NN_COMPRESS_BF16: return HVD_BFLOAT16;
    default: return HVD_FLOAT32;
  }
}

static int is_lossy(hvd_nn_compression c) {
  return c == HVD_NN_COMPRESS_POWERSGD || c == HVD_NN_COMPRESS_TOPK;
}

/* PowerSGD and top-k average by construction, and their error feedback
 * assumes the reconstruction is the average. */
static int check_lossy(const hvd_nn_dist_opts *o) {
  const char *what = o->compression == HVD_NN_COMPRESS_POWERSGD ? "PowerSGD" : "top-k";
  if (o->op != HVD_AVERAGE || o->gradient_predivide_factor != 1.0)
    return hvd_nn__err(HVD_E_UNSUPPORTED, "DistributedOptimizer: %s compression averages: it "
                       "takes op average without gradient_predivide_factor (got op %s, factor "
                       "%g)", what, hvd_op_name(o->op), o->gradient_predivide_factor);
  if (o->compression == HVD_NN_COMPRESS_POWERSGD && o->powersgd_rank < 1)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: powersgd_rank %d; expected >= 1",
                       o->powersgd_rank);
  if (o->compression == HVD_NN_COMPRESS_TOPK && !(o->topk_ratio > 0.0 && o->topk_ratio <= 1.0))
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: topk_ratio %g; expected in (0, 1]",
                       o->topk_ratio);
  if (!(o->min_compression_rate >= 0.0))
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: min_compression_rate %g; "
                       "expected >= 0", o->min_compression_rate);
  return 0;
}

static int check_opts(const hvd_nn_dist_opts *o) {
  if (o->op != HVD_AVERAGE && o->op != HVD_SUM && o->op != HVD_ADASUM)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: op %s; expected average, sum "
                       "or adasum", hvd_op_name(o->op));
  if ((unsigned)o->compression > HVD_NN_COMPRESS_TOPK)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: unknown compression %d",
                       (int)o->compression);
  if (o->op == HVD_ADASUM && o->compression != HVD_NN_COMPRESS_NONE)
    return hvd_nn__err(HVD_E_UNSUPPORTED, "DistributedOptimizer: Adasum reduces float32 "
                       "or float64 only, so it cannot be combined with compression");
  if (is_lossy(o->compression)) HVD_NN__CHECK(check_lossy(o));
  if (o->backward_passes_per_step < 1)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: backward_passes_per_step %d; "
                       "expected >= 1", o->backward_passes_per_step);
  if (!(o->gradient_predivide_factor > 0.0))
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: gradient_predivide_factor %g; "
                       "expected > 0", o->gradient_predivide_factor);
  if (o->gradient_predivide_factor != 1.0 && o->op != HVD_AVERAGE)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: gradient_predivide_factor "
                       "applies to op average only (as in Horovod)");
  return 0;
}

static int grad_init(grad *g, hvd_nn_param *p, int compressed) {
  g->p = p;
  size_t len = strlen(p->name) + sizeof "grad.";
  g->name = malloc(len);
  g->wire = compressed && p->count ? malloc(p->count * sizeof *g->wire) : NULL;
  if (!g->name || (compressed && p->count && !g->wire))
    return hvd_nn__err(HVD_E_NOMEM, "DistributedOptimizer: buffers for '%s' (%zu values)",
                       p->name, p->count);
  memcpy(g->name, "grad.", 5);
  memcpy(g->name + 5, p->name, len - 5);
  return 0;
}

hvd_nn_dist *hvd_nn_dist_new(hvd_nn_optimizer *opt, const hvd_nn_dist_opts *opts) {
  static const hvd_nn_dist_opts defaults = HVD_NN_DIST_OPTS_INIT;
  if (!opt) {
    hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: NULL optimizer");
    return NULL;
  }
  const hvd_nn_dist_opts *o = opts ? opts : &defaults;
  if (check_opts(o) < 0) return NULL;
  hvd_nn_model *m = hvd_nn_optimizer_model(opt);
  hvd_nn_dist *d = calloc(1, sizeof *d);
  int n = hvd_nn_num_params(m);
  if (d) d->grads = calloc(n > 0 ? (size_t)n : 1, sizeof *d->grads);
  if (!d || !d->grads) {
    free(d);
    hvd_nn__err(HVD_E_NOMEM, "DistributedOptimizer: %d parameters", n);
    return NULL;
  }
  d->opt = opt;
  d->o = *o;
  d->n = n;
  for (int i = 0; i < n; i++) {
    grad *g = &d->grads[i];
    int halves = o->compression == HVD_NN_COMPRESS_FP16 || o->compression == HVD_NN_COMPRESS_BF16;
    int rc = grad_init(g, hvd_nn_param_at(m, i), halves);
    if (rc == 0 && is_lossy(o->compression))
      g->lossy = hvd_nn__lossy_new(o, m, g->p, i, g->name, &rc);
    if (rc < 0) {
      hvd_nn_dist_free(d);
      return NULL;
    }
  }
  return d;
}

void hvd_nn_dist_reset(hvd_nn_dist *d) {
  if (!d) return;
  /* Buffers the engine still owns must not be touched under it. */
  for (int i = 0; i < d->n; i++) {
    grad *g = &d->grads[i];
    if (g->lossy) hvd_nn__lossy_reset(g->lossy);
    else if (g->in_flight) hvd_wait(g->handle);
    g->in_flight = 0;
  }
  d->passes = 0;
  d->synced = 0;
}

void hvd_nn_dist_free(hvd_nn_dist *d) {
  if (!d) return;
  hvd_nn_dist_reset(d);
  for (int i = 0; i < d->n; i++) {
    free(d->grads[i].name);
    free(d->grads[i].wire);
    hvd_nn__lossy_free(d->grads[i].lossy);
  }
  free(d->grads);
  free(d);
}

/* Hands one gradient to the engine. */
static int enqueue(hvd_nn_dist *d, grad *g) {
  if (g->lossy) {
    float scale = d->o.average_aggregated_gradients ? 1.0f / (float)d->o.backward_passes_per_step
                                                    : 1.0f;
    g->in_flight = 1; /* started: synchronize finishes it, even after a failure */
    return hvd_nn__lossy_start(g->lossy, scale, d->o.process_set);
  }
  hvd_opts opts = HVD_OPTS_INIT;
  opts.process_set = d->o.process_set;
  opts.prescale_factor = 1.0 / d->o.gradient_predivide_factor;
  opts.postscale_factor = d->o.gradient_predivide_factor;
  if (d->o.average_aggregated_gradients)
    opts.prescale_factor /= d->o.backward_passes_per_step;
  void *buf = g->p->grad;
  hvd_dtype dtype = wire_dtype(d);
  if (g->wire) {
    HVD_NN__CHECK(hvd_convert(g->p->grad, HVD_FLOAT32, g->wire, dtype, g->p->count));
    buf = g->wire;
  }
  hvd_handle h = hvd_allreduce_async_opts(buf, buf, g->p->count, dtype, d->o.op, g->name, &opts);
  if (h < 0) return hvd_nn__err_hvd((int)h, "DistributedOptimizer: allreduce of '%s'", g->name);
  g->handle = h;
  g->in_flight = 1;
  return 0;
}

static grad *find_grad(hvd_nn_dist *d, const hvd_nn_param *p) {
  for (int i = 0; i < d->n; i++)
    if (d->grads[i].p == p) return &d->grads[i];
  return NULL;
}

static int on_grad_ready(hvd_nn_param *p, void *arg) {
  hvd_nn_dist *d = arg;
  grad *g = find_grad(d, p);
  if (!g) return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: gradient of '%s', "
                             "a parameter it does not know", p->name);
  return enqueue(d, g);
}

int hvd_nn_dist_backward(hvd_nn_dist *d, const float *dout) {
  if (!d) return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: NULL");
  int want = d->o.backward_passes_per_step;
  if (d->passes >= want)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: backward pass %d of a step "
                       "with backward_passes_per_step %d; call step() first",
                       d->passes + 1, want);
  int last = d->passes + 1 == want;
  hvd_nn_grad_hook hook = last && d->o.overlap ? on_grad_ready : NULL;
  HVD_NN__CHECK(hvd_nn_backward(hvd_nn_optimizer_model(d->opt), dout, hook, d));
  d->passes++;
  /* Without overlap (or if a hook was skipped), what is left goes now. */
  for (int i = 0; last && i < d->n; i++)
    if (!d->grads[i].in_flight) HVD_NN__CHECK(enqueue(d, &d->grads[i]));
  return 0;
}

/* The compressed layers' second and third phases (lossy.c), each over all
 * of them so that their collectives travel together.  After a failure the
 * rest are only waited for. */
static int finish_lossy(hvd_nn_dist *d) {
  int first = 0;
  for (int phase = 0; phase < 2; phase++) {
    for (int i = 0; i < d->n; i++) {
      grad *g = &d->grads[i];
      if (!g->lossy || !g->in_flight) continue;
      int rc = first < 0 ? 0
               : phase == 0 ? hvd_nn__lossy_middle(g->lossy)
                            : hvd_nn__lossy_finish(g->lossy);
      if (rc < 0 && first == 0) first = rc;
      if (first < 0) hvd_nn__lossy_reset(g->lossy);
    }
  }
  for (int i = 0; i < d->n; i++)
    if (d->grads[i].lossy) d->grads[i].in_flight = 0;
  return first;
}

/* Waits for every reduction, even after one fails, so that no buffer is
 * left in the engine's hands; returns the first failure. */
int hvd_nn_dist_synchronize(hvd_nn_dist *d) {
  if (!d) return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: NULL");
  if (d->synced) return 0;
  if (d->passes < d->o.backward_passes_per_step)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: synchronize after %d of %d "
                       "backward passes", d->passes, d->o.backward_passes_per_step);
  int first = 0;
  double t0 = now_s();
  for (int i = 0; i < d->n; i++) {
    grad *g = &d->grads[i];
    if (!g->in_flight || g->lossy) continue;
    int rc = hvd_wait(g->handle);
    g->in_flight = 0;
    if (rc < 0 && first == 0)
      first = hvd_nn__err_hvd(rc, "DistributedOptimizer: allreduce of '%s'", g->name);
    if (rc == 0 && g->wire)
      hvd_convert(g->wire, wire_dtype(d), g->p->grad, HVD_FLOAT32, g->p->count);
  }
  if (is_lossy(d->o.compression)) {
    int rc = finish_lossy(d);
    if (first == 0) first = rc;
  }
  d->wait_s += now_s() - t0;
  /* A failed step is dropped: its gradients are never applied, and the
   * next step starts from its first backward pass. */
  if (first == 0)
    d->synced = 1;
  else
    d->passes = 0;
  return first;
}

int hvd_nn_dist_step(hvd_nn_dist *d) {
  if (!d) return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: NULL");
  if (d->passes < d->o.backward_passes_per_step)
    return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: step after %d of %d backward "
                       "passes", d->passes, d->o.backward_passes_per_step);
  HVD_NN__CHECK(hvd_nn_dist_synchronize(d));
  HVD_NN__CHECK(hvd_nn_optimizer_step(d->opt));
  d->passes = 0;
  d->synced = 0;
  return 0;
}

double hvd_nn_dist_wait_seconds(hvd_nn_dist *d) {
  if (!d) return 0.0;
  double s = d->wait_s;
  d->wait_s = 0.0;
  return s;
}
