/*
 * ops.c -- hvd's collectives as TensorFlow ops (hvd.tensorflow), written
 * against TensorFlow's C API for ops and kernels (tensorflow/c/ops.h,
 * kernels.h), which the wheel ships and libtensorflow_framework exports.
 *
 * The ops carry Horovod's names and attributes (HorovodAllreduce,
 * reduce_op, prescale_factor, ...), so graphs and gradients written for
 * horovod.tensorflow read the same.  The collectives are asynchronous
 * kernels (TF_NewAsyncKernelBuilder, TensorFlow's AsyncOpKernel): compute
 * enqueues the tensor on hvd's engine and returns at once, and the
 * engine's completion callback runs TensorFlow's done.  No inter-op thread
 * waits for other ranks, so a step may have more collectives in flight
 * than TensorFlow has threads.  The one thing C cannot do is keep done
 * past compute's return (the C API passes a pointer to a C++
 * std::function parameter): done.cc moves it into one of our own.
 *
 * This library does not link libhvd: hvd._C owns the process's engine.
 * hvd.tensorflow's Python side hands the table hvd._C._capi to
 * hvd_tf_set_capi() once, and every call goes through it.
 *
 * Names: inside a graph (tf.function) a tensor is named by its node's name,
 * which the Python wrappers make from the input's name as Horovod does, so
 * ranks that trace the same function match.  An eagerly run op's node is
 * named by its type alone; it is enqueued without a name (hvd numbers it
 * in call order), or, on a process set other than the global one, with a
 * name numbered by a counter of that set's own, so that ranks outside the
 * set do not put members' numbers out of step.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorflow/c/kernels.h>
/* ops.h declares its handles as C++ does (struct tags, no typedefs): name
 * them for C first. */
typedef struct TF_DimensionHandle TF_DimensionHandle;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeHandle TF_ShapeHandle;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;
#include <tensorflow/c/ops.h>
#include <tensorflow/c/tf_status.h>
#include <tensorflow/c/tf_tensor.h>

#include "hvd_tf.h"

#define EXPORT __attribute__((visibility("default")))
#define NAME_MAX_LEN 512

/* What hvd.tensorflow's Python side calls (through ctypes). */
EXPORT int hvd_tf_set_capi(const void *table);
EXPORT void hvd_tf_reset_names(void);

/* Called once by hvd.tensorflow with the address of hvd._C._capi's table.
 * Returns 0, or -1 when the table is older than this library needs. */
EXPORT int hvd_tf_set_capi(const void *table) { return hvd_tf_use_capi(table); }

/* ---- what each op is ---- */

typedef enum {
  K_ALLREDUCE,
  K_GROUPED_ALLREDUCE,
  K_ALLGATHER,
  K_BROADCAST,
  K_ALLTOALL,
  K_REDUCESCATTER,
  K_GROUPED_ALLGATHER,
  K_GROUPED_REDUCESCATTER,
  K_JOIN,
  K_BARRIER,
  K_SIZE,
  K_LOCAL_SIZE,
  K_RANK,
  K_LOCAL_RANK,
  K_PROCESS_SET_INCLUDED
} kind;

static const char *const op_names[] = {
    "HorovodAllreduce",
    "HorovodGroupedAllreduce",
    "HorovodAllgather",
    "HorovodBroadcast",
    "HorovodAlltoall",
    "HorovodReducescatter",
    "HorovodGroupedAllgather",
    "HorovodGroupedReducescatter",
    "HorovodJoin",
    "HorovodBarrier",
    "HorovodSize",
    "HorovodLocalSize",
    "HorovodRank",
    "HorovodLocalRank",
    "HorovodProcessSetIncluded",
};

/* The words hvd's generated names use for each collective. */
static const char *const kind_words[] = {
    "allreduce", "grouped_allreduce", "allgather",         "broadcast",
    "alltoall",  "reducescatter",     "grouped_allgather", "grouped_reducescatter",
};

/* A kernel: one per node (graph) or per attribute set (eager). */
typedef struct {
  kind k;
  int reduce_op;
  float prescale, postscale;
  int root_rank;
  int process_set;
  int graph;               /* a collective's kernel in a graph: see waits_graph */
  char name[NAME_MAX_LEN]; /* empty: an eagerly run op (see the top) */
} kernel;

/* ---- errors: hvd's codes as the tf.errors types Horovod raises ---- */

static TF_Code tf_code(int status) {
  switch (status) {
    case HVD_E_MISMATCH:
    case HVD_E_NOT_INITIALIZED: return TF_FAILED_PRECONDITION;
    case HVD_E_INVALID: return TF_INVALID_ARGUMENT;
    case HVD_E_UNSUPPORTED: return TF_UNIMPLEMENTED;
    case HVD_E_NOMEM: return TF_RESOURCE_EXHAUSTED;
    /* A broken job: Horovod's ops fail with UnknownError then, which its
     * elastic run() turns into HorovodInternalError. */
    default: return TF_UNKNOWN;
  }
}

static void fail(TF_OpKernelContext *ctx, TF_Code code, const char *msg) {
  TF_Status *st = TF_NewStatus();
  TF_SetStatus(st, code, msg);
  TF_OpKernelContext_Failure(ctx, st);
  TF_DeleteStatus(st);
}

static int ready(TF_OpKernelContext *ctx) {
  if (hvd_tf_capi() && hvd_tf_capi()->is_initialized()) return 1;
  fail(ctx, TF_FAILED_PRECONDITION, "Horovod has not been initialized; use hvd.init().");
  return 0;
}

