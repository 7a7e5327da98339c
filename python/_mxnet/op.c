/*
 * op.c -- one hvd.mxnet collective as an operation of MXNet's engine: its
 * checks at the call, the push with the NDArrays' dependencies, and its
 * completion from hvd's engine (hvd_mx.h says how they fit).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include "hvd_mx.h"

const hvd_capi *mx_capi;

static _Thread_local char last_error[1536];

/* Called once by hvd.mxnet with the address of hvd._C._capi's table.
 * Returns 0, or -1 when the table is older than this library needs. */
HVD_MX_EXPORT int hvd_mx_set_capi(const void *table) {
  const hvd_capi *t = table;
  if (!t || t->version != HVD_CAPI_VERSION || t->size < sizeof(hvd_capi)) return -1;
  mx_capi = t;
  return 0;
}

/* Why the last call of this thread that returned -1 failed. */
HVD_MX_EXPORT const char *hvd_mx_last_error(void) { return last_error; }

int mx_refuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return -1;
}

/* MXNet's dtype flags (mshadow's TypeFlag) as hvd's. */
static int hvd_type(int flag, hvd_dtype *out) {
  static const int map[] = {
      [0] = HVD_FLOAT32, [1] = HVD_FLOAT64, [2] = HVD_FLOAT16, [3] = HVD_UINT8,
      [4] = HVD_INT32,   [5] = HVD_INT8,    [6] = HVD_INT64,   [7] = HVD_BOOL,
      [8] = HVD_INT16,   [9] = HVD_UINT16,  [10] = -1,         [11] = -1,
      [12] = HVD_BFLOAT16,
  };
  if (flag < 0 || flag >= (int)(sizeof map / sizeof map[0]) || map[flag] < 0) return -1;
  *out = (hvd_dtype)map[flag];
  return 0;
}

/* The shape of a (at most HVD_MAX_DIMS dimensions) and its element count;
 * -1 after mx_refuse(). */
static int64_t shape_of(NDArrayHandle a, int64_t *shape, int *ndims) {
  int nd = 0;
  const int *dims = NULL;
  if (MXNDArrayGetShapeEx(a, &nd, &dims) != 0) return mx_refuse("%s", MXGetLastError());
  if (nd > HVD_MAX_DIMS) return mx_refuse("a tensor of %d dimensions (at most %d)", nd,
                                          HVD_MAX_DIMS);
  int64_t count = 1;
  for (int d = 0; d < nd; d++) {
    if (dims[d] < 0) return mx_refuse("an NDArray of unknown shape");
    shape[d] = dims[d];
    count *= dims[d];
  }
  *ndims = nd < 0 ? 0 : nd;
  return count;
}

size_t mx_row_size(NDArrayHandle a) {
  int64_t shape[HVD_MAX_DIMS];
  int nd = 0;
  if (shape_of(a, shape, &nd) < 0 || nd == 0) return 1;
  size_t row = 1;
  for (int d = 1; d < nd; d++) row *= (size_t)shape[d];
  return row;
}

/* Checks that a is a dense CPU NDArray of a dtype hvd takes. */
static int check_array(NDArrayHandle a, hvd_dtype *dtype) {
  int flag = -1, stype = 0, dev = 0, dev_id = 0;
  if (MXNDArrayGetDType(a, &flag) != 0 || MXNDArrayGetStorageType(a, &stype) != 0 ||
      MXNDArrayGetContext(a, &dev, &dev_id) != 0)
    return mx_refuse("%s", MXGetLastError());
  if (stype != 0) return mx_refuse("sparse NDArrays (storage type %d) are not supported", stype);
  if (dev == HVD_MX_GPU) return mx_refuse("NDArrays on GPU (gpu(%d)) are not supported: "
                                          "this hvd.mxnet takes CPU NDArrays", dev_id);
  if (hvd_type(flag, dtype) < 0) return mx_refuse("NDArrays of dtype flag %d are not "
                                                  "supported", flag);
  return 0;
}

/* Frees op and its NDArrays' shallow copies: MXNet's deleter of the
 * operation's parameter, called once the operation is done (and the
 * cleanup of a half-made op: every array may be NULL). */
