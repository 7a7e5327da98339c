/*
 * xla.c -- hvd.tensorflow's collectives inside XLA (tf.function with
 * jit_compile=True, HOROVOD_ENABLE_XLA_OPS=1): the XLA FFI handlers that
 * XLA's CPU runtime calls, in C against XLA's FFI C API as hvd.jax's are
 * (the call frame is read with python/_jax/frame.c, compiled here against
 * TensorFlow's copy of the API).  xla.cc, the one part that needs C++,
 * turns HorovodAllreduce, HorovodAllgather and HorovodBroadcast into
 * custom calls of these handlers when XLA compiles a function, and
 * registers them.
 *
 * A custom call's operand 0 is the tensor's name (NUL-padded uint8: the
 * op's node name, as in a graph), operand 1 the tensor; its attributes
 * are the op's (op, prescale, postscale, root, process_set).  XLA's CPU
 * custom calls are synchronous: a handler enqueues the tensor on hvd's
 * engine and waits, on the XLA thread that runs it.  Under XLA every
 * shape is fixed when the function is compiled, so an allgather gathers
 * equal first dimensions (checked: every rank fails alike, naming the
 * counts, when not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "hvd_capi.h"
#include "hvd_tf.h"

#define NAME_MAX_LEN 512

/* hvd's error code as the FFI's, so that TensorFlow raises the tf.errors
 * type the graph op would (ops.c's tf_code). */
static XLA_FFI_Error_Code ffi_code(int status) {
  switch (status) {
    case HVD_E_MISMATCH:
    case HVD_E_NOT_INITIALIZED: return XLA_FFI_Error_Code_FAILED_PRECONDITION;
    case HVD_E_INVALID: return XLA_FFI_Error_Code_INVALID_ARGUMENT;
    case HVD_E_UNSUPPORTED: return XLA_FFI_Error_Code_UNIMPLEMENTED;
    case HVD_E_NOMEM: return XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
    default: return XLA_FFI_Error_Code_UNKNOWN;
  }
}

/* One call: its name, options, operand and result. */
typedef struct {
  char name[NAME_MAX_LEN];
  hvd_opts opts;
  frame_tensor in, out;
} xla_call;

/* Reads the name, process set, operand 1 and result 0; NULL or the error. */
static XLA_FFI_Error *read_call(XLA_FFI_CallFrame *frame, xla_call *c) {
  hvd_opts defaults = HVD_OPTS_INIT;
  int64_t set = 0;
  c->opts = defaults;
  if (!hvd_tf_capi() || !hvd_tf_capi()->is_initialized())
    return frame_error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                       "Horovod has not been initialized; use hvd.init().");
  XLA_FFI_Error *err = frame_arg_string(frame, 0, c->name, sizeof c->name);
  if (!err) err = frame_attr_int(frame, "process_set", &set);
  if (!err) err = frame_arg(frame, 1, &c->in);
  if (!err) err = frame_ret(frame, 0, &c->out);
  c->opts.process_set = (int)set;
  if (!err && c->in.ndims > 0) {
    c->opts.shape = c->in.dims;
    c->opts.ndims = c->in.ndims;
  }
  return err;
}

/* Waits for h (or takes its refusal); NULL or hvd's error as the FFI's. */
static XLA_FFI_Error *finish(XLA_FFI_CallFrame *frame, const char *what, hvd_handle h) {
  int rc = h < 0 ? (int)h : hvd_tf_capi()->wait(h);
  if (rc == 0) return NULL;
  return frame_error(frame, ffi_code(rc), "%s: %s", what, hvd_tf_capi()->last_error());
}

/* The metadata query at registration, else run(frame). */
#define HANDLER(fn, run)                                        \
  static XLA_FFI_Error *fn(XLA_FFI_CallFrame *frame) {          \
    int answered;                                               \
    XLA_FFI_Error *err = frame_metadata(frame, &answered);      \
    return answered ? err : run(frame);                         \
  }

static XLA_FFI_Error *allreduce(XLA_FFI_CallFrame *frame) {
  xla_call c;
  int64_t op = 0;
  XLA_FFI_Error *err = read_call(frame, &c);
  if (!err) err = frame_attr_int(frame, "op", &op);
  if (!err) err = frame_attr_double(frame, "prescale", &c.opts.prescale_factor);
  if (!err) err = frame_attr_double(frame, "postscale", &c.opts.postscale_factor);
  if (err) return err;
  return finish(frame, "HorovodAllreduce (XLA)",
                hvd_tf_capi()->allreduce_async_opts(c.in.data, c.out.data, c.in.count, c.in.dtype,
                                                    (hvd_op)op, c.name, &c.opts));
}
HANDLER(hvd_tf_xla_allreduce, allreduce)