static int hvd_type(TF_DataType t, hvd_dtype *out) {
  switch (t) {
    case TF_UINT8: *out = HVD_UINT8; return 0;
    case TF_INT8: *out = HVD_INT8; return 0;
    case TF_UINT16: *out = HVD_UINT16; return 0;
    case TF_INT16: *out = HVD_INT16; return 0;
    case TF_INT32: *out = HVD_INT32; return 0;
    case TF_INT64: *out = HVD_INT64; return 0;
    case TF_HALF: *out = HVD_FLOAT16; return 0;
    case TF_BFLOAT16: *out = HVD_BFLOAT16; return 0;
    case TF_FLOAT: *out = HVD_FLOAT32; return 0;
    case TF_DOUBLE: *out = HVD_FLOAT64; return 0;
    case TF_BOOL: *out = HVD_BOOL; return 0;
    default: return -1;
  }
}

/* ---- names for eagerly run ops on a process set ---- */

typedef struct set_counter {
  int set;
  long next;
  struct set_counter *link;
} set_counter;

static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;
static set_counter *counters;

static long next_number(int set) {
  pthread_mutex_lock(&counters_lock);
  set_counter *c = counters;
  while (c && c->set != set) c = c->link;
  if (!c && (c = calloc(1, sizeof *c)) != NULL) {
    c->set = set;
    c->link = counters;
    counters = c;
  }
  long n = c ? ++c->next : -1;
  pthread_mutex_unlock(&counters_lock);
  return n;
}

/* Starts every set's numbering over (a new job: init or an elastic reset). */
EXPORT void hvd_tf_reset_names(void) {
  pthread_mutex_lock(&counters_lock);
  while (counters) {
    set_counter *c = counters;
    counters = c->link;
    free(c);
  }
  pthread_mutex_unlock(&counters_lock);
}

/* The name to enqueue under (NULL: hvd numbers it); buf holds it. */
static const char *tensor_name(const kernel *kn, char *buf, size_t cap) {
  if (kn->name[0]) return kn->name;
  if (kn->process_set == 0) return NULL;
  snprintf(buf, cap, "tf.%s.noname.set%d.%ld", kind_words[kn->k], kn->process_set,
           next_number(kn->process_set));
  return buf;
}

/* ---- kernel construction: Horovod's attributes ---- */

static int has(TF_OpKernelConstruction *c, const char *attr) {
  TF_Status *st = TF_NewStatus();
  int yes = TF_OpKernelConstruction_HasAttr(c, attr, st);
  TF_DeleteStatus(st);
  return yes;
}

static int attr_int(TF_OpKernelConstruction *c, const char *attr, int dflt) {
  if (!has(c, attr)) return dflt;
  TF_Status *st = TF_NewStatus();
  int64_t v = dflt;
  TF_OpKernelConstruction_GetAttrInt64(c, attr, &v, st);
  TF_DeleteStatus(st);
  return (int)v;
}

static float attr_float(TF_OpKernelConstruction *c, const char *attr) {
  float v = 1.0f;
  if (!has(c, attr)) return v;
  TF_Status *st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrFloat(c, attr, &v, st);
  TF_DeleteStatus(st);
  return v;
}

static int attr_bool(TF_OpKernelConstruction *c, const char *attr) {
  TF_Bool v = 0;
  if (!has(c, attr)) return 0;
  TF_Status *st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrBool(c, attr, &v, st);
  TF_DeleteStatus(st);
  return v != 0;
}

/* The node's name, without its scope when ignore_name_scope is set; empty
 * for an eagerly run op, whose node is named by the op's type. */
static void node_name(TF_OpKernelConstruction *c, kind k, char *out) {
  TF_StringView v = TF_OpKernelConstruction_GetName(c);
  size_t len = v.len < NAME_MAX_LEN - 1 ? v.len : NAME_MAX_LEN - 1;
  memcpy(out, v.data, len);
  out[len] = '\0';
  if (strcmp(out, op_names[k]) == 0) {
    out[0] = '\0';
    return;
  }
  if (attr_bool(c, "ignore_name_scope")) {
    const char *slash = strrchr(out, '/');
    if (slash) memmove(out, slash + 1, strlen(slash + 1) + 1);
  }
}

static kernel *kernel_new(TF_OpKernelConstruction *c, kind k) {
  kernel *kn = calloc(1, sizeof *kn);
  if (!kn) return NULL;
  kn->k = k;
  kn->reduce_op = attr_int(c, "reduce_op", HVD_SUM);
  kn->prescale = attr_float(c, "prescale_factor");
  kn->postscale = attr_float(c, "postscale_factor");
  kn->root_rank = attr_int(c, "root_rank", 0);
  kn->process_set = attr_int(c, "process_set_id", 0);
  node_name(c, k, kn->name);
  kn->graph = k <= K_GROUPED_REDUCESCATTER && kn->name[0] != '\0';
  if (kn->graph && hvd_tf_capi()) hvd_tf_capi()->waits_graph(1, 0);
  return kn;
}

#define CREATE(fn, k) \
  static void *fn(TF_OpKernelConstruction *c) { return kernel_new(c, k); }
CREATE(create_allreduce, K_ALLREDUCE)
CREATE(create_grouped_allreduce, K_GROUPED_ALLREDUCE)
CREATE(create_allgather, K_ALLGATHER)
CREATE(create_broadcast, K_BROADCAST)
CREATE(create_alltoall, K_ALLTOALL)
CREATE(create_reducescatter, K_REDUCESCATTER)
CREATE(create_grouped_allgather, K_GROUPED_ALLGATHER)
CREATE(create_grouped_reducescatter, K_GROUPED_REDUCESCATTER)
CREATE(create_join, K_JOIN)
CREATE(create_barrier, K_BARRIER)
CREATE(create_size, K_SIZE)
CREATE(create_local_size, K_LOCAL_SIZE)
CREATE(create_rank, K_RANK)
CREATE(create_local_rank, K_LOCAL_RANK)
CREATE(create_process_set_included, K_PROCESS_SET_INCLUDED)

