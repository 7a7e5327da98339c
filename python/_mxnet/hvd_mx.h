/*
 * hvd_mx.h -- what the parts of hvd.mxnet's library share.
 *
 * hvd.mxnet's collectives are operations of MXNet's dependency engine, as
 * Horovod's are: a call from Python pushes one asynchronous operation with
 * MXEnginePushAsyncND, the input NDArrays as its const dependencies and
 * the outputs as its mutable ones, and returns at once.  When MXNet runs
 * the operation (every earlier writer of the inputs done, every earlier
 * reader and writer of the outputs done), it enqueues the tensors on hvd's
 * engine with a completion callback, and that callback -- on hvd's engine
 * thread -- completes the MXNet operation.  MXNet then runs what waits on
 * the outputs, and wait_to_read()/asnumpy() return, or raise MXNetError
 * with hvd's message when the collective failed.
 *
 * The library holds no engine of its own: hvd.mxnet hands it hvd._C's
 * table of libhvd's API (hvd_capi.h) once, and every call goes through it.
 *
 * Written in C against the wheel's include/mxnet/c_api.h.  The one thing
 * C cannot do is fail an MXNet operation with a message: the engine takes
 * a C++ dmlc::Error object, which error.cc makes (hvd_mx_fail_engine_op).
 */
#ifndef HVD_MX_H
#define HVD_MX_H

#include <stdint.h>

#include <mxnet/c_api.h>

#include "hvd_capi.h"

#define HVD_MX_EXPORT __attribute__((visibility("default")))

/* ---- the library's exports, called by hvd.mxnet through ctypes ----
 * Each returns 0 or -1 with hvd_mx_last_error() saying why (an error the
 * call itself finds); a collective's own failure comes later, as MXNet's
 * error on its outputs.  name is the tensor's (hvd.mxnet numbers unnamed
 * calls in call order); priority is MXNet's engine priority. */
typedef struct mx_result mx_result;
HVD_MX_EXPORT int hvd_mx_set_capi(const void *table);
HVD_MX_EXPORT const char *hvd_mx_last_error(void);
HVD_MX_EXPORT int hvd_mx_allreduce(NDArrayHandle *in, NDArrayHandle *out, int n,
                                   const char *name, int reduce_op, double prescale,
                                   double postscale, int process_set, int priority);
HVD_MX_EXPORT int hvd_mx_broadcast(NDArrayHandle in, NDArrayHandle out, const char *name,
                                   int root_rank, int process_set, int priority);
HVD_MX_EXPORT int hvd_mx_reducescatter(NDArrayHandle *in, NDArrayHandle *out, int n,
                                       const char *name, int reduce_op, double prescale,
                                       double postscale, int process_set, int priority);
HVD_MX_EXPORT int hvd_mx_allgather(NDArrayHandle *in, int n, NDArrayHandle holder,
                                   const char *name, int process_set, int priority,
                                   mx_result **result);
HVD_MX_EXPORT int hvd_mx_alltoall(NDArrayHandle in, NDArrayHandle splits, NDArrayHandle holder,
                                  const char *name, int process_set, int priority,
                                  mx_result **result);
HVD_MX_EXPORT int64_t hvd_mx_result_rows(const mx_result *res, int i);
HVD_MX_EXPORT int hvd_mx_result_copy(mx_result *res, int i, NDArrayHandle out);
HVD_MX_EXPORT void hvd_mx_result_splits(const mx_result *res, int32_t *out);
HVD_MX_EXPORT void hvd_mx_result_free(mx_result *res);

/* ---- MXNet's C++ objects that its C API passes as void pointers ----
 * Their layouts are part of MXNet's ABI (include/mxnet/base.h, engine.h):
 * mxnet::Context, the FnProperty enum, engine::CallbackOnComplete. */
typedef struct {
  int dev_type; /* Context::DeviceType: 1 CPU, 2 GPU, 3 CPU pinned, 5 CPU shared */
  int32_t dev_id;
} hvd_mx_context;
#define HVD_MX_GPU 2
#define HVD_MX_CPU_PRIORITIZED 3 /* FnProperty::kCPUPrioritized, as Horovod pushes */

typedef struct {
  void (*callback)(void *engine, void *param, const void *error);
  void *engine;
  void *param;
} hvd_mx_on_complete;