static XLA_FFI_Error *broadcast(XLA_FFI_CallFrame *frame) {
  xla_call c;
  int64_t root = 0;
  XLA_FFI_Error *err = read_call(frame, &c);
  if (!err) err = frame_attr_int(frame, "root", &root);
  if (err) return err;
  if (c.in.count) memcpy(c.out.data, c.in.data, c.in.count * hvd_tf_capi()->dtype_size(c.in.dtype));
  return finish(frame, "HorovodBroadcast (XLA)",
                hvd_tf_capi()->broadcast_async_opts(c.out.data, c.in.count, c.in.dtype, (int)root,
                                                    c.name, &c.opts));
}
HANDLER(hvd_tf_xla_broadcast, broadcast)

/* Every rank sent `each` elements: else the error, naming the counts. */
static XLA_FFI_Error *equal_counts(XLA_FFI_CallFrame *frame, const xla_call *c,
                                   const size_t *counts, int n) {
  char list[256];
  size_t at = 0;
  int same = 1;
  for (int r = 0; r < n; r++) {
    same &= counts[r] == c->in.count;
    if (at < sizeof list)
      at += (size_t)snprintf(list + at, sizeof list - at, "%s%zu", r ? ", " : "", counts[r]);
  }
  if (same) return NULL;
  return frame_error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                     "HorovodAllgather (XLA): tensor '%s': ranks sent element counts [%s]; "
                     "under XLA every rank gathers the same shape", c->name, list);
}

static XLA_FFI_Error *allgather(XLA_FFI_CallFrame *frame) {
  xla_call c;
  XLA_FFI_Error *err = read_call(frame, &c);
  if (err) return err;
  int n = hvd_tf_set_size(c.opts.process_set);
  size_t *counts = n > 0 ? calloc((size_t)n, sizeof *counts) : NULL;
  if (!counts)
    return frame_error(frame, n > 0 ? XLA_FFI_Error_Code_RESOURCE_EXHAUSTED : ffi_code(n),
                       "HorovodAllgather (XLA): %s", n > 0 ? "out of memory"
                                                           : hvd_tf_capi()->last_error());
  void *recv = NULL;
  err = finish(frame, "HorovodAllgather (XLA)",
               hvd_tf_capi()->allgather_async(c.in.data, c.in.count, c.in.dtype, &recv, counts,
                                              c.name, &c.opts));
  if (!err) err = equal_counts(frame, &c, counts, n);
  if (!err && c.out.count)
    memcpy(c.out.data, recv, c.out.count * hvd_tf_capi()->dtype_size(c.in.dtype));
  free(recv);
  free(counts);
  return err;
}
HANDLER(hvd_tf_xla_allgather, allgather)

/* Registers the three handlers with TensorFlow's XLA (its FFI API, which
 * only C++ can fetch: xla.cc passes it); 0, or -1 with a message on
 * stderr (the ops then cannot be compiled, and XLA says so). */
int hvd_tf_xla_register(const XLA_FFI_Api *api) {
  static const struct {
    const char *name;
    XLA_FFI_Handler *fn;
  } handlers[] = {
      {"hvd_tf_xla_allreduce", hvd_tf_xla_allreduce},
      {"hvd_tf_xla_allgather", hvd_tf_xla_allgather},
      {"hvd_tf_xla_broadcast", hvd_tf_xla_broadcast},
  };
  for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++) {
    XLA_FFI_Handler_Register_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Handler_Register_Args_STRUCT_SIZE;
    args.name.ptr = handlers[i].name;
    args.name.len = strlen(handlers[i].name);
    args.platform.ptr = "Host";
    args.platform.len = 4;
    args.bundle.execute = handlers[i].fn;
    XLA_FFI_Error *err = api->XLA_FFI_Handler_Register(&args);
    if (err) {
      fprintf(stderr, "hvd.tensorflow: registering the XLA handler %s failed\n",
              handlers[i].name);
      XLA_FFI_Error_Destroy_Args d = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL, err};
      api->XLA_FFI_Error_Destroy(&d);
      return -1;
    }
  }
  return 0;
}