static void kernel_delete(void *k) {
  kernel *kn = k;
  if (kn->graph && hvd_tf_capi()) hvd_tf_capi()->waits_graph(-1, 0);
  free(kn);
}

/* ---- what the engine is told, so that it sees a certain deadlock ---- */

/* A collective's caller never waits in hvd: TensorFlow waits for its
 * done.  An eager op's caller is blocked until then, so the op counts as
 * a wait; a graph op runs on the executor's threads, and the rank is
 * blocked only while every graph op alive is in flight (waits.h).  Either
 * way the enqueuing thread is no submitter of its own: delta +1 before
 * the enqueue, -1 once the op ends. */
static void track(const kernel *kn, int delta) {
  if (kn->graph)
    hvd_tf_capi()->waits_graph(0, delta);
  else
    hvd_tf_capi()->waits_op(delta);
  if (delta > 0) hvd_tf_capi()->waits_untracked();
}

/* ---- one running collective ---- */

/* What a collective holds from compute until TensorFlow's done: its
 * inputs and outputs (TensorFlow's buffers belong to hvd meanwhile) and
 * what the engine fills in. */
typedef struct {
  const kernel *kn;
  TF_OpKernelContext *ctx;
  void *done;  /* hvd_tf_keep_done()'s copy of TensorFlow's done */
  int n;       /* inputs (alltoall's splits included) */
  int tensors; /* the tensors collected (several in a grouped op) */
  TF_Tensor **in, **out;
  hvd_dtype dtype;
  void **recvs;       /* per tensor: allgather/alltoall: hvd's malloc()ed result;
                       * reducescatter: the padded output, or NULL (in place) */
  size_t *counts;     /* allgather/alltoall: received elements, per tensor per rank */
  size_t *sendcounts; /* alltoall */
  void **scratch;     /* reducescatter, per tensor: the padded input or NULL */
  int64_t shape[HVD_MAX_DIMS];
  int ndims;
  int set_size, set_rank;
  char name_buf[NAME_MAX_LEN];
} call;

static call *call_new(const kernel *kn, TF_OpKernelContext *ctx, void *done, int n) {
  call *cl = calloc(1, sizeof *cl);
  if (!cl) return NULL;
  cl->kn = kn;
  cl->ctx = ctx;
  cl->done = done;
  cl->n = n;
  cl->tensors = kn->k == K_ALLTOALL ? 1 : n;
  cl->in = calloc((size_t)n, sizeof *cl->in);
  cl->out = calloc((size_t)n, sizeof *cl->out);
  if (!cl->in || !cl->out) {
    free(cl->in);
    free(cl->out);
    free(cl);
    return NULL;
  }
  return cl;
}

/* Fails or completes the op, releases what it held and runs done: after
 * this, neither the call nor the context may be touched. */
static void call_end(call *cl, int status, const char *msg) {
  if (status < 0) fail(cl->ctx, tf_code(status), msg);
  for (int i = 0; i < cl->n; i++) {
    if (cl->in[i]) TF_DeleteTensor(cl->in[i]);
    if (cl->out[i]) TF_DeleteTensor(cl->out[i]);
  }
  for (int i = 0; i < cl->tensors; i++) {
    if (cl->recvs) free(cl->recvs[i]);
    if (cl->scratch) free(cl->scratch[i]);
  }
  free(cl->in);
  free(cl->out);
  free(cl->recvs);
  free(cl->counts);
  free(cl->sendcounts);
  free(cl->scratch);
  void *done = cl->done;
  const kernel *kn = cl->kn;
  free(cl);
  track(kn, -1);
  hvd_tf_run_done(done);
}

/* Ends a call whose enqueue hvd refused (h < 0): hvd's message is this
 * thread's. */
static void end_refused(call *cl, hvd_handle h) {
  call_end(cl, (int)h, hvd_tf_capi()->last_error());
}

/* Input i's shape into cl->shape (input 0 only) and its element count. */
static size_t input_shape(call *cl, int i) {
  TF_Tensor *t = cl->in[i];
  int nd = TF_NumDims(t);
  if (i == 0) {
    cl->ndims = nd;
    for (int d = 0; d < nd && d < HVD_MAX_DIMS; d++) cl->shape[d] = TF_Dim(t, d);
  }
  return (size_t)TF_TensorElementCount(t);
}

/* Takes the inputs; 0, or the op has failed (and ended). */
static int take_inputs(call *cl) {
  TF_Status *st = TF_NewStatus();
  for (int i = 0; i < cl->n; i++) {
    TF_GetInput(cl->ctx, i, &cl->in[i], st);
    if (TF_GetCode(st) != TF_OK) {
      char msg[600];
      snprintf(msg, sizeof msg, "%s: %s", op_names[cl->kn->k], TF_Message(st));
      TF_DeleteStatus(st);
      call_end(cl, HVD_E_INVALID, msg);
      return -1;
    }
  }
  TF_DeleteStatus(st);
  if (hvd_type(TF_TensorType(cl->in[0]), &cl->dtype) < 0) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: tensor type %d is not supported by hvd", op_names[cl->kn->k],
             (int)TF_TensorType(cl->in[0]));
    call_end(cl, HVD_E_INVALID, msg);
    return -1;
  }
  cl->set_size = cl->kn->process_set ? hvd_tf_capi()->process_set_size(cl->kn->process_set)
                                     : hvd_tf_capi()->size_of_job();
  cl->set_rank = cl->kn->process_set ? hvd_tf_capi()->process_set_rank(cl->kn->process_set)
                                     : hvd_tf_capi()->rank();
  if (cl->set_size < 0 || cl->set_rank < 0) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: process set %d: %s", op_names[cl->kn->k], cl->kn->process_set,
             hvd_tf_capi()->last_error());
    call_end(cl, HVD_E_INVALID, msg);
    return -1;
  }
  return 0;
}

