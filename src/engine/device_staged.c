/*
 * device_staged.c -- the staged path for tensors in device memory (the
 * hvd__device_staged table, device.h): staged through pinned host memory,
 * chunk by chunk, each chunk's host collective run as soon as its copy
 * arrives while the next chunks are still being copied (gpu/staging.c),
 * then copied back.
 *
 * Every rank of a response first agrees that it has a working copier (one
 * small allreduce): a rank without a GPU fails every rank's tensor with
 * its reason instead of leaving the others in a collective it never
 * joins.  The copier is CUDA's for the device the first device tensor
 * named (one device per process, as Horovod pins one), or the one a test
 * set with hvd__device_set_copier.
 *
 * Allreduces that negotiation fused (or a group's) are copied into a
 * device fusion buffer and staged as one tensor; chunk k is reduced by
 * hvd's host allreduce of that chunk, so results are bitwise identical on
 * every rank, and equal to the host path's where the sums are exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/dispatch.h"
#include "env.h"
#include "reduce.h"
#include "device.h"
#include "engine_int.h"
#include "gpu/staging.h"
#ifdef HVD_WITH_CUDA
#include "gpu/cuda/copier_cuda.h"
#endif

#define SLOTS 3 /* chunks in flight; their size: HOROVOD_STAGING_CHUNK_BYTES */
#define DEADLINE_MS 600000 /* one tensor's staging, copies and collectives */

/* ---- the copier ---- */

/* Frees the pipeline, the copier and the fusion buffer. */
static void staged_close(hvd__device *d, int broken) {
  HVD__UNUSED(broken);
  hvd__staging_destroy(d->staging);
  d->staging = NULL;
  if (d->fusion) d->copier.ops->free_device(d->copier.ctx, d->fusion);
  if (d->done) d->copier.ops->event_destroy(d->copier.ctx, d->done);
  d->fusion = NULL, d->fusion_cap = 0, d->done = NULL;
#ifdef HVD_WITH_CUDA
  if (d->copier_cuda) hvd__copier_cuda_destroy(&d->copier);
#endif
  d->copier_cuda = 0;
}

/* This rank's copier for `device`, with its pipeline and event, made at
 * the first device tensor; a failure leaves none of them (the next device
 * tensor tries again). */
static int open_copier(hvd__device *d, int device) {
  if (d->staging) return 0;
  const hvd__copier *test = hvd__device_test_copier();
  if (test) {
    d->copier = *test;
  } else {
#ifdef HVD_WITH_CUDA
    HVD__CHECK(hvd__copier_cuda_create(&d->copier, device));
    d->copier_cuda = 1;
#else
    return hvd__err(HVD_E_UNSUPPORTED, "device %d: this libhvd was built without CUDA "
                    "(HVD_WITH_CUDA)", device);
#endif
  }
  long chunk = 0;
  int rc = hvd__param_int(HVD_P_STAGING_CHUNK_BYTES, &chunk);
  if (rc == 0) rc = d->copier.ops->event_create(d->copier.ctx, &d->done);
  if (rc == 0) rc = hvd__staging_create(&d->staging, &d->copier, (size_t)chunk, SLOTS);
  if (rc < 0) staged_close(d, 0); /* sets no error: the message stays */
  return rc;
}

/* Every rank of c has a copier?  The failing rank says why, the others
 * name it; *fatal is 0 then (every rank knows, nothing was sent), 1 when
 * the agreement itself failed. */
static int agree_on_copier(hvd__device *d, hvd_comm *c, const response *r, int *fatal) {
  const entry *mine = r->items[0]->mine;
  int rc = open_copier(d, mine ? mine->w.device : 0);
  return hvd__coll_agree(c, rc, "has no copier for device memory", fatal);
}

/* ---- running ---- */

/* The copies queued from now on wait for the work the caller queued on
 * its stream before handing p over (hvd_opts.stream). */
static int wait_ready(hvd__device *d, const pending *p) {
  void *ready = p->mine ? p->mine->w.ready : NULL;
  if (!ready || !d->copier.ops->wait_ready) return 0;
  return d->copier.ops->wait_ready(d->copier.ctx, ready);
}

