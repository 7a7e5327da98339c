/*
 * gather.c -- allgather and alltoall as XLA FFI handlers.
 *
 * Under XLA every result has a shape fixed when the program is compiled,
 * so hvd.jax gathers equal shapes: every rank of the set contributes the
 * operand's count (allgather) or sends equal blocks to every rank
 * (alltoall).  hvd allocates what it receives; the handler checks every
 * rank sent what the shape promised, naming the tensor and the counts
 * when not, and copies it into XLA's result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd_jax.h"

/* After a gather: recvcounts (n of them) must all be `each`; else the
 * call fails naming the tensor and every rank's count. */
static void check_counts(jax_pending *p, const char *name, const size_t *recvcounts, int n,
                         size_t each) {
  int same = 1;
  for (int r = 0; r < n; r++) same &= recvcounts[r] == each;
  if (same) return;
  char list[512];
  size_t at = 0;
  for (int r = 0; r < n && at < sizeof list; r++)
    at += (size_t)snprintf(list + at, sizeof list - at, "%s%zu", r ? ", " : "", recvcounts[r]);
  jax_pending_fail(p,
                   "tensor '%s': ranks sent different element counts [%s], expected %zu from "
                   "each (hvd.jax gathers equal shapes on every rank)",
                   name, list, each);
}

/* Waits for the one operation p holds, checks the counts, copies the
 * gathered buffer into the result and frees it; NULL or the error. */
static XLA_FFI_Error *finish_copy(const XLA_FFI_CallFrame *frame, jax_pending *p,
                                  const char *op, const char *name, void **recv,
                                  const size_t *recvcounts, int n, size_t each,
                                  const frame_tensor *out) {
  if (!p->failed && p->n == 1) {
    p->n = 0; /* waited here, before the copy */
    if (jax_capi()->wait(p->handles[0]) != 0)
      jax_pending_fail(p, "%s", jax_capi()->last_error());
    else
      check_counts(p, name, recvcounts, n, each);
    if (!p->failed && out->count > 0)
      memcpy(out->data, *recv, out->count * jax_capi()->dtype_size(out->dtype));
  }
  free(*recv); /* filled by hvd when the operation completed */
  return jax_pending_finish(frame, p, op);
}

/* Reads the operand and result and sizes the set; NULL or the error. */
static XLA_FFI_Error *read_gather(XLA_FFI_CallFrame *frame, jax_call *call, frame_tensor *in,
                                  frame_tensor *out, int *n) {
  XLA_FFI_Error *err = jax_call_read(frame, call);
  if (!err) err = frame_arg(frame, 0, in);
  if (!err) err = frame_ret(frame, 0, out);
  if (err) return err;
  *n = jax_set_size(call);
  if (*n <= 0)
    return frame_error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                       "HorovodInternalError: hvd.jax: tensor '%s': %s", call->name,
                       jax_capi()->last_error());
  return NULL;
}

HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_allgather(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  jax_call call;
  frame_tensor in, out;
  int n;
  if ((err = read_gather(frame, &call, &in, &out, &n))) return err;
  if (out.count != in.count * (size_t)n)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "hvd.jax.allgather '%s': result of %zu elements for %d x %zu", call.name,
                       out.count, n, in.count);
  size_t *recvcounts = calloc((size_t)n, sizeof(size_t));
  jax_pending p;
  if (!recvcounts) return frame_error(frame, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "hvd.jax: out of memory");
  if ((err = jax_pending_init(frame, &p, 1))) {
    free(recvcounts);
    return err;
  }
  void *recv = NULL;
  jax_pending_add(&p, jax_capi()->allgather_async(in.data, in.count, in.dtype, &recv,
                                                  recvcounts, call.name, &call.opts));
  err = finish_copy(frame, &p, "allgather", call.name, &recv, recvcounts, n, in.count, &out);
  free(recvcounts);
  return err;
}

HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_alltoall(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  jax_call call;
  frame_tensor in, out;
  int n;
  if ((err = read_gather(frame, &call, &in, &out, &n))) return err;
  if (out.count != in.count || in.count % (size_t)n != 0)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "hvd.jax.alltoall '%s': %zu elements do not split into %d equal blocks",
                       call.name, in.count, n);
  size_t *counts = calloc(2 * (size_t)n, sizeof(size_t)); /* send, then receive */
  jax_pending p;
  if (!counts) return frame_error(frame, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "hvd.jax: out of memory");
  if ((err = jax_pending_init(frame, &p, 1))) {
    free(counts);
    return err;
  }
  for (int r = 0; r < n; r++) counts[r] = in.count / (size_t)n;
  void *recv = NULL;
  jax_pending_add(&p, jax_capi()->alltoall_async(in.data, counts, in.dtype, &recv, counts + n,
                                                 call.name, &call.opts));
  err = finish_copy(frame, &p, "alltoall", call.name, &recv, counts + n, n, in.count / (size_t)n,
                    &out);
  free(counts);
  return err;
}