/* Allocates output i with the given shape into *data; -1 when it failed
 * (the op has then ended). */
static int alloc_output(call *cl, int i, const int64_t *dims, int nd, void **data) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= dims[d];
  size_t esize = TF_DataTypeSize(TF_TensorType(cl->in[0]));
  TF_Status *st = TF_NewStatus();
  cl->out[i] = TF_AllocateOutput(cl->ctx, i, TF_TensorType(cl->in[0]), dims, nd, (size_t)n * esize,
                                 st);
  int ok = TF_GetCode(st) == TF_OK;
  TF_DeleteStatus(st);
  if (!ok) {
    cl->out[i] = NULL;
    call_end(cl, HVD_E_NOMEM, "allocating an output");
    return -1;
  }
  *data = TF_TensorData(cl->out[i]);
  return 0;
}

/* hvd's completion callback, for the ops whose outputs were allocated
 * before the enqueue: on the engine's thread, hvd_last_error() says why a
 * failed op failed. */
static void on_done(hvd_handle h, int status, void *arg) {
  (void)h;
  call_end(arg, status, status < 0 ? hvd_tf_capi()->last_error() : NULL);
}

static hvd_opts opts_for(call *cl, hvd_callback cb, int with_shape) {
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = cl->kn->process_set;
  o.prescale_factor = cl->kn->prescale;
  o.postscale_factor = cl->kn->postscale;
  o.callback = cb;
  o.callback_arg = cl;
  if (with_shape && cl->ndims > 0 && cl->ndims <= HVD_MAX_DIMS) {
    o.shape = cl->shape;
    o.ndims = cl->ndims;
  }
  return o;
}

#define NAME(cl) tensor_name((cl)->kn, (cl)->name_buf, sizeof(cl)->name_buf)

/* ---- allreduce, grouped allreduce, broadcast ---- */

static void run_allreduce(call *cl) {
  size_t count = input_shape(cl, 0);
  void *out;
  if (alloc_output(cl, 0, cl->shape, cl->ndims, &out) < 0) return;
  hvd_opts o = opts_for(cl, on_done, 1);
  hvd_handle h = hvd_tf_capi()->allreduce_async_opts(TF_TensorData(cl->in[0]), out, count,
                                                     cl->dtype, (hvd_op)cl->kn->reduce_op, NAME(cl),
                                                     &o);
  if (h < 0) end_refused(cl, h);
}

static void run_grouped_allreduce(call *cl) {
  const void **sends = calloc((size_t)cl->n, sizeof *sends);
  void **recvs = calloc((size_t)cl->n, sizeof *recvs);
  size_t *counts = calloc((size_t)cl->n, sizeof *counts);
  int ended = 0;
  hvd_handle h = sends && recvs && counts ? 0 : HVD_E_NOMEM;
  for (int i = 0; i < cl->n && h == 0; i++) {
    TF_Tensor *t = cl->in[i];
    int64_t dims[HVD_MAX_DIMS];
    int nd = TF_NumDims(t);
    for (int d = 0; d < nd && d < HVD_MAX_DIMS; d++) dims[d] = TF_Dim(t, d);
    counts[i] = (size_t)TF_TensorElementCount(t);
    sends[i] = TF_TensorData(t);
    if (alloc_output(cl, i, dims, nd, &recvs[i]) < 0) ended = 1, h = HVD_E_NOMEM;
  }
  if (h == 0) {
    hvd_opts o = opts_for(cl, on_done, 0);
    h = hvd_tf_capi()->grouped_allreduce_async(sends, recvs, counts, cl->n, cl->dtype,
                                               (hvd_op)cl->kn->reduce_op, NAME(cl), &o);
    if (h < 0) end_refused(cl, h);
  } else if (!ended) {
    call_end(cl, HVD_E_NOMEM, "out of memory");
  }
  free(sends);
  free(recvs);
  free(counts);
}

/* Broadcast into a new output (Horovod's op returns a new tensor). */
static void run_broadcast(call *cl) {
  size_t count = input_shape(cl, 0);
  void *out;
  if (alloc_output(cl, 0, cl->shape, cl->ndims, &out) < 0) return;
  memcpy(out, TF_TensorData(cl->in[0]), TF_TensorByteSize(cl->in[0]));
  hvd_opts o = opts_for(cl, on_done, 1);
  hvd_handle h = hvd_tf_capi()->broadcast_async_opts(out, count, cl->dtype, cl->kn->root_rank,
                                                     NAME(cl), &o);
  if (h < 0) end_refused(cl, h);
}

/* ---- allgather and alltoall: outputs sized when the engine answers ---- */

/* Elements per row (the first dimension) of t; a scalar is one row of one. */
static size_t row_size(const TF_Tensor *t) {
  size_t row = 1;
  for (int d = 1; d < TF_NumDims(t); d++) row *= (size_t)TF_Dim(t, d);
  return row;
}