/* error.cc: completes the MXNet operation with a dmlc::Error holding msg,
 * which MXNet attaches to the operation's outputs (their readers raise). */
void hvd_mx_fail_engine_op(const hvd_mx_on_complete *done, const char *msg);

/* ---- the operations ---- */

typedef enum { MX_ALLREDUCE, MX_BROADCAST, MX_ALLGATHER, MX_ALLTOALL, MX_REDUCESCATTER } mx_kind;

#define MX_NAME_MAX 480

/* One pushed operation: n tensors (several in a grouped call), held by
 * shallow copies of the caller's NDArrays until MXNet deletes it. */
typedef struct mx_op {
  mx_kind kind;
  int n;
  NDArrayHandle *in, *out; /* out[i] == in[i]: in place; NULL: no output (gathers) */
  NDArrayHandle splits;    /* alltoall's int32 splits, or NULL */
  NDArrayHandle holder;    /* gathers: the NDArray Python waits on, or NULL */
  hvd_dtype dtype;
  int ndims;
  int64_t shape[HVD_MAX_DIMS]; /* tensor 0's */
  hvd_opts opts;               /* process set, scale factors, callback */
  int reduce_op, root_rank;
  int set_size, set_rank;
  void **ins, **outs;          /* data pointers, read when MXNet runs the op */
  size_t *counts;              /* elements per tensor */
  void **scratch;              /* reducescatter's padded inputs and outputs */
  struct mx_result *result;    /* allgather/alltoall: what Python reads after */
  hvd_mx_on_complete done;
  void (*run)(struct mx_op *); /* the kind's runner, when MXNet runs the op */
  char name[MX_NAME_MAX + 32];
} mx_op;

/* The table hvd_mx_set_capi() was given; NULL before. */
extern const hvd_capi *mx_capi;

/* Sets the message hvd_mx_last_error() returns on this thread; returns -1. */
int mx_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A new operation of n tensors (out NULL: results kept by the op, not
 * written to NDArrays), its inputs' dtype, shape and set checked; NULL
 * after mx_refuse(). */
mx_op *mx_op_new(mx_kind kind, NDArrayHandle *in, NDArrayHandle *out, int n,
                 const char *name, int process_set);
/* Frees an op that was not pushed (MXNet frees those that were). */
void mx_op_free(void *op);
/* Pushes op to MXNet's engine: run() enqueues it on hvd when MXNet runs
 * it.  0, or -1 after mx_refuse() (op freed). */
int mx_op_push(mx_op *op, void (*run)(mx_op *), int priority);
/* mx_op_new() and mx_op_push() of a reduction (allreduce, reducescatter)
 * with its op and scale factors. */
int mx_push_reduction(mx_kind kind, void (*run)(mx_op *), NDArrayHandle *in,
                      NDArrayHandle *out, int n, const char *name, int reduce_op,
                      double prescale, double postscale, int process_set, int priority);
/* Completes the MXNet operation: status 0 or an HVD_E_* code with msg.
 * op must not be touched afterwards. */
void mx_op_end(mx_op *op, int status, const char *msg);
/* hvd's completion callback for ops with nothing to do after. */
void mx_on_done(hvd_handle h, int status, void *arg);
/* Ends op with hvd's refusal of an enqueue (h < 0). */
void mx_end_refused(mx_op *op, hvd_handle h);
/* Elements in a row (dimensions after the first) of tensor i. */
size_t mx_row_size(NDArrayHandle a);
/* The buffer of NDArray a, on MXNet's thread that runs op; -1 after
 * mx_refuse() (an array in MKL-DNN's layout among the reasons). */
int mx_data_of(const mx_op *op, NDArrayHandle a, void **out);
/* Holds a shallow copy of a (the op's holder or splits) in *slot. */
int mx_op_hold(NDArrayHandle a, NDArrayHandle *slot);

/* The kinds' runners (reduce.c, scatter.c, gather.c). */
void mx_run_allreduce(mx_op *op);
void mx_run_broadcast(mx_op *op);
void mx_run_reducescatter(mx_op *op);
void mx_run_allgather(mx_op *op);
void mx_run_alltoall(mx_op *op);

#endif /* HVD_MX_H */
