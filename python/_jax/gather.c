/*
 * gather.c -- allgather and alltoall as XLA FFI handlers.
 *
 * Under XLA every result has a shape fixed when the program is compiled,
 * so hvd.jax gathers equal shapes: every rank of the set contributes the
 * operand's count (allgather) or sends equal blocks to every rank
 * (alltoall).  An eager allgather of unequal shapes (ragged=1) learns the
 * ranks' sizes first (hvd.jax gathers them), so its result's size is the
 * sum of the counts.  hvd allocates what it receives; the handler checks
 * every rank sent what the shape promised, naming the tensor and the
 * counts when not, and copies it into XLA's result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd_jax.h"

/* `each` for a ragged gather: the counts may differ, their sum is known. */
#define RAGGED ((size_t)-1)

/* After a gather: recvcounts (n of them) must all be `each` (or, RAGGED,
 * add up to `total`); else the call fails naming the tensor and every
 * rank's count. */
static void check_counts(jax_pending *p, const char *name, const size_t *recvcounts, int n,
                         size_t each, size_t total) {
  int same = 1;
  size_t sum = 0;
  for (int r = 0; r < n; r++) {
    same &= recvcounts[r] == each;
    sum += recvcounts[r];
  }
  if (same || (each == RAGGED && sum == total)) return;
  char list[512];
  size_t at = 0;
  for (int r = 0; r < n && at < sizeof list; r++)
    at += (size_t)snprintf(list + at, sizeof list - at, "%s%zu", r ? ", " : "", recvcounts[r]);
  if (each == RAGGED)
    jax_pending_fail(p, "tensor '%s': ranks sent element counts [%s], expected %zu in all", name,
                     list, total);
  else
    jax_pending_fail(p,
                     "tensor '%s': ranks sent different element counts [%s], expected %zu from "
                     "each (hvd.jax gathers equal shapes on every rank under jit)",
                     name, list, each);
}

/* One gather call: its operand and result, the set's size, room for 2n
 * counts (what is sent to each rank, what came from each), the pending
 * operation and the buffer hvd allocates for what arrives. */
typedef struct {
  jax_call call;
  frame_tensor in, out;
  int n;
  size_t *counts;
  jax_pending p;
  void *recv;
} gather;

/* Reads the call and prepares g; NULL or the error (nothing to free). */
static XLA_FFI_Error *gather_start(XLA_FFI_CallFrame *frame, gather *g) {
  XLA_FFI_Error *err = jax_call_read(frame, &g->call);
  if (!err) err = frame_arg(frame, 1, &g->in);
  if (!err) err = frame_ret(frame, 0, &g->out);
  if (err) return err;
  g->n = jax_set_size(&g->call);
  g->recv = NULL;
  if (g->n <= 0)
    return frame_error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                       "HorovodInternalError: hvd.jax: tensor '%s': %s", g->call.name,
                       jax_capi()->last_error());
  g->counts = calloc(2 * (size_t)g->n, sizeof(size_t));
  if (!g->counts)
    return frame_error(frame, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "hvd.jax: out of memory");
  if ((err = jax_pending_init(frame, &g->p, 1))) free(g->counts);
  return err;
}

/* Waits for the enqueued operation, checks every rank sent `each`
 * elements (RAGGED: as many as the result holds in all), copies what arrived into the result and
 * frees g's buffers; NULL or the error. */
static XLA_FFI_Error *gather_finish(const XLA_FFI_CallFrame *frame, gather *g, const char *op,
                                    size_t each) {
  const size_t *recvcounts = g->counts + g->n;
  jax_pending *p = &g->p;
  if (!p->failed && p->n == 1) {
    p->n = 0; /* waited here, before the copy */
    if (jax_capi()->wait(p->handles[0]) != 0)
      jax_pending_fail(p, "%s", jax_capi()->last_error());
    else
      check_counts(p, g->call.name, recvcounts, g->n, each, g->out.count);
    if (!p->failed && g->out.count > 0)
      memcpy(g->out.data, g->recv, g->out.count * jax_capi()->dtype_size(g->out.dtype));
  }
  free(g->recv); /* filled by hvd when the operation completed */
  free(g->counts);
  return jax_pending_finish(frame, p, op);
}

/* Every rank's operand, concatenated in rank order. */
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_allgather(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  gather g;
  int64_t ragged = 0;
  if ((err = frame_attr_int(frame, "ragged", &ragged))) return err;
  if ((err = gather_start(frame, &g))) return err;
  if (!ragged && g.out.count != g.in.count * (size_t)g.n)
    jax_pending_fail(&g.p, "tensor '%s': a result of %zu elements for %d x %zu", g.call.name,
                     g.out.count, g.n, g.in.count);
  else
    jax_pending_add(&g.p, jax_capi()->allgather_async(g.in.data, g.in.count, g.in.dtype, &g.recv,
                                                      g.counts + g.n, g.call.name, &g.call.opts));
  return gather_finish(frame, &g, "allgather", ragged ? RAGGED : g.in.count);
}

/* Rows of the operand per rank, from operand 2 (int32, one per rank of
 * the set) into g->counts as element counts; 0, or -1 with p failed. */
static int split_rows(const XLA_FFI_CallFrame *frame, gather *g) {
  frame_tensor splits;
  XLA_FFI_Error *err = frame_arg(frame, 2, &splits);
  int bad = err != NULL;
  frame_error_drop(frame, err);
  if (bad || splits.dtype != HVD_INT32 || splits.count != (size_t)g->n || g->in.ndims == 0) {
    jax_pending_fail(&g->p, "tensor '%s': splits must be %d int32 rows", g->call.name, g->n);
    return -1;
  }
  size_t inner = 1, rows = 0;
  for (int d = 1; d < g->in.ndims; d++) inner *= (size_t)g->in.dims[d];
  for (int r = 0; r < g->n; r++) {
    int32_t k = ((const int32_t *)splits.data)[r];
    if (k < 0) break;
    g->counts[r] = (size_t)k * inner;
    rows += (size_t)k;
  }
  if (rows == (size_t)g->in.dims[0]) return 0;
  jax_pending_fail(&g->p, "tensor '%s': splits do not add up to its %lld rows", g->call.name,
                   (long long)g->in.dims[0]);
  return -1;
}

/* Block r of the operand to rank r; block r of the result from rank r:
 * equal blocks, or (an eager call with a third operand) the rows its
 * splits give, the result holding what the ranks said they send. */
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_alltoall(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  gather g;
  if ((err = gather_start(frame, &g))) return err;
  int ragged = frame->args.size > 2;
  size_t each = ragged ? RAGGED : g.in.count / (size_t)g.n;
  if (ragged) {
    if (split_rows(frame, &g) == 0)
      jax_pending_add(&g.p, jax_capi()->alltoall_async(g.in.data, g.counts, g.in.dtype, &g.recv,
                                                       g.counts + g.n, g.call.name, &g.call.opts));
    return gather_finish(frame, &g, "alltoall", each);
  }
  for (int r = 0; r < g.n; r++) g.counts[r] = each;
  if (g.out.count != g.in.count || g.in.count % (size_t)g.n != 0)
    jax_pending_fail(&g.p, "tensor '%s': %zu elements do not split into %d equal blocks",
                     g.call.name, g.in.count, g.n);
  else
    jax_pending_add(&g.p, jax_capi()->alltoall_async(g.in.data, g.counts, g.in.dtype, &g.recv,
                                                     g.counts + g.n, g.call.name, &g.call.opts));
  return gather_finish(frame, &g, "alltoall", each);
}
