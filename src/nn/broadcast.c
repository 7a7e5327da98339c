/*
 * broadcast.c -- the same starting point on every rank: Horovod's
 * broadcast_parameters and broadcast_optimizer_state.
 *
 * Every tensor is enqueued by name before any is waited on, so the engine
 * negotiates them in one or two cycles instead of one per tensor.
 */
#include <stdio.h>
#include <stdlib.h>

#include "nn_int.h"

typedef struct {
  hvd_handle *handles;
  int n, cap;
  int failed;          /* the first enqueue failure, 0 if none */
} batch;

static int batch_init(batch *b, int cap) {
  *b = (batch){0};
  b->handles = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *b->handles);
  b->cap = cap;
  return b->handles ? 0 : hvd_nn__err(HVD_E_NOMEM, "broadcast: %d handles", cap);
}

static void batch_add(batch *b, void *buf, size_t count, hvd_dtype dtype, int root,
                      const char *what, const char *name) {
  if (b->failed || b->n == b->cap) return;
  char full[256];
  snprintf(full, sizeof full, "broadcast.%s.%s", what, name);
  hvd_handle h = hvd_broadcast_async(buf, count, dtype, root, full);
  if (h < 0)
    b->failed = hvd_nn__err_hvd((int)h, "broadcast of '%s' from rank %d", full, root);
  else
    b->handles[b->n++] = h;
}

/* Waits for all, even after a failure (the buffers are the caller's). */
static int batch_wait(batch *b, const char *what) {
  int first = b->failed;
  for (int i = 0; i < b->n; i++) {
    int rc = hvd_wait(b->handles[i]);
    if (rc < 0 && first == 0) first = hvd_nn__err_hvd(rc, "broadcast of the %s", what);
  }
  free(b->handles);
  b->handles = NULL;
  return first;
}

int hvd_nn_broadcast_parameters(hvd_nn_model *m, int root_rank) {
  if (!m) return hvd_nn__err(HVD_E_INVALID, "broadcast_parameters: NULL model");
  int n = hvd_nn_num_params(m);
  batch b;
  HVD_NN__CHECK(batch_init(&b, n));
  for (int i = 0; i < n; i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    batch_add(&b, p->value, p->count, HVD_FLOAT32, root_rank, "param", p->name);
  }
  return batch_wait(&b, "parameters");
}

int hvd_nn_broadcast_optimizer_state(hvd_nn_optimizer *o, int root_rank) {
  if (!o) return hvd_nn__err(HVD_E_INVALID, "broadcast_optimizer_state: NULL optimizer");
  int n = hvd_nn_optimizer_num_slots(o);
  batch b;
  HVD_NN__CHECK(batch_init(&b, n + 2));
  for (int i = 0; i < n; i++) {
    size_t count;
    const char *name;
    float *slot = hvd_nn_optimizer_slot(o, i, &count, &name);
    batch_add(&b, slot, count, HVD_FLOAT32, root_rank, "opt", name);
  }
  batch_add(&b, hvd_nn_optimizer_steps(o), 1, HVD_INT64, root_rank, "opt", "steps");
  batch_add(&b, hvd_nn_optimizer_hypers(o), HVD_NN_HYPERS, HVD_FLOAT64, root_rank, "opt",
            "hypers");
  return batch_wait(&b, "optimizer state");
}