/* Allocates output i: `rows` rows of in[i]'s other dimensions. */
static int alloc_rows(call *cl, int i, int64_t rows, void **data) {
  int64_t dims[HVD_MAX_DIMS];
  int nd = TF_NumDims(cl->in[i]) > 0 ? TF_NumDims(cl->in[i]) : 1;
  dims[0] = rows;
  for (int d = 1; d < nd && d < HVD_MAX_DIMS; d++) dims[d] = TF_Dim(cl->in[i], d);
  return alloc_output(cl, i, dims, nd, data);
}

/* The rows of counts[] elements: 0, or a rank sent a part of a row. */
static int rows_of(call *cl, size_t row, const size_t *counts, int64_t *total, char *msg,
                   size_t cap) {
  *total = 0;
  for (int r = 0; r < cl->set_size; r++) {
    if (row == 0 ? counts[r] != 0 : counts[r] % row != 0) {
      snprintf(msg, cap,
               "%s '%s': rank %d sent %zu elements, not whole rows of %zu "
               "(the tensors' dimensions after the first differ between ranks)",
               kind_words[cl->kn->k], cl->kn->name[0] ? cl->kn->name : "(eager)", r, counts[r],
               row);
      return -1;
    }
    *total += row ? (int64_t)(counts[r] / row) : 0;
  }
  return 0;
}

/* alltoall's second output: the rows received from each rank. */
static int received_splits(call *cl, size_t row) {
  int64_t n = cl->set_size;
  TF_Status *st = TF_NewStatus();
  TF_Tensor *splits = TF_AllocateOutput(cl->ctx, 1, TF_INT32, &n, 1, (size_t)n * 4, st);
  int ok = TF_GetCode(st) == TF_OK;
  TF_DeleteStatus(st);
  if (!ok) {
    call_end(cl, HVD_E_NOMEM, "allocating received_splits");
    return -1;
  }
  int32_t *s = TF_TensorData(splits);
  for (int r = 0; r < cl->set_size; r++) s[r] = row ? (int32_t)(cl->counts[r] / row) : 0;
  TF_DeleteTensor(splits);
  return 0;
}

static void on_gathered(hvd_handle h, int status, void *arg) {
  (void)h;
  call *cl = arg;
  if (status < 0) {
    call_end(cl, status, hvd_tf_capi()->last_error());
    return;
  }
  size_t esize = hvd_tf_capi()->dtype_size(cl->dtype);
  for (int i = 0; i < cl->tensors; i++) {
    char msg[700];
    int64_t rows;
    size_t row = row_size(cl->in[i]);
    if (rows_of(cl, row, cl->counts + (size_t)i * cl->set_size, &rows, msg, sizeof msg) < 0) {
      call_end(cl, HVD_E_MISMATCH, msg);
      return;
    }
    void *out;
    if (alloc_rows(cl, i, rows, &out) < 0) return;
    if (rows) memcpy(out, cl->recvs[i], (size_t)rows * row * esize);
  }
  if (cl->kn->k == K_ALLTOALL && received_splits(cl, row_size(cl->in[0])) < 0) return;
  call_end(cl, 0, NULL);
}

/* Allocates what the engine fills: results and counts of every tensor. */
static int gather_arrays(call *cl) {
  cl->recvs = calloc((size_t)cl->tensors, sizeof *cl->recvs);
  cl->counts = calloc((size_t)cl->tensors * (size_t)cl->set_size, sizeof *cl->counts);
  if (cl->recvs && cl->counts) return 0;
  call_end(cl, HVD_E_NOMEM, "out of memory");
  return -1;
}

/* allgather and grouped allgather; a single tensor's shape goes with it,
 * so that ranks whose dimensions after the first differ all fail. */
static void run_allgather(call *cl) {
  if (gather_arrays(cl) < 0) return;
  input_shape(cl, 0);
  hvd_opts o = opts_for(cl, on_gathered, cl->kn->k == K_ALLGATHER);
  hvd_handle h;
  if (cl->kn->k == K_ALLGATHER) {
    h = hvd_tf_capi()->allgather_async(TF_TensorData(cl->in[0]),
                                       (size_t)TF_TensorElementCount(cl->in[0]), cl->dtype,
                                       &cl->recvs[0], cl->counts, NAME(cl), &o);
  } else {
    const void **sends = calloc((size_t)cl->tensors, sizeof *sends);
    size_t *counts = calloc((size_t)cl->tensors, sizeof *counts);
    h = HVD_E_NOMEM;
    if (sends && counts) {
      for (int i = 0; i < cl->tensors; i++) {
        sends[i] = TF_TensorData(cl->in[i]);
        counts[i] = (size_t)TF_TensorElementCount(cl->in[i]);
      }
      h = hvd_tf_capi()->grouped_allgather_async(sends, counts, cl->tensors, cl->dtype, cl->recvs,
                                                 cl->counts, NAME(cl), &o);
    }
    free(sends);
    free(counts);
    if (h == HVD_E_NOMEM && (!sends || !counts)) {
      call_end(cl, h, "out of memory");
      return;
    }
  }
  if (h < 0) end_refused(cl, h);
}

/* Checks alltoall's splits (rows to each rank; none: equal parts) and
 * turns them into element counts; -1 when the op failed (ended). */
