/*
 * frame.c -- reading an XLA FFI call frame (see frame.h).
 */
#include "frame.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The FFI version the handlers tell XLA: the oldest whose layouts they
 * need (errors, buffers, scalar attributes are as in 0.1), not this
 * header's.  XLA refuses a handler that claims a newer minor version than
 * its own (jaxlib 0.4.38's is 0.1) and serves older ones: so one library
 * serves every jaxlib hvd.jax serves. */
#define HVD_JAX_FFI_MINOR 1

XLA_FFI_Error *frame_metadata(XLA_FFI_CallFrame *frame, int *answered) {
  XLA_FFI_Extension_Base *ext = frame->extension_start;
  *answered = ext != NULL && ext->type == XLA_FFI_Extension_Metadata;
  if (!*answered) return NULL;
  XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
  md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  md->api_version.extension_start = NULL;
  md->api_version.major_version = XLA_FFI_API_MAJOR;
  md->api_version.minor_version = HVD_JAX_FFI_MINOR;
  md->traits = 0;
  return NULL;
}

XLA_FFI_Error *frame_error(const XLA_FFI_CallFrame *frame, XLA_FFI_Error_Code code, const char *fmt,
                           ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  XLA_FFI_Error_Create_Args args = {
      .struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE,
      .extension_start = NULL,
      .message = msg,
      .errc = code,
  };
  return frame->api->XLA_FFI_Error_Create(&args);
}

void frame_error_drop(const XLA_FFI_CallFrame *frame, XLA_FFI_Error *err) {
  if (err == NULL) return;
  XLA_FFI_Error_Destroy_Args args = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL, err};
  frame->api->XLA_FFI_Error_Destroy(&args);
}

static const struct {
  XLA_FFI_DataType xla;
  hvd_dtype hvd;
  const char *name;
} dtypes[] = {
    {XLA_FFI_DataType_U8, HVD_UINT8, "uint8"},
    {XLA_FFI_DataType_S8, HVD_INT8, "int8"},
    {XLA_FFI_DataType_U16, HVD_UINT16, "uint16"},
    {XLA_FFI_DataType_S16, HVD_INT16, "int16"},
    {XLA_FFI_DataType_S32, HVD_INT32, "int32"},
    {XLA_FFI_DataType_S64, HVD_INT64, "int64"},
    {XLA_FFI_DataType_F16, HVD_FLOAT16, "float16"},
    {XLA_FFI_DataType_BF16, HVD_BFLOAT16, "bfloat16"},
    {XLA_FFI_DataType_F32, HVD_FLOAT32, "float32"},
    {XLA_FFI_DataType_F64, HVD_FLOAT64, "float64"},
    {XLA_FFI_DataType_PRED, HVD_BOOL, "bool"},
};

const char *frame_dtype_name(hvd_dtype dtype) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (dtypes[i].hvd == dtype) return dtypes[i].name;
  return "?";
}

static XLA_FFI_Error *tensor_of(const XLA_FFI_CallFrame *frame, const char *what, int64_t i,
                                int is_buffer, XLA_FFI_Buffer *buf, frame_tensor *t) {
  if (!is_buffer)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": %s %lld is not a buffer", what, (long long)i);
  size_t k = 0, n = sizeof dtypes / sizeof dtypes[0];
  while (k < n && dtypes[k].xla != buf->dtype) k++;
  if (k == n)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": %s %lld has XLA dtype %d, which hvd does not support", what,
                       (long long)i, (int)buf->dtype);
  if (buf->rank > HVD_MAX_DIMS)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": %s %lld has %lld dimensions, hvd takes at most %d", what,
                       (long long)i, (long long)buf->rank, HVD_MAX_DIMS);
  t->data = buf->data;
  t->dtype = dtypes[k].hvd;
  t->dims = buf->dims;
  t->ndims = (int)buf->rank;
  t->count = 1;
  for (int64_t d = 0; d < buf->rank; d++) t->count *= (size_t)buf->dims[d];
  return NULL;
}