typedef struct {
  hvd_comm *c;
  const hvd_request *req;
  size_t esize;
} chunk_job;

/* One chunk of an allreduce, in place in pinned memory: the host path's
 * prescale, allreduce and postscale. */
static int allreduce_chunk(void *arg, void *host, size_t offset, size_t bytes) {
  const chunk_job *j = arg;
  hvd_dtype dtype = (hvd_dtype)j->req->dtype;
  hvd_op rop = (hvd_op)j->req->op;
  size_t n = bytes / j->esize;
  HVD__UNUSED(offset);
  hvd__reduce_scale(host, n, dtype, j->req->prescale);
  int rc = hvd__coll_allreduce(j->c, host, n, dtype, rop);
  if (rc == 0) hvd__reduce_scale(host, n, dtype, j->req->postscale);
  return rc;
}

static int broadcast_chunk(void *arg, void *host, size_t offset, size_t bytes) {
  const chunk_job *j = arg;
  HVD__UNUSED(offset);
  return hvd__coll_broadcast(j->c, host, bytes, j->req->root);
}

static int run_item(hvd__device *d, hvd_timeline *tl, hvd_comm *c, const pending *p) {
  const entry *en = p->mine; /* every rank submitted (hvd__device_check) */
  chunk_job j = {c, &p->req, hvd_dtype_size((hvd_dtype)p->req.dtype)};
  size_t bytes = p->req.count * j.esize;
  int bcast = p->req.type == HVD_REQ_BROADCAST;
  const void *src = bcast ? en->w.recvbuf : en->w.sendbuf;
  hvd__timeline_begin(tl, p->req.name, bcast ? "STAGED_BROADCAST" : "STAGED_ALLREDUCE", NULL);
  int rc = wait_ready(d, p);
  if (rc == 0)
    rc = hvd__staging_run(d->staging, en->w.recvbuf, src, bytes, j.esize,
                          bcast ? broadcast_chunk : allreduce_chunk, &j,
                          hvd__now_ms() + DEADLINE_MS);
  hvd__timeline_end(tl, p->req.name);
  return rc < 0 ? hvd__err_prefix(rc, "%s '%s'", hvd__req_type_name(p->req.type), p->req.name)
                : 0;
}

/* The device fusion buffer, grown to at least `bytes`. */
static int fusion_buffer(hvd__device *d, size_t bytes) {
  if (bytes <= d->fusion_cap) return 0;
  const hvd__copier_ops *ops = d->copier.ops;
  if (d->fusion) ops->free_device(d->copier.ctx, d->fusion);
  d->fusion = NULL, d->fusion_cap = 0;
  HVD__CHECK(ops->alloc_device(d->copier.ctx, bytes, &d->fusion));
  d->fusion_cap = bytes;
  return 0;
}

/* Waits for every copy queued so far. */
static int settle(hvd__device *d, uint64_t deadline) {
  HVD__CHECK(d->copier.ops->event_record(d->copier.ctx, d->done));
  return d->copier.ops->event_wait(d->copier.ctx, d->done, deadline);
}

/* The fusion buffer's last copy out, then a wait for every copy so far. */
static int copy_out(hvd__device *d, void *dst, const void *src, size_t bytes, uint64_t deadline) {
  if (bytes) HVD__CHECK(d->copier.ops->copy_d2d_async(d->copier.ctx, dst, src, bytes));
  return settle(d, deadline);
}

/* Several allreduces of one dtype, op and scales (fused by negotiation,
 * or a group): copied into the device fusion buffer one after the other,
 * staged as one tensor, copied back out -- every copy on the copier's
 * one queue, so each waits for the one before it. */
