/*
 * lossy.c -- one parameter's gradient through PowerSGD or top-k and hvd's
 * collectives, for the DistributedOptimizer.
 *
 * The reduction runs in three phases so that every layer's collectives
 * are in flight together (and fused by the engine), as in torch's hook:
 *
 *   start   (as backward finishes the layer)
 *           PowerSGD: M = grad + error, P = M Q, allreduce P (average)
 *           top-k:    M = grad + error, pick k, allgather (index, value)
 *   middle  (synchronize, first pass over the layers)
 *           PowerSGD: wait for P, orthogonalise, Q = M^T P, allreduce Q
 *   finish  (synchronize, second pass)
 *           PowerSGD: wait for Q, grad = P Q^T, error = M - grad
 *           top-k:    wait, grad = (sum of every rank's pairs) / size,
 *                     error = M without the values this rank sent
 *
 * Every rank computes the result from the same reduced bytes in the same
 * order, so the gradients are bitwise identical everywhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lossy.h"

typedef struct {
  size_t k;
  float *m;        /* grad + error */
  float *error;
  uint32_t *idx;   /* this step's selection */
  int32_t *pairs;  /* 2k words: index, value bits */
  void *gathered;  /* every rank's pairs, from the engine's allgather */
  size_t *counts;  /* per rank, for the allgather */
} topk_state;

struct hvd_nn__lossy {
  hvd_nn_compression kind;
  hvd_nn_param *p;
  int process_set;
  char *name_p, *name_q; /* engine tensor names */
  hvd_handle handle;
  int in_flight;
  hvd_nn__psgd psgd;
  topk_state topk;
};

static char *concat(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *s = malloc(la + lb + 1);
  if (s) {
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
  }
  return s;
}

/* Whether compression gains on p, as torch's _should_compress: what is
 * sent, times min_rate, must be less than the values themselves. */
static int worth_it(const hvd_nn_dist_opts *o, hvd_nn_model *m, hvd_nn_param *p) {
  int rows, cols;
  if (!hvd_nn__param_matrix(m, p, &rows, &cols)) return 0; /* a vector */
  double sent;
  if (o->compression == HVD_NN_COMPRESS_POWERSGD) {
    int r = o->powersgd_rank < rows ? o->powersgd_rank : rows;
    if (cols < r) r = cols;
    sent = ((double)rows + cols) * r;
  } else {
    sent = 2.0 * (double)hvd_nn__topk_count(p->count, o->topk_ratio);
  }
  return sent * o->min_compression_rate < (double)p->count;
}

static int topk_init(topk_state *t, size_t n, double ratio) {
  t->k = hvd_nn__topk_count(n, ratio);
  t->m = malloc(n * sizeof *t->m);
  t->error = calloc(n, sizeof *t->error);
  t->idx = malloc(t->k * sizeof *t->idx);
  t->pairs = malloc(2 * t->k * sizeof *t->pairs);
  return t->m && t->error && t->idx && t->pairs ? 0 : HVD_E_NOMEM;
}

static void topk_free(topk_state *t) {
  free(t->m);
  free(t->error);
  free(t->idx);
  free(t->pairs);
  free(t->gathered);
  free(t->counts);
}

void hvd_nn__lossy_free(hvd_nn__lossy *c) {
  if (!c) return;
  hvd_nn__lossy_reset(c);
  hvd_nn__psgd_free(&c->psgd);
  topk_free(&c->topk);
  free(c->name_p);
  free(c->name_q);
  free(c);
}

hvd_nn__lossy *hvd_nn__lossy_new(const hvd_nn_dist_opts *o, hvd_nn_model *m, hvd_nn_param *p,
                                 int index, const char *name, int *rc) {
  *rc = 0;
  if (!worth_it(o, m, p)) return NULL;
  hvd_nn__lossy *c = calloc(1, sizeof *c);
  if (!c) {
    *rc = hvd_nn__err(HVD_E_NOMEM, "DistributedOptimizer: compressor of '%s'", p->name);
    return NULL;
  }
  c->kind = o->compression;
  c->p = p;
  c->process_set = o->process_set;
  int ok;
  if (c->kind == HVD_NN_COMPRESS_POWERSGD) {
    int rows, cols;
    hvd_nn__param_matrix(m, p, &rows, &cols);
    /* Parameters get distinct Qs, all derived from the one shared seed. */
    uint64_t seed = o->compression_seed + 0x9E3779B97F4A7C15ULL * (uint64_t)(index + 1);
    ok = hvd_nn__psgd_init(&c->psgd, rows, cols, o->powersgd_rank, seed) == 0;
    c->name_p = concat(name, ".powersgd.p");
    c->name_q = concat(name, ".powersgd.q");
  } else {
    ok = topk_init(&c->topk, p->count, o->topk_ratio) == 0;
    c->name_p = concat(name, ".topk");
  }
  if (!ok || !c->name_p || (c->kind == HVD_NN_COMPRESS_POWERSGD && !c->name_q)) {
    hvd_nn__lossy_free(c);
    *rc = hvd_nn__err(HVD_E_NOMEM, "DistributedOptimizer: compressor of '%s' (%zu values)",
                      p->name, p->count);
    return NULL;
  }
  return c;
}

