/*
 * hvd_jax.h -- what the parts of hvd.jax's XLA FFI library share.
 *
 * The library holds no engine of its own: hvd.jax's Python side hands it
 * hvd._C's table of libhvd's API (hvd_capi.h) once, through the exported
 * hvd_jax_set_capi(), and every handler calls hvd through it, so JAX's
 * collectives share negotiation, fusion, the cache and the timeline with
 * every other binding in the process.
 *
 * XLA's CPU custom calls are synchronous: a handler enqueues its tensors
 * with the table's *_async functions and waits for them before it
 * returns, on the XLA thread that runs it.
 */
#ifndef HVD_JAX_H
#define HVD_JAX_H

#include "frame.h"
#include "hvd_capi.h"

#define HVD_JAX_EXPORT __attribute__((visibility("default")))

/* The library's exports, looked up by hvd.jax through ctypes: the setter
 * of hvd._C's table (0, or -1 for a table without the fields used here),
 * and the handlers registered with jax.ffi.register_ffi_target. */
HVD_JAX_EXPORT int hvd_jax_set_capi(const hvd_capi *table);
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_allreduce(XLA_FFI_CallFrame *frame);
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_reducescatter(XLA_FFI_CallFrame *frame);
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_allgather(XLA_FFI_CallFrame *frame);
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_alltoall(XLA_FFI_CallFrame *frame);
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_broadcast(XLA_FFI_CallFrame *frame);
HVD_JAX_EXPORT XLA_FFI_Error *hvd_jax_barrier(XLA_FFI_CallFrame *frame);

/* The table hvd_jax_set_capi() was given; NULL before. */
const hvd_capi *jax_capi(void);

/* Longest tensor name a call takes (its sub-tensors add ".<i>"). */
#define JAX_NAME_MAX 480

/* What every collective takes: its tensor name, in operand 0 as
 * NUL-padded uint8 (an operand, not an attribute: an eager call with a new
 * name then reuses the executable XLA compiled for the last one instead of
 * compiling its own), and the process_set attribute.  The tensors are
 * operands 1, 2, ... */
typedef struct {
  char name[JAX_NAME_MAX];
  hvd_opts opts;
} jax_call;

/* Reads the name and process set into call; NULL or the error. */
XLA_FFI_Error *jax_call_read(const XLA_FFI_CallFrame *frame, jax_call *call);

/* The name of tensor i of n in a call: the call's own for one tensor,
 * "<name>.<i>" for several. */
void jax_sub_name(const jax_call *call, int i, int n, char *out, size_t len);

/* The process set's size (the job's for set 0), or an HVD_E_* code. */
int jax_set_size(const jax_call *call);

/* Handles of one call's enqueued operations, waited together so that the
 * engine may fuse them; the first failure's message is kept. */
typedef struct {
  hvd_handle *handles;
  int n;
  int failed;
  char error[1536];
} jax_pending;

/* Allocates room for `capacity` handles; NULL or the error. */
XLA_FFI_Error *jax_pending_init(const XLA_FFI_CallFrame *frame, jax_pending *p, int capacity);
/* Records an enqueue's handle, or its failure (a negative handle). */
void jax_pending_add(jax_pending *p, hvd_handle h);
/* Records a failure of this call's own (e.g. ranks' counts differ). */
void jax_pending_fail(jax_pending *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Waits for every handle, frees p, and returns NULL or the first error as
 * an FFI error "HorovodInternalError: hvd.jax.<op>: <hvd's message>". */
XLA_FFI_Error *jax_pending_finish(const XLA_FFI_CallFrame *frame, jax_pending *p, const char *op);

#endif /* HVD_JAX_H */