static int run_fused(hvd__device *d, hvd_timeline *tl, hvd_comm *c, const response *r) {
  const hvd_request *req = &r->items[0]->req;
  chunk_job j = {c, req, hvd_dtype_size((hvd_dtype)req->dtype)};
  const hvd__copier_ops *ops = d->copier.ops;
  void *ctx = d->copier.ctx;
  size_t total = 0, off = 0;
  for (int i = 0; i < r->n; i++) total += r->items[i]->req.count * j.esize;
  HVD__CHECK(fusion_buffer(d, total));
  char *fb = d->fusion;
  for (int i = 0; i < r->n; i++) {
    const pending *p = r->items[i];
    size_t bytes = p->req.count * j.esize;
    hvd__timeline_begin(tl, p->req.name, "STAGED_ALLREDUCE", NULL);
    HVD__CHECK(wait_ready(d, p));
    if (bytes) HVD__CHECK(ops->copy_d2d_async(ctx, fb + off, p->mine->w.sendbuf, bytes));
    off += bytes;
  }
  uint64_t deadline = hvd__now_ms() + DEADLINE_MS;
  int rc = hvd__staging_run(d->staging, fb, fb, total, j.esize, allreduce_chunk, &j, deadline);
  off = 0;
  for (int i = 0; rc == 0 && i < r->n - 1; i++) {
    const pending *p = r->items[i];
    size_t bytes = p->req.count * j.esize;
    if (bytes) rc = ops->copy_d2d_async(ctx, p->mine->w.recvbuf, fb + off, bytes);
    off += bytes;
  }
  const pending *last = r->items[r->n - 1];
  if (rc == 0) rc = copy_out(d, last->mine->w.recvbuf, fb + off, last->req.count * j.esize,
                             deadline);
  for (int i = 0; i < r->n; i++) hvd__timeline_end(tl, r->items[i]->req.name);
  return rc < 0 ? hvd__err_prefix(rc, "allreduce of %d fused tensors ('%s', ...)", r->n,
                                  req->name)
                : 0;
}

/* A reducescatter staged as an allreduce of the whole tensor in the
 * fusion buffer, this rank keeping its share: the same result as the host
 * reducescatter's where sums are exact, for twice its traffic (a staged
 * reducescatter proper is next, docs/gpu.md). */
static int run_reducescatter(hvd__device *d, hvd_timeline *tl, hvd_comm *c, const pending *p) {
  chunk_job j = {c, &p->req, hvd_dtype_size((hvd_dtype)p->req.dtype)};
  size_t count = p->req.count, bytes = count * j.esize;
  size_t own_at = hvd__split_offset(count, c->size, c->rank) * j.esize;
  size_t own = hvd__split_count(count, c->size, c->rank) * j.esize;
  HVD__CHECK(fusion_buffer(d, bytes));
  char *fb = d->fusion;
  uint64_t deadline = hvd__now_ms() + DEADLINE_MS;
  hvd__timeline_begin(tl, p->req.name, "STAGED_REDUCESCATTER", NULL);
  int rc = wait_ready(d, p);
  if (rc == 0 && bytes)
    rc = d->copier.ops->copy_d2d_async(d->copier.ctx, fb, p->mine->w.sendbuf, bytes);
  if (rc == 0) rc = hvd__staging_run(d->staging, fb, fb, bytes, j.esize, allreduce_chunk, &j,
                                     deadline);
  if (rc == 0) rc = copy_out(d, p->mine->w.recvbuf, fb + own_at, own, deadline);
  hvd__timeline_end(tl, p->req.name);
  return rc < 0 ? hvd__err_prefix(rc, "reducescatter '%s'", p->req.name) : 0;
}

/* ---- allgather, alltoall: whole tensors through host memory ----
 * Their results have sizes only the collective learns, so they are not
 * pipelined: the input is copied to the host, the host collective runs,
 * and its result is copied into device memory the copier allocates
 * (cudaMalloc), which the caller owns as it owns the host path's
 * malloc()ed result. */

/* A copy that missed its deadline may still write `host`: it is left
 * allocated rather than freed under the copy. */
static void free_unless_copying(void *host, int rc) {
  if (rc != HVD_E_TIMEOUT) free(host);
}

