/*
 * staging.c -- device collectives staged through pinned host memory
 * (staging.h says what and why).
 */
#include "gpu/staging.h"

#include <stdio.h>
#include <stdlib.h>

#include "common.h"

struct hvd__staging {
  hvd__copier copier;
  size_t chunk_bytes;
  int slots;
  char *pinned;               /* slots * chunk_bytes */
  hvd__copy_event **copied_in; /* per slot: its chunk reached the host */
  hvd__copy_event *drained;   /* every copy queued so far is done */
  int broken;                 /* copies may still run: pinned memory is theirs */
};

/* One run: the tensor, its chunks and where the pipeline stands. */
typedef struct {
  hvd__staging *s;
  char *dst;
  const char *src;
  size_t bytes, chunk, nchunks;
} run_state;

static void *ctx_of(const hvd__staging *s) { return s->copier.ctx; }

int hvd__staging_create(hvd__staging **out, const hvd__copier *copier, size_t chunk_bytes,
                        int slots) {
  if (chunk_bytes == 0 || slots < 1 || (size_t)slots > SIZE_MAX / chunk_bytes)
    return hvd__err(HVD_E_INVALID, "staging: bad pipeline shape (%d slots of %zu bytes)",
                    slots, chunk_bytes);
  hvd__staging *s = calloc(1, sizeof *s);
  if (s == NULL || (s->copied_in = calloc((size_t)slots, sizeof *s->copied_in)) == NULL) {
    free(s);
    return hvd__err(HVD_E_NOMEM, "staging: out of memory");
  }
  s->copier = *copier;
  s->chunk_bytes = chunk_bytes;
  s->slots = slots;
  const hvd__copier_ops *ops = copier->ops;
  void *pinned = NULL;
  int rc = ops->alloc_pinned(copier->ctx, (size_t)slots * chunk_bytes, &pinned);
  s->pinned = pinned;
  for (int i = 0; rc == 0 && i < slots; i++) rc = ops->event_create(copier->ctx, &s->copied_in[i]);
  if (rc == 0) rc = ops->event_create(copier->ctx, &s->drained);
  if (rc < 0) {
    hvd__err_prefix(rc, "staging: setting up %d slots of %zu bytes", slots, chunk_bytes);
    hvd__staging_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

void hvd__staging_destroy(hvd__staging *s) {
  if (s == NULL) return;
  const hvd__copier_ops *ops = s->copier.ops;
  if (s->drained) ops->event_destroy(ctx_of(s), s->drained);
  for (int i = 0; i < s->slots; i++)
    if (s->copied_in[i]) ops->event_destroy(ctx_of(s), s->copied_in[i]);
  if (s->pinned && !s->broken) ops->free_pinned(ctx_of(s), s->pinned);
  free(s->copied_in);
  free(s);
}

static size_t chunk_len(const run_state *r, size_t k) {
  size_t off = k * r->chunk;
  return r->bytes - off < r->chunk ? r->bytes - off : r->chunk;
}

static char *slot_of(const run_state *r, size_t k) {
  return r->s->pinned + (k % (size_t)r->s->slots) * r->s->chunk_bytes;
}

/* Queues chunk k's copy into its slot and the event that says it arrived. */
static int copy_in(const run_state *r, size_t k) {
  hvd__staging *s = r->s;
  const hvd__copier_ops *ops = s->copier.ops;
  HVD__CHECK(ops->copy_d2h_async(ctx_of(s), slot_of(r, k), r->src + k * r->chunk,
                                 chunk_len(r, k)));
  return ops->event_record(ctx_of(s), s->copied_in[k % (size_t)s->slots]);
}

/* Chunk k: wait for its copy, run the collective on it, queue the copy
 * back, and queue the copy of the chunk that reuses its slot. */
static int step(const run_state *r, size_t k, hvd__staged_fn fn, void *arg,
                uint64_t deadline) {
  hvd__staging *s = r->s;
  const hvd__copier_ops *ops = s->copier.ops;
  size_t off = k * r->chunk, len = chunk_len(r, k);
  HVD__CHECK(ops->event_wait(ctx_of(s), s->copied_in[k % (size_t)s->slots], deadline));
  HVD__CHECK(fn(arg, slot_of(r, k), off, len));
  HVD__CHECK(ops->copy_h2d_async(ctx_of(s), r->dst + off, slot_of(r, k), len));
  if (k + (size_t)s->slots < r->nchunks) HVD__CHECK(copy_in(r, k + (size_t)s->slots));
  return 0;
}

/* Waits until every copy queued so far has run. */
static int drain(hvd__staging *s, uint64_t deadline) {
  const hvd__copier_ops *ops = s->copier.ops;
  HVD__CHECK(ops->event_record(ctx_of(s), s->drained));
  return ops->event_wait(ctx_of(s), s->drained, deadline);
}

static int chunk_failed(const run_state *r, size_t k, int rc) {
  return hvd__err_prefix(rc, "staged chunk %zu of %zu (bytes %zu..%zu)", k, r->nchunks,
                         k * r->chunk, k * r->chunk + chunk_len(r, k));
}

static int pipeline(const run_state *r, hvd__staged_fn fn, void *arg, uint64_t deadline) {
  size_t first = r->nchunks < (size_t)r->s->slots ? r->nchunks : (size_t)r->s->slots;
  for (size_t k = 0; k < first; k++) {
    int rc = copy_in(r, k);
    if (rc < 0) return chunk_failed(r, k, rc);
  }
  for (size_t k = 0; k < r->nchunks; k++) {
    int rc = step(r, k, fn, arg, deadline);
    if (rc < 0) return chunk_failed(r, k, rc);
  }
  return 0;
}

int hvd__staging_run(hvd__staging *s, void *dev_dst, const void *dev_src, size_t bytes,
                     size_t elem_size, hvd__staged_fn fn, void *arg, uint64_t deadline) {
  if (s->broken)
    return hvd__err(HVD_E_ABORTED, "staging: an earlier run's copies did not finish");
  if (elem_size == 0 || bytes % elem_size != 0)
    return hvd__err(HVD_E_INVALID, "staging: %zu bytes is not a whole number of %zu-byte "
                    "elements", bytes, elem_size);
  size_t chunk = s->chunk_bytes / elem_size * elem_size;
  if (chunk == 0)
    return hvd__err(HVD_E_INVALID, "staging: a %zu-byte element does not fit a %zu-byte "
                    "chunk", elem_size, s->chunk_bytes);
  if (bytes == 0) return 0;
  run_state r = {s, dev_dst, dev_src, bytes, chunk, (bytes + chunk - 1) / chunk};
  int rc = pipeline(&r, fn, arg, deadline);
  /* Success or not, no copy may outlive the run: they use the slots. */
  char why[512];
  snprintf(why, sizeof why, "%s", hvd_last_error());
  int drc = drain(s, deadline);
  if (drc < 0) {
    s->broken = 1;
    if (rc == 0) return hvd__err_prefix(drc, "staging: waiting for the last copies");
  }
  return rc < 0 ? hvd__err(rc, "%s", why) : 0;
}