void mx_op_free(void *param) {
  mx_op *op = param;
  for (int i = 0; op->in && op->out && i < op->n; i++) {
    if (op->in[i]) MXNDArrayFree(op->in[i]);
    if (op->out[i] && op->out[i] != op->in[i]) MXNDArrayFree(op->out[i]);
  }
  for (int i = 0; op->scratch && i < 2 * op->n; i++) free(op->scratch[i]);
  if (op->splits) MXNDArrayFree(op->splits);
  if (op->holder) MXNDArrayFree(op->holder);
  free(op->in);
  free(op->out);
  free(op->ins);
  free(op->outs);
  free(op->counts);
  free(op->scratch);
  free(op);
}

static mx_op *op_alloc(mx_kind kind, int n) {
  mx_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->kind = kind;
  op->n = n;
  op->in = calloc((size_t)n, sizeof *op->in);
  op->out = calloc((size_t)n, sizeof *op->out);
  op->ins = calloc((size_t)n, sizeof *op->ins);
  op->outs = calloc((size_t)n, sizeof *op->outs);
  op->counts = calloc((size_t)n, sizeof *op->counts);
  op->scratch = calloc((size_t)n * 2, sizeof *op->scratch);
  hvd_opts init = HVD_OPTS_INIT;
  op->opts = init;
  if (op->in && op->out && op->ins && op->outs && op->counts && op->scratch) return op;
  mx_op_free(op);
  return NULL;
}

/* Holds tensor i's NDArrays (shallow copies: the caller may drop its own
 * before MXNet runs the op) and checks them. */
static int take_tensor(mx_op *op, int i, NDArrayHandle in, NDArrayHandle out) {
  hvd_dtype dtype;
  int64_t shape[HVD_MAX_DIMS];
  int nd;
  if (check_array(in, &dtype) < 0) return -1;
  if (i > 0 && dtype != op->dtype)
    return mx_refuse("the tensors of a grouped call must have one dtype");
  op->dtype = dtype;
  int64_t count = shape_of(in, i == 0 ? op->shape : shape, i == 0 ? &op->ndims : &nd);
  if (count < 0) return -1;
  op->counts[i] = (size_t)count;
  if (mx_op_hold(in, &op->in[i]) < 0) return -1;
  if (out == in) {
    op->out[i] = op->in[i];
    return 0;
  }
  if (!out) return 0;
  if (check_array(out, &dtype) < 0) return -1;
  return mx_op_hold(out, &op->out[i]);
}

int mx_op_hold(NDArrayHandle a, NDArrayHandle *slot) {
  if (MXShallowCopyNDArray(a, slot) != 0) return mx_refuse("%s", MXGetLastError());
  return 0;
}

/* The process set's size and this rank's place in it. */
static int take_set(mx_op *op, int process_set) {
  op->opts.process_set = process_set;
  op->set_size = process_set ? mx_capi->process_set_size(process_set) : mx_capi->size_of_job();
  op->set_rank = process_set ? mx_capi->process_set_rank(process_set) : mx_capi->rank();
  if (op->set_size < 0 || op->set_rank < 0)
    return mx_refuse("process set %d: %s", process_set, mx_capi->last_error());
  return 0;
}

mx_op *mx_op_new(mx_kind kind, NDArrayHandle *in, NDArrayHandle *out, int n,
                 const char *name, int process_set) {
  if (!mx_capi || !mx_capi->is_initialized()) {
    mx_refuse("Horovod has not been initialized; use hvd.init().");
    return NULL;
  }
  if (n < 1 || !in || !name || strlen(name) > MX_NAME_MAX) {
    mx_refuse("a call needs one tensor or more and a name of at most %d bytes", MX_NAME_MAX);
    return NULL;
  }
  mx_op *op = op_alloc(kind, n);
  if (!op) {
    mx_refuse("out of memory");
    return NULL;
  }
  snprintf(op->name, sizeof op->name, "%s", name);
  int rc = take_set(op, process_set);
  for (int i = 0; rc == 0 && i < n; i++) rc = take_tensor(op, i, in[i], out ? out[i] : NULL);
  if (rc == 0) return op;
  mx_op_free(op);
  return NULL;
}

/* A zero-size NDArray may have no buffer; hvd takes none as a bad
 * argument, so such tensors point here (nothing is read or written). */
static char no_data[8];