/* p's input (bytes) in malloc()ed host memory. */
static int input_to_host(hvd__device *d, const pending *p, size_t bytes, void **out,
                         uint64_t deadline) {
  char *host = malloc(bytes ? bytes : 1);
  if (!host) return hvd__err(HVD_E_NOMEM, "%zu bytes of host memory for the input", bytes);
  int rc = wait_ready(d, p);
  if (rc == 0 && bytes)
    rc = d->copier.ops->copy_d2h_async(d->copier.ctx, host, p->mine->w.sendbuf, bytes);
  if (rc == 0) rc = settle(d, deadline);
  if (rc < 0) return free_unless_copying(host, rc), rc;
  *out = host;
  return 0;
}

/* The host result in new device memory (NULL when empty, as on the host). */
static int result_to_device(hvd__device *d, const void *host, size_t bytes, void **out,
                            uint64_t deadline) {
  const hvd__copier_ops *ops = d->copier.ops;
  *out = NULL;
  if (bytes == 0) return 0;
  HVD__CHECK(ops->alloc_device(d->copier.ctx, bytes, out));
  int rc = ops->copy_h2d_async(d->copier.ctx, *out, host, bytes);
  if (rc == 0) rc = settle(d, deadline);
  if (rc < 0 && rc != HVD_E_TIMEOUT) ops->free_device(d->copier.ctx, *out);
  if (rc < 0) *out = NULL;
  return rc;
}

static int run_gather(hvd__device *d, hvd_timeline *tl, hvd_comm *c, const pending *p) {
  entry *en = p->mine; /* every rank submitted (hvd__device_check) */
  int type = p->req.type;
  size_t esize = hvd_dtype_size((hvd_dtype)p->req.dtype);
  size_t count = type == HVD_REQ_ALLTOALL ? hvd__counts_sum(en->sendcounts, c->size)
                                          : en->w.local_count;
  uint64_t deadline = hvd__now_ms() + DEADLINE_MS;
  size_t *counts = calloc((size_t)c->size, sizeof *counts);
  void *send = NULL, *out = NULL, *dev = NULL;
  if (!counts) return hvd__err(HVD_E_NOMEM, "allocating %d counts", c->size);
  hvd__timeline_begin(tl, p->req.name, type == HVD_REQ_ALLTOALL ? "STAGED_ALLTOALL"
                                                                   : "STAGED_ALLGATHER", NULL);
  int rc = input_to_host(d, p, count * esize, &send, deadline);
  if (rc == 0) rc = hvd__gather(c, type, send, count, en->sendcounts, esize, &out, counts);
  if (rc == 0)
    rc = result_to_device(d, out, hvd__counts_sum(counts, c->size) * esize, &dev, deadline);
  hvd__timeline_end(tl, p->req.name);
  if (rc == 0) hvd__gather_deliver(en, dev, counts, c->size);
  free_unless_copying(out, rc);
  free(send);
  free(counts);
  return rc < 0 ? hvd__err_prefix(rc, "%s '%s'", hvd__req_type_name(type), p->req.name) : 0;
}

static int run_one(hvd__device *d, hvd_timeline *tl, hvd_comm *c, const pending *p) {
  switch (p->req.type) {
    case HVD_REQ_REDUCESCATTER: return run_reducescatter(d, tl, c, p);
    case HVD_REQ_ALLGATHER:
    case HVD_REQ_ALLTOALL: return run_gather(d, tl, c, p);
    default: return run_item(d, tl, c, p);
  }
}

static int staged_execute(hvd__device *d, response *r, hvd_comm *c, hvd_timeline *tl,
                          int *fatal) {
  int type = r->items[0]->req.type;
  HVD__CHECK(agree_on_copier(d, c, r, fatal));
  *fatal = 1;
  if (r->n > 1 && type == HVD_REQ_ALLREDUCE) return run_fused(d, tl, c, r);
  for (int i = 0; i < r->n; i++) HVD__CHECK(run_one(d, tl, c, r->items[i]));
  return 0;
}

const hvd__device_ops hvd__device_staged = {"staged", NULL, staged_execute, staged_close};