XLA_FFI_Error *frame_arg(const XLA_FFI_CallFrame *frame, int64_t i, frame_tensor *t) {
  if (i >= frame->args.size)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": operand %lld missing (%lld given)", (long long)i,
                       (long long)frame->args.size);
  return tensor_of(frame, "operand", i, frame->args.types[i] == XLA_FFI_ArgType_BUFFER,
                   frame->args.args[i], t);
}

XLA_FFI_Error *frame_ret(const XLA_FFI_CallFrame *frame, int64_t i, frame_tensor *t) {
  if (i >= frame->rets.size)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": result %lld missing (%lld given)", (long long)i,
                       (long long)frame->rets.size);
  return tensor_of(frame, "result", i, frame->rets.types[i] == XLA_FFI_RetType_BUFFER,
                   frame->rets.rets[i], t);
}

XLA_FFI_Error *frame_arg_string(const XLA_FFI_CallFrame *frame, int64_t i, char *buf, size_t n) {
  if (i >= frame->args.size || frame->args.types[i] != XLA_FFI_ArgType_BUFFER)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": operand %lld (a name) missing", (long long)i);
  const XLA_FFI_Buffer *b = frame->args.args[i];
  if (b->dtype != XLA_FFI_DataType_U8 || b->rank != 1)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": operand %lld is not a name (rank-1 uint8)", (long long)i);
  size_t len = 0, size = (size_t)b->dims[0];
  const char *s = b->data;
  while (len < size && s[len] != '\0') len++;
  if (len >= n)
    return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       FRAME_WHO ": a tensor name of %zu bytes, at most %zu", len, n - 1);
  memcpy(buf, s, len);
  buf[len] = '\0';
  return NULL;
}

/* The attribute named `name`, NULL if there is none. */
static void *attr(const XLA_FFI_CallFrame *frame, const char *name, XLA_FFI_AttrType *type) {
  size_t len = strlen(name);
  for (int64_t i = 0; i < frame->attrs.size; i++) {
    const XLA_FFI_ByteSpan *key = frame->attrs.names[i];
    if (key->len == len && memcmp(key->ptr, name, len) == 0) {
      *type = frame->attrs.types[i];
      return frame->attrs.attrs[i];
    }
  }
  return NULL;
}

static XLA_FFI_Error *bad_attr(const XLA_FFI_CallFrame *frame, const char *name, const char *want) {
  return frame_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     FRAME_WHO ": attribute '%s' missing or not %s", name, want);
}

XLA_FFI_Error *frame_attr_int(const XLA_FFI_CallFrame *frame, const char *name, int64_t *out) {
  XLA_FFI_AttrType type;
  const XLA_FFI_Scalar *s = attr(frame, name, &type);
  if (!s || type != XLA_FFI_AttrType_SCALAR) return bad_attr(frame, name, "an integer");
  switch (s->dtype) {
    case XLA_FFI_DataType_S32:
      *out = *(const int32_t *)s->value;
      return NULL;
    case XLA_FFI_DataType_S64:
      *out = *(const int64_t *)s->value;
      return NULL;
    default:
      return bad_attr(frame, name, "an integer");
  }
}

XLA_FFI_Error *frame_attr_double(const XLA_FFI_CallFrame *frame, const char *name, double *out) {
  XLA_FFI_AttrType type;
  const XLA_FFI_Scalar *s = attr(frame, name, &type);
  if (!s || type != XLA_FFI_AttrType_SCALAR) return bad_attr(frame, name, "a float");
  switch (s->dtype) {
    case XLA_FFI_DataType_F32:
      *out = *(const float *)s->value;
      return NULL;
    case XLA_FFI_DataType_F64:
      *out = *(const double *)s->value;
      return NULL;
    default:
      return bad_attr(frame, name, "a float");
  }
}
