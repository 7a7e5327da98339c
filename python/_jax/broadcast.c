/*
 * broadcast.c -- broadcast (any number of tensors, e.g. a model's
 * parameters) and barrier as XLA FFI handlers.
 */
#include <string.h>

#include "hvd_jax.h"

/* Each operand is copied into its result, which is then broadcast in
 * place from root (a rank of the process set); every tensor is enqueued
 * before the call waits. */
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_broadcast(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  jax_call call;
  int64_t root = 0;
  err = jax_call_read(frame, &call);
  if (!err) err = frame_attr_int(frame, "root", &root);
  if (err) return err;
  int n = (int)frame->args.size - 1; /* after the name */
  if (frame->rets.size != n)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "hvd.jax.broadcast: %d operands but %lld results", n,
                       (long long)frame->rets.size);
  jax_pending p;
  if ((err = jax_pending_init(frame, &p, n))) return err;
  for (int i = 0; i < n && !p.failed; i++) {
    frame_tensor in, out;
    if ((err = frame_arg(frame, i + 1, &in)) || (err = frame_ret(frame, i, &out))) break;
    if (out.data != in.data && in.count > 0)
      memcpy(out.data, in.data, in.count * jax_capi()->dtype_size(in.dtype));
    char name[JAX_NAME_MAX + 16];
    jax_sub_name(&call, i, n, name, sizeof name);
    hvd_opts opts = call.opts;
    opts.shape = out.ndims > 0 ? out.dims : NULL;
    opts.ndims = out.ndims;
    jax_pending_add(&p, jax_capi()->broadcast_async_opts(out.data, out.count, out.dtype, (int)root,
                                                         name, &opts));
  }
  XLA_FFI_Error *done = jax_pending_finish(frame, &p, "broadcast");
  if (err) frame_error_drop(frame, done);
  return err ? err : done;
}

/* Returns once every rank of the job has called it; its one result (a
 * zero int32) lets the call sit in a jitted program's data flow. */
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_barrier(XLA_FFI_CallFrame *frame) {
  int answered;
  XLA_FFI_Error *err = frame_metadata(frame, &answered);
  if (answered) return err;
  const hvd_capi *hvd = jax_capi();
  if (hvd == NULL)
    return frame_error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                       "hvd.jax: hvd's API table was not set (import hvd.jax first)");
  frame_tensor out;
  if ((err = frame_ret(frame, 0, &out))) return err;
  if (out.count > 0) memset(out.data, 0, out.count * hvd->dtype_size(out.dtype));
  if (hvd->barrier() != 0)
    return frame_error(frame, XLA_FFI_Error_Code_INTERNAL,
                       "HorovodInternalError: hvd.jax.barrier: %s", hvd->last_error());
  return NULL;
}
