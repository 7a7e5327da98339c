/*
 * capi.c -- hvd._C's table, handed over by hvd.jax's Python side, and what
 * every handler does with it: read the common attributes, name
 * sub-tensors, wait for the operations a call enqueued.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "hvd_jax.h"

static const hvd_capi *capi;

/* Returns 0, or -1 if the table is older than the fields this library
 * calls (a mismatched hvd._C). */
HVD_JAX_EXPORT int hvd_jax_set_capi(const hvd_capi *table) {
  if (table == NULL || table->version != HVD_CAPI_VERSION || table->size < sizeof(hvd_capi))
    return -1;
  capi = table;
  return 0;
}

const hvd_capi *jax_capi(void) { return capi; }

XLA_FFI_Error *jax_call_read(const XLA_FFI_CallFrame *frame, jax_call *call) {
  if (capi == NULL)
    return frame_error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                       "hvd.jax: hvd's API table was not set (import hvd.jax first)");
  hvd_opts defaults = HVD_OPTS_INIT;
  call->opts = defaults;
  int64_t set = 0;
  XLA_FFI_Error *err = frame_arg_string(frame, 0, call->name, sizeof call->name);
  if (!err) err = frame_attr_int(frame, "process_set", &set);
  call->opts.process_set = (int)set;
  return err;
}

void jax_sub_name(const jax_call *call, int i, int n, char *out, size_t len) {
  if (n == 1)
    snprintf(out, len, "%s", call->name);
  else
    snprintf(out, len, "%s.%d", call->name, i);
}

int jax_set_size(const jax_call *call) {
  return call->opts.process_set == 0 ? capi->size_of_job()
                                     : capi->process_set_size(call->opts.process_set);
}

XLA_FFI_Error *jax_pending_init(const XLA_FFI_CallFrame *frame, jax_pending *p, int capacity) {
  p->n = 0;
  p->failed = 0;
  p->error[0] = '\0';
  p->handles = malloc(sizeof(hvd_handle) * (size_t)(capacity > 0 ? capacity : 1));
  if (p->handles == NULL)
    return frame_error(frame, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "hvd.jax: out of memory");
  return NULL;
}

void jax_pending_fail(jax_pending *p, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->error, sizeof p->error, fmt, ap);
  va_end(ap);
}

void jax_pending_add(jax_pending *p, hvd_handle h) {
  if (h >= 0)
    p->handles[p->n++] = h;
  else
    jax_pending_fail(p, "%s", capi->last_error());
}

XLA_FFI_Error *jax_pending_finish(const XLA_FFI_CallFrame *frame, jax_pending *p, const char *op) {
  for (int i = 0; i < p->n; i++)
    if (capi->wait(p->handles[i]) != 0) jax_pending_fail(p, "%s", capi->last_error());
  free(p->handles);
  p->handles = NULL;
  if (!p->failed) return NULL;
  return frame_error(frame, XLA_FFI_Error_Code_INTERNAL, "HorovodInternalError: hvd.jax.%s: %s", op,
                     p->error);
}