static int alltoall_counts(call *cl, size_t row) {
  int n = cl->set_size;
  int64_t ns = TF_TensorElementCount(cl->in[1]);
  const int32_t *s = TF_TensorData(cl->in[1]);
  int64_t rows = TF_NumDims(cl->in[0]) > 0 ? TF_Dim(cl->in[0], 0) : 1, sum = 0;
  char msg[300] = "";
  if (ns == 0 && rows % n != 0)
    snprintf(msg, sizeof msg,
             "alltoall: the first dimension (%lld) must be divisible by the "
             "number of processes (%d) when splits is not given",
             (long long)rows, n);
  else if (ns != 0 && ns != n)
    snprintf(msg, sizeof msg,
             "alltoall: splits has %lld entries, expected %d (one per "
             "process)",
             (long long)ns, n);
  for (int r = 0; !msg[0] && r < n; r++) {
    int64_t k = ns ? s[r] : rows / n;
    if (k < 0) sum = -1;
    if (sum >= 0) sum += k;
    cl->sendcounts[r] = (size_t)(k < 0 ? 0 : k) * row;
  }
  if (!msg[0] && sum != rows)
    snprintf(msg, sizeof msg,
             "alltoall: splits must be non-negative and sum to the first "
             "dimension (%lld)",
             (long long)rows);
  if (!msg[0]) return 0;
  call_end(cl, HVD_E_INVALID, msg);
  return -1;
}

/* alltoall(tensor, splits): splits[r] rows to rank r. */
static void run_alltoall(call *cl) {
  if (gather_arrays(cl) < 0) return;
  if (!(cl->sendcounts = calloc((size_t)cl->set_size, sizeof *cl->sendcounts))) {
    call_end(cl, HVD_E_NOMEM, "out of memory");
    return;
  }
  if (alltoall_counts(cl, row_size(cl->in[0])) < 0) return;
  input_shape(cl, 0);
  hvd_opts o = opts_for(cl, on_gathered, 1);
  hvd_handle h = hvd_tf_capi()->alltoall_async(TF_TensorData(cl->in[0]), cl->sendcounts, cl->dtype,
                                               &cl->recvs[0], cl->counts, NAME(cl), &o);
  if (h < 0) end_refused(cl, h);
}

/* ---- reducescatter: Horovod's split of the first dimension ---- */

/* hvd splits elements evenly; Horovod gives rank r dim0 / n rows, one more
 * when r < dim0 % n.  An uneven dim0 is padded to n equal blocks (the
 * blocks' tails are zeros nobody keeps), and the output is this rank's
 * first rows of its block. */
static int64_t rows_for(int64_t dim0, int n, int r) { return dim0 / n + (r < dim0 % n ? 1 : 0); }

static void on_scattered(hvd_handle h, int status, void *arg) {
  (void)h;
  call *cl = arg;
  for (int i = 0; status == 0 && i < cl->tensors; i++) {
    if (!cl->recvs[i]) continue; /* received in place */
    size_t bytes = (size_t)rows_for(TF_Dim(cl->in[i], 0), cl->set_size, cl->set_rank) *
                   row_size(cl->in[i]) * hvd_tf_capi()->dtype_size(cl->dtype);
    if (bytes) memcpy(TF_TensorData(cl->out[i]), cl->recvs[i], bytes);
  }
  call_end(cl, status, status < 0 ? hvd_tf_capi()->last_error() : NULL);
}

/* Tensor i's send and receive buffers (padded when its dim0 is uneven)
 * and element count; -1 when the op failed (ended). */
static int scatter_buffers(call *cl, int i, const void **send, void **recv, size_t *count) {
  TF_Tensor *t = cl->in[i];
  if (TF_NumDims(t) == 0) {
    call_end(cl, HVD_E_INVALID,
             "reducescatter: a scalar (zero-dimensional tensor) cannot be "
             "scattered");
    return -1;
  }
  int n = cl->set_size;
  int64_t dim0 = TF_Dim(t, 0), block = (dim0 + n - 1) / n;
  size_t row = row_size(t), rowb = row * hvd_tf_capi()->dtype_size(cl->dtype);
  if (alloc_rows(cl, i, rows_for(dim0, n, cl->set_rank), recv) < 0) return -1;
  *send = TF_TensorData(t);
  *count = (size_t)(n * block) * row;
  if (dim0 % n == 0) return 0;
  cl->scratch[i] = calloc((size_t)(n * block) * rowb + 1, 1);
  cl->recvs[i] = malloc((size_t)block * rowb + 1);
  if (!cl->scratch[i] || !cl->recvs[i]) {
    call_end(cl, HVD_E_NOMEM, "out of memory");
    return -1;
  }
  for (int r = 0, at = 0; r < n; at += (int)rows_for(dim0, n, r), r++) /* rank r's at block r */
    memcpy((char *)cl->scratch[i] + (size_t)(r * block) * rowb,
           (const char *)*send + (size_t)at * rowb, (size_t)rows_for(dim0, n, r) * rowb);
  *send = cl->scratch[i];
  *recv = cl->recvs[i];
  return 0;
}

static void run_reducescatter(call *cl) {
  int k = cl->tensors;
  const void **sends = calloc((size_t)k, sizeof *sends);
  void **recvs = calloc((size_t)k, sizeof *recvs);
  size_t *counts = calloc((size_t)k, sizeof *counts);
  cl->recvs = calloc((size_t)k, sizeof *cl->recvs);
  cl->scratch = calloc((size_t)k, sizeof *cl->scratch);
  hvd_handle h = 0;
  if (!sends || !recvs || !counts || !cl->recvs || !cl->scratch) {
    call_end(cl, HVD_E_NOMEM, "out of memory");
    goto free_arrays;
  }
  for (int i = 0; i < k; i++)
    if (scatter_buffers(cl, i, &sends[i], &recvs[i], &counts[i]) < 0) goto free_arrays;
  if (cl->kn->k == K_REDUCESCATTER) {
    /* The negotiated shape: the padded one, the same on every rank. */
    input_shape(cl, 0);
    cl->shape[0] = (int64_t)(counts[0] / row_size(cl->in[0]));
    hvd_opts o = opts_for(cl, on_scattered, 1);
    h = hvd_tf_capi()->reducescatter_async(sends[0], recvs[0], counts[0], cl->dtype,
                                           (hvd_op)cl->kn->reduce_op, NAME(cl), &o);
  } else {
    hvd_opts o = opts_for(cl, on_scattered, 0);
    h = hvd_tf_capi()->grouped_reducescatter_async(sends, recvs, counts, k, cl->dtype,
                                                   (hvd_op)cl->kn->reduce_op, NAME(cl), &o);
  }
  if (h < 0) end_refused(cl, h);
free_arrays:
  free(sends);
  free(recvs);
  free(counts);
}

