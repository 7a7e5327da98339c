/*
 * frame.h -- reading an XLA FFI call frame in C (xla/ffi/api/c_api.h).
 *
 * XLA hands a custom call one XLA_FFI_CallFrame: its operands and results
 * as XLA_FFI_Buffer (dtype, data, dims) and its attributes as a list of
 * (name, typed value).  These helpers read them, answer XLA's metadata
 * query at registration, and turn an error into the XLA_FFI_Error that
 * JAX raises as an exception with our message.  XLA's own C++ wrapper
 * (ffi.h) does the same with templates; a C project uses the C API.
 * hvd.tensorflow's XLA handlers use it too (python/tensorflow/xla.c).
 */
#ifndef HVD_JAX_FRAME_H
#define HVD_JAX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"
#include "xla/ffi/api/c_api.h"

/* Who complains about a malformed frame: hvd.jax, or the binding that
 * compiles frame.c too (hvd.tensorflow's XLA handlers). */
#ifndef FRAME_WHO
#define FRAME_WHO "hvd.jax"
#endif

/* A buffer as hvd sees it: address, element count, dtype, shape. */
typedef struct {
  void *data;
  size_t count;
  hvd_dtype dtype;
  const int64_t *dims;
  int ndims;
} frame_tensor;

/* Non-NULL when XLA called the handler only to ask for its metadata (at
 * registration): the answer, to return at once.  *answered says so. */
XLA_FFI_Error *frame_metadata(XLA_FFI_CallFrame *frame, int *answered);

/* An XLA_FFI_Error with the printf-formatted message (XLA copies it). */
XLA_FFI_Error *frame_error(const XLA_FFI_CallFrame *frame, XLA_FFI_Error_Code code, const char *fmt,
                           ...) __attribute__((format(printf, 3, 4)));

/* Frees an error that will not be returned. */
void frame_error_drop(const XLA_FFI_CallFrame *frame, XLA_FFI_Error *err);

/* Operand i / result i as a tensor; NULL on success, else the error (a
 * dtype hvd does not take, a non-buffer). */
XLA_FFI_Error *frame_arg(const XLA_FFI_CallFrame *frame, int64_t i, frame_tensor *t);
XLA_FFI_Error *frame_ret(const XLA_FFI_CallFrame *frame, int64_t i, frame_tensor *t);

/* Operand i, a rank-1 uint8 buffer holding a NUL-padded string, copied
 * NUL-terminated into buf of size n; NULL or the error. */
XLA_FFI_Error *frame_arg_string(const XLA_FFI_CallFrame *frame, int64_t i, char *buf, size_t n);

/* Attribute `name`: an integer or a floating scalar.  NULL on success,
 * else the error naming the missing or mistyped attribute. */
XLA_FFI_Error *frame_attr_int(const XLA_FFI_CallFrame *frame, const char *name, int64_t *out);
XLA_FFI_Error *frame_attr_double(const XLA_FFI_CallFrame *frame, const char *name, double *out);

/* hvd's name of a dtype, for sub-tensor names and messages. */
const char *frame_dtype_name(hvd_dtype dtype);

#endif /* HVD_JAX_FRAME_H */
