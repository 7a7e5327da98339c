/*
 * reduce.c -- allreduce (one tensor, several, or a group) and
 * reducescatter as XLA FFI handlers.
 *
 * A call with several operands enqueues them all before waiting, so the
 * engine fuses them like the tensors of one backward pass (up to
 * HOROVOD_FUSION_THRESHOLD); with grouped=1 each dtype's tensors are one
 * hvd group, negotiated and fused as a unit (Horovod's grouped_allreduce).
 */
#include <stdio.h>
#include <stdlib.h>

#include "hvd_jax.h"

/* op, prescale and postscale, beside the common attributes. */
static XLA_FFI_Error *read_reduce(const XLA_FFI_CallFrame *frame, jax_call *call, hvd_op *op) {
  int64_t code = 0;
  XLA_FFI_Error *err = jax_call_read(frame, call);
  if (!err) err = frame_attr_int(frame, "op", &code);
  if (!err) err = frame_attr_double(frame, "prescale", &call->opts.prescale_factor);
  if (!err) err = frame_attr_double(frame, "postscale", &call->opts.postscale_factor);
  *op = (hvd_op)code;
  return err;
}

/* Operand i and result i, which must agree in dtype and count. */
static XLA_FFI_Error *pair(const XLA_FFI_CallFrame *frame, int i, frame_tensor *in,
                           frame_tensor *out) {
  XLA_FFI_Error *err = frame_arg(frame, i + 1, in); /* after the name */
  if (!err) err = frame_ret(frame, i, out);
  if (!err && (in->dtype != out->dtype || in->count != out->count))
    err = frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "hvd.jax.allreduce: result %d does not match operand %d", i, i);
  return err;
}

/* Each operand its own tensor, enqueued one after the other. */
static void enqueue_each(const jax_call *call, hvd_op op, int n, const frame_tensor *ins,
                         const frame_tensor *outs, jax_pending *p) {
  for (int i = 0; i < n && !p->failed; i++) {
    char name[JAX_NAME_MAX + 16];
    jax_sub_name(call, i, n, name, sizeof name);
    hvd_opts opts = call->opts;
    opts.shape = ins[i].ndims > 0 ? ins[i].dims : NULL;
    opts.ndims = ins[i].ndims;
    jax_pending_add(p, jax_capi()->allreduce_async_opts(ins[i].data, outs[i].data, ins[i].count,
                                                        ins[i].dtype, op, name, &opts));
  }
}

/* One hvd group per dtype, in order of first appearance; a group is
 * named "<name>.<dtype>" when the call holds several dtypes. */
static void enqueue_groups(const jax_call *call, hvd_op op, int n, const frame_tensor *ins,
                           const frame_tensor *outs, jax_pending *p) {
  const void **gs = malloc(sizeof(void *) * (size_t)n); /* one group's */
  void **gr = malloc(sizeof(void *) * (size_t)n);
  size_t *gc = malloc(sizeof(size_t) * (size_t)n);
  char *done = calloc((size_t)n, 1);
  if (!gs || !gr || !gc || !done) {
    jax_pending_fail(p, "out of memory");
    goto out_free;
  }
  int ndtypes = 0;
  for (int i = 0; i < n; i++) {
    int first = 1;
    for (int j = 0; j < i && first; j++) first = ins[j].dtype != ins[i].dtype;
    ndtypes += first;
  }
  for (int i = 0; i < n && !p->failed; i++) {
    if (done[i]) continue;
    int k = 0;
    for (int j = i; j < n; j++) {
      if (done[j] || ins[j].dtype != ins[i].dtype) continue;
      gs[k] = ins[j].data;
      gr[k] = outs[j].data;
      gc[k++] = ins[j].count;
      done[j] = 1;
    }
    char name[JAX_NAME_MAX + 16];
    if (ndtypes > 1)
      snprintf(name, sizeof name, "%s.%s", call->name, frame_dtype_name(ins[i].dtype));
    else
      snprintf(name, sizeof name, "%s", call->name);
    jax_pending_add(p, jax_capi()->grouped_allreduce_async(gs, (void *const *)gr, gc, k,
                                                           ins[i].dtype, op, name, &call->opts));
  }
out_free:
  free(gs);
  free(gr);
  free(gc);
  free(done);
}

HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_allreduce(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  jax_call call;
  hvd_op op;
  int64_t grouped = 0;
  err = read_reduce(frame, &call, &op);
  if (!err) err = frame_attr_int(frame, "grouped", &grouped);
  if (err) return err;
  int n = (int)frame->args.size - 1; /* after the name */
  if (frame->rets.size != n)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "hvd.jax.allreduce: %d operands but %lld results", n,
                       (long long)frame->rets.size);
  frame_tensor *ins = malloc(sizeof(frame_tensor) * (size_t)(n + 1));
  frame_tensor *outs = malloc(sizeof(frame_tensor) * (size_t)(n + 1));
  jax_pending p;
  if (!ins || !outs)
    err = frame_error(frame, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "hvd.jax: out of memory");
  for (int i = 0; i < n && !err; i++) err = pair(frame, i, &ins[i], &outs[i]);
  if (!err) err = jax_pending_init(frame, &p, n);
  if (!err) {
    if (grouped)
      enqueue_groups(&call, op, n, ins, outs, &p);
    else
      enqueue_each(&call, op, n, ins, outs, &p);
    err = jax_pending_finish(frame, &p, grouped ? "grouped_allreduce" : "allreduce");
  }
  free(ins);
  free(outs);
  return err;
}

/* The operand has set_size equal blocks of rows (hvd.jax pads it); this
 * rank's block lands in the result. */
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_reducescatter(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  jax_call call;
  hvd_op op;
  frame_tensor in, out;
  err = read_reduce(frame, &call, &op);
  if (!err) err = frame_arg(frame, 1, &in);
  if (!err) err = frame_ret(frame, 0, &out);
  if (err) return err;
  int n = jax_set_size(&call);
  if (n <= 0 || out.count * (size_t)n != in.count)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "hvd.jax.reducescatter '%s': %zu elements do not split into %d blocks "
                       "of %zu",
                       call.name, in.count, n, out.count);
  jax_pending p;
  if ((err = jax_pending_init(frame, &p, 1))) return err;
  call.opts.shape = in.ndims > 0 ? in.dims : NULL;
  call.opts.ndims = in.ndims;
  jax_pending_add(&p, jax_capi()->reducescatter_async(in.data, out.data, in.count, in.dtype, op,
                                                      call.name, &call.opts));
  return jax_pending_finish(frame, &p, "reducescatter");
}