/* a's buffer, on MXNet's thread that runs the op.  Through DLPack, not
 * MXNDArrayGetData: that one turns an array in MKL-DNN's internal layout
 * into the default layout by pushing an operation and waiting for it,
 * which here waits for this very op.  DLPack refuses such an array
 * instead: the op fails saying what to do (broadcast_parameters hands
 * over parameters in the default layout). */
int mx_data_of(const mx_op *op, NDArrayHandle a, void **out) {
  DLManagedTensorHandle dl = NULL;
  if (MXNDArrayToDLPack(a, &dl) != 0) {
    if (!strstr(MXGetLastError(), "MKLDNN")) return mx_refuse("%s", MXGetLastError());
    return mx_refuse("'%s': the NDArray is in MKL-DNN's internal layout (an output or a "
                     "weight of an MKL-DNN operator): pass a copy (x.copy()), which has the "
                     "default layout", op->name);
  }
  const DLTensor *t = &((const DLManagedTensor *)dl)->dl_tensor;
  char *p = t->data ? (char *)t->data + t->byte_offset : NULL;
  MXNDArrayCallDLPackDeleter(dl); /* op's shallow copy keeps the buffer */
  *out = p ? p : no_data;
  return 0;
}

/* MXNet runs the operation: its inputs are written, its outputs free. */
static void engine_run(void *rctx, void *on_complete, void *param) {
  (void)rctx;
  mx_op *op = param;
  op->done = *(const hvd_mx_on_complete *)on_complete;
  for (int i = 0; i < op->n; i++) {
    if (mx_data_of(op, op->in[i], &op->ins[i]) != 0 ||
        (op->out[i] && mx_data_of(op, op->out[i], &op->outs[i]) != 0)) {
      mx_op_end(op, HVD_E_INVALID, hvd_mx_last_error());
      return;
    }
  }
  op->run(op);
}

int mx_push_reduction(mx_kind kind, void (*run)(mx_op *), NDArrayHandle *in,
                      NDArrayHandle *out, int n, const char *name, int reduce_op,
                      double prescale, double postscale, int process_set, int priority) {
  mx_op *op = mx_op_new(kind, in, out, n, name, process_set);
  if (!op) return -1;
  op->reduce_op = reduce_op;
  op->opts.prescale_factor = prescale;
  op->opts.postscale_factor = postscale;
  return mx_op_push(op, run, priority);
}

int mx_op_push(mx_op *op, void (*run)(mx_op *), int priority) {
  static const hvd_mx_context cpu = {1, 0};
  static const int prop = HVD_MX_CPU_PRIORITIZED;
  /* Inputs read, outputs (and the holder) written; an in-place tensor
   * only written, as MXNet's engine takes no NDArray in both lists. */
  NDArrayHandle *deps = calloc(2 * (size_t)op->n + 2, sizeof *deps);
  if (!deps) {
    mx_op_free(op);
    return mx_refuse("out of memory");
  }
  NDArrayHandle *muts = deps + op->n + 1;
  int nc = 0, nm = 0;
  for (int i = 0; i < op->n; i++) {
    if (op->in[i] != op->out[i]) deps[nc++] = op->in[i];
    if (op->out[i]) muts[nm++] = op->out[i];
  }
  if (op->splits) deps[nc++] = op->splits;
  if (op->holder) muts[nm++] = op->holder;
  op->run = run;
  int rc = MXEnginePushAsyncND(engine_run, op, mx_op_free, &cpu, deps, nc, muts, nm, &prop,
                               priority, op->name, 0);
  free(deps);
  /* A failed push is not freed here: MXNet may have handed op to its
   * deleter already (a leak in a case that does not happen beats a
   * double free). */
  if (rc != 0) return mx_refuse("%s", MXGetLastError());
  return 0;
}

void mx_op_end(mx_op *op, int status, const char *msg) {
  hvd_mx_on_complete done = op->done; /* MXNet may free op as soon as it is told */
  if (status == 0)
    done.callback(done.engine, done.param, NULL);
  else
    hvd_mx_fail_engine_op(&done, msg && msg[0] ? msg : mx_capi->strerror(status));
}

void mx_on_done(hvd_handle h, int status, void *arg) {
  (void)h;
  mx_op_end(arg, status, status < 0 ? mx_capi->last_error() : NULL);
}

void mx_end_refused(mx_op *op, hvd_handle h) { mx_op_end(op, (int)h, mx_capi->last_error()); }