/* ---- the asynchronous compute ---- */

static void compute_async(void *k, TF_OpKernelContext *ctx, TF_AsyncOpKernelDoneCallback *done) {
  const kernel *kn = k;
  if (!ready(ctx)) {
    TF_RunAsyncOpKernelDoneCallback(done);
    return;
  }
  int n = TF_NumInputs(ctx);
  void *kept = hvd_tf_keep_done(done);
  call *cl = kept ? call_new(kn, ctx, kept, n) : NULL;
  if (!cl) {
    if (kept) {
      fail(ctx, TF_RESOURCE_EXHAUSTED, "out of memory");
      hvd_tf_run_done(kept);
      return;
    }
    fail(ctx, TF_RESOURCE_EXHAUSTED, "out of memory");
    TF_RunAsyncOpKernelDoneCallback(done);
    return;
  }
  track(kn, 1);
  if (take_inputs(cl) < 0) return;
  switch (kn->k) {
    case K_ALLREDUCE: run_allreduce(cl); break;
    case K_GROUPED_ALLREDUCE: run_grouped_allreduce(cl); break;
    case K_ALLGATHER:
    case K_GROUPED_ALLGATHER: run_allgather(cl); break;
    case K_BROADCAST: run_broadcast(cl); break;
    case K_ALLTOALL: run_alltoall(cl); break;
    case K_REDUCESCATTER:
    case K_GROUPED_REDUCESCATTER: run_reducescatter(cl); break;
    default: call_end(cl, HVD_E_INVALID, "not a collective"); break;
  }
}

/* ---- the synchronous ops: join, barrier and the topology queries ---- */

/* Join and barrier block this thread until every rank arrives (the
 * table's join/barrier are blocking calls); the queries answer at once. */
static void compute_sync(void *k, TF_OpKernelContext *ctx) {
  const kernel *kn = k;
  if (!ready(ctx)) return;
  int v;
  switch (kn->k) {
    case K_JOIN: v = hvd_tf_capi()->join(); break;
    case K_BARRIER: v = hvd_tf_capi()->barrier(); break;
    case K_SIZE: v = hvd_tf_capi()->size_of_job(); break;
    case K_LOCAL_SIZE: v = hvd_tf_capi()->local_size(); break;
    case K_RANK: v = hvd_tf_capi()->rank(); break;
    case K_LOCAL_RANK: v = hvd_tf_capi()->local_rank(); break;
    case K_PROCESS_SET_INCLUDED:
      v = kn->process_set == 0 ? 1 : hvd_tf_capi()->process_set_rank(kn->process_set) >= 0;
      break;
    default: v = HVD_E_INVALID; break;
  }
  if (v < 0) {
    fail(ctx, tf_code(v), hvd_tf_capi()->last_error());
    return;
  }
  if (kn->k == K_BARRIER) return;
  TF_Status *st = TF_NewStatus();
  TF_Tensor *t = TF_AllocateOutput(ctx, 0, TF_INT32, NULL, 0, sizeof(int32_t), st);
  if (TF_GetCode(st) == TF_OK) {
    *(int32_t *)TF_TensorData(t) = v;
    TF_DeleteTensor(t);
  } else {
    TF_OpKernelContext_Failure(ctx, st);
  }
  TF_DeleteStatus(st);
}

/* ---- registration, when TensorFlow loads the library ---- */

#define TYPES "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}"

static void same_shape(TF_ShapeInferenceContext *ctx, TF_Status *st) {
  int64_t n = TF_ShapeInferenceContextNumInputs(ctx);
  for (int i = 0; i < n; i++) {
    TF_ShapeHandle *s = TF_NewShapeHandle();
    TF_ShapeInferenceContextGetInput(ctx, i, s, st);
    if (TF_GetCode(st) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, i, s, st);
    TF_DeleteShapeHandle(s);
  }
}

static void unknown_shape(TF_ShapeInferenceContext *ctx, TF_Status *st) {
  (void)st;
  TF_ShapeInferenceContextSetUnknownShape(ctx, st);
}

static void scalar_shape(TF_ShapeInferenceContext *ctx, TF_Status *st) {
  TF_ShapeHandle *s = TF_ShapeInferenceContextScalar(ctx);
  TF_ShapeInferenceContextSetOutput(ctx, 0, s, st);
  TF_DeleteShapeHandle(s);
}

typedef struct {
  kind k;
  const char *const *spec; /* inputs/outputs/attrs: "in:...", "out:...", "attr:..." */
  void (*shape)(TF_ShapeInferenceContext *, TF_Status *);
  void *(*create)(TF_OpKernelConstruction *);
  int async;
} op_def;

#define SCALE_ATTRS "attr:prescale_factor: float = 1.0", "attr:postscale_factor: float = 1.0"
#define COMMON_ATTRS "attr:ignore_name_scope: bool = false", "attr:process_set_id: int = 0"