static int enqueued(hvd_nn__lossy *c, hvd_handle h, const char *name) {
  if (h < 0) return hvd_nn__err_hvd((int)h, "DistributedOptimizer: %s", name);
  c->handle = h;
  c->in_flight = 1;
  return 0;
}

static int wait_for(hvd_nn__lossy *c, const char *name) {
  if (!c->in_flight) return 0;
  int rc = hvd_wait(c->handle);
  c->in_flight = 0;
  return rc < 0 ? hvd_nn__err_hvd(rc, "DistributedOptimizer: %s", name) : 0;
}

static int allreduce_avg(hvd_nn__lossy *c, float *buf, size_t count, const char *name) {
  hvd_opts opts = HVD_OPTS_INIT;
  opts.process_set = c->process_set;
  hvd_handle h = hvd_allreduce_async_opts(buf, buf, count, HVD_FLOAT32, HVD_AVERAGE, name, &opts);
  return enqueued(c, h, name);
}

static int topk_start(hvd_nn__lossy *c, float scale) {
  topk_state *t = &c->topk;
  const float *g = c->p->grad;
  for (size_t i = 0; i < c->p->count; i++) t->m[i] = scale * g[i] + t->error[i];
  HVD_NN__CHECK(hvd_nn__topk_select(t->m, c->p->count, t->k, t->idx));
  for (size_t i = 0; i < t->k; i++) {
    t->pairs[2 * i] = (int32_t)t->idx[i];
    memcpy(&t->pairs[2 * i + 1], &t->m[t->idx[i]], sizeof(float));
  }
  free(t->gathered);
  t->gathered = NULL;
  /* One count per rank of the job as it is now (elastic jobs change size). */
  size_t *counts = realloc(t->counts, (size_t)hvd_size() * sizeof *counts);
  if (!counts) return hvd_nn__err(HVD_E_NOMEM, "DistributedOptimizer: %s: counts", c->name_p);
  t->counts = counts;
  hvd_opts opts = HVD_OPTS_INIT;
  opts.process_set = c->process_set;
  hvd_handle h = hvd_allgather_async(t->pairs, 2 * t->k, HVD_INT32, &t->gathered, t->counts,
                                     c->name_p, &opts);
  return enqueued(c, h, c->name_p);
}

int hvd_nn__lossy_start(hvd_nn__lossy *c, float scale, int process_set) {
  c->process_set = process_set;
  if (c->kind == HVD_NN_COMPRESS_TOPK) return topk_start(c, scale);
  hvd_nn__psgd_project(&c->psgd, c->p->grad, scale);
  return allreduce_avg(c, c->psgd.p, (size_t)c->psgd.rows * (size_t)c->psgd.rank, c->name_p);
}

int hvd_nn__lossy_middle(hvd_nn__lossy *c) {
  if (c->kind == HVD_NN_COMPRESS_TOPK) return 0;
  HVD_NN__CHECK(wait_for(c, c->name_p));
  hvd_nn__psgd_orthogonalize(c->psgd.p, c->psgd.rows, c->psgd.rank);
  hvd_nn__psgd_backproject(&c->psgd);
  return allreduce_avg(c, c->psgd.q, (size_t)c->psgd.cols * (size_t)c->psgd.rank, c->name_q);
}

/* Adds every rank's pairs, in rank order, and averages.  The pairs came
 * over the network: an index out of range or a short count is an error. */
static int topk_finish(hvd_nn__lossy *c) {
  topk_state *t = &c->topk;
  HVD_NN__CHECK(wait_for(c, c->name_p));
  size_t n = c->p->count;
  int size = hvd_process_set_size(c->process_set);
  float *g = c->p->grad;
  memset(g, 0, n * sizeof *g);
  const int32_t *pairs = t->gathered;
  size_t at = 0;
  for (int r = 0; r < size; r++) {
    if (t->counts[r] != 2 * t->k)
      return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: %s: rank %d sent %zu words; "
                         "expected %zu", c->name_p, r, t->counts[r], 2 * t->k);
    for (size_t i = 0; i < t->k; i++, at += 2) {
      uint32_t idx = (uint32_t)pairs[at];
      float v;
      memcpy(&v, &pairs[at + 1], sizeof v);
      if (idx >= n)
        return hvd_nn__err(HVD_E_INVALID, "DistributedOptimizer: %s: rank %d sent index %u; "
                           "the tensor has %zu values", c->name_p, r, idx, n);
      g[idx] += v;
    }
  }
  float inv = 1.0f / (float)size;
  for (size_t i = 0; i < n; i++) g[i] *= inv;
  memcpy(t->error, t->m, n * sizeof *t->error);
  for (size_t i = 0; i < t->k; i++) t->error[t->idx[i]] = 0.0f;
  return 0;
}

int hvd_nn__lossy_finish(hvd_nn__lossy *c) {
  if (c->kind == HVD_NN_COMPRESS_TOPK) return topk_finish(c);
  HVD_NN__CHECK(wait_for(c, c->name_q));
  hvd_nn__psgd_decompress(&c->psgd, c->p->grad);
  return 0;
}

void hvd_nn__lossy_reset(hvd_nn__lossy *c) {
  if (c->in_flight) hvd_wait(c->handle);
  c->in_flight = 0;
}