static const char *const allreduce_spec[] = {
    "attr:T: " TYPES, "attr:reduce_op: int", SCALE_ATTRS, COMMON_ATTRS,
    "in:tensor: T",   "out:sum: T",          NULL};
static const char *const grouped_allreduce_spec[] = {"attr:T: " TYPES,
                                                     "attr:reduce_op: int",
                                                     SCALE_ATTRS,
                                                     COMMON_ATTRS,
                                                     "attr:num_tensors: int >= 1",
                                                     "in:tensors: num_tensors*T",
                                                     "out:sum: num_tensors*T",
                                                     NULL};
static const char *const allgather_spec[] = {"attr:T: " TYPES, COMMON_ATTRS, "in:tensor: T",
                                             "out:output: T", NULL};
static const char *const broadcast_spec[] = {"attr:T: " TYPES, "attr:root_rank: int", COMMON_ATTRS,
                                             "in:tensor: T",   "out:output: T",       NULL};
static const char *const alltoall_spec[] = {"attr:T: " TYPES,
                                            COMMON_ATTRS,
                                            "in:tensor: T",
                                            "in:splits: int32",
                                            "out:output: T",
                                            "out:received_splits: int32",
                                            NULL};
static const char *const reducescatter_spec[] = {
    "attr:T: " TYPES, "attr:reduce_op: int", SCALE_ATTRS, COMMON_ATTRS,
    "in:tensor: T",   "out:output: T",       NULL};
static const char *const grouped_allgather_spec[] = {"attr:T: " TYPES,
                                                     COMMON_ATTRS,
                                                     "attr:num_tensors: int >= 1",
                                                     "in:tensors: num_tensors*T",
                                                     "out:outputs: num_tensors*T",
                                                     NULL};
static const char *const grouped_reducescatter_spec[] = {"attr:T: " TYPES,
                                                         "attr:reduce_op: int",
                                                         SCALE_ATTRS,
                                                         COMMON_ATTRS,
                                                         "attr:num_tensors: int >= 1",
                                                         "in:tensors: num_tensors*T",
                                                         "out:outputs: num_tensors*T",
                                                         NULL};
static const char *const join_spec[] = {"out:output: int32", NULL};
static const char *const barrier_spec[] = {"attr:process_set_id: int = 0", NULL};
static const char *const query_spec[] = {"out:output: int32", NULL};
static const char *const included_spec[] = {"attr:process_set_id: int = 0", "out:output: int32",
                                            NULL};

static const op_def defs[] = {
    {K_ALLREDUCE, allreduce_spec, same_shape, create_allreduce, 1},
    {K_GROUPED_ALLREDUCE, grouped_allreduce_spec, same_shape, create_grouped_allreduce, 1},
    {K_ALLGATHER, allgather_spec, unknown_shape, create_allgather, 1},
    {K_BROADCAST, broadcast_spec, same_shape, create_broadcast, 1},
    {K_ALLTOALL, alltoall_spec, unknown_shape, create_alltoall, 1},
    {K_REDUCESCATTER, reducescatter_spec, unknown_shape, create_reducescatter, 1},
    {K_GROUPED_ALLGATHER, grouped_allgather_spec, unknown_shape, create_grouped_allgather, 1},
    {K_GROUPED_REDUCESCATTER, grouped_reducescatter_spec, unknown_shape,
     create_grouped_reducescatter, 1},
    {K_JOIN, join_spec, scalar_shape, create_join, 0},
    {K_BARRIER, barrier_spec, NULL, create_barrier, 0},
    {K_SIZE, query_spec, scalar_shape, create_size, 0},
    {K_LOCAL_SIZE, query_spec, scalar_shape, create_local_size, 0},
    {K_RANK, query_spec, scalar_shape, create_rank, 0},
    {K_LOCAL_RANK, query_spec, scalar_shape, create_local_rank, 0},
    {K_PROCESS_SET_INCLUDED, included_spec, scalar_shape, create_process_set_included, 0},
};

static void register_op(const op_def *d, TF_Status *st) {
  const char *name = op_names[d->k];
  TF_OpDefinitionBuilder *b = TF_NewOpDefinitionBuilder(name);
  for (const char *const *s = d->spec; *s; s++) {
    if (strncmp(*s, "in:", 3) == 0)
      TF_OpDefinitionBuilderAddInput(b, *s + 3);
    else if (strncmp(*s, "out:", 4) == 0)
      TF_OpDefinitionBuilderAddOutput(b, *s + 4);
    else
      TF_OpDefinitionBuilderAddAttr(b, *s + 5);
  }
  /* Collectives and joins must run every time, in every step. */
  TF_OpDefinitionBuilderSetIsStateful(b, 1);
  if (d->shape) TF_OpDefinitionBuilderSetShapeInferenceFunction(b, d->shape);
  TF_RegisterOpDefinition(b, st);
  if (TF_GetCode(st) != TF_OK) return;
  TF_KernelBuilder *kb =
      d->async ? TF_NewAsyncKernelBuilder(name, "CPU", d->create, compute_async, kernel_delete)
               : TF_NewKernelBuilder(name, "CPU", d->create, compute_sync, kernel_delete);
  TF_RegisterKernelBuilder(name, kb, st);
}

__attribute__((constructor)) static void register_all(void) {
  TF_Status *st = TF_NewStatus();
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
    register_op(&defs[i], st);
    if (TF_GetCode(st) != TF_OK) {
      fprintf(stderr, "hvd.tensorflow: registering %s: %s\n", op_names[defs[i].k], TF_Message(st));
      TF_SetStatus(st, TF_OK, "");
    }
  }
  TF_DeleteStatus(st);
}
