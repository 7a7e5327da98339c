/*
 * scatter.c -- reducescatter, one tensor or a group, with Horovod's split
 * of the first dimension: rank r of n keeps dim0 / n rows, one more when
 * r < dim0 % n.  hvd splits elements evenly, so an uneven dim0 is padded
 * to n equal blocks (their tails are zeros nobody keeps) and each rank
 * copies its first rows out of its block.  The caller allocates the
 * outputs with this rank's shape before the push.
 */
#include <stdlib.h>
#include <string.h>

#include "hvd_mx.h"

static int64_t rows_for(int64_t dim0, int n, int r) { return dim0 / n + (r < dim0 % n ? 1 : 0); }

static size_t row_bytes(const mx_op *op, int i) {
  return mx_row_size(op->in[i]) * mx_capi->dtype_size(op->dtype);
}

static int64_t dim0_of(const mx_op *op, int i) {
  size_t row = mx_row_size(op->in[i]);
  return row ? (int64_t)(op->counts[i] / row) : 0;
}

/* Reduces each in[i] over the process set and leaves this rank's rows in
 * out[i] (allocated by the caller: rows_for(dim0) rows).  n > 1: one
 * group, tensor i named "<name>.<i>".  0, or -1 with hvd_mx_last_error(). */
HVD_MX_EXPORT int hvd_mx_reducescatter(NDArrayHandle *in, NDArrayHandle *out, int n,
                                       const char *name, int reduce_op, double prescale,
                                       double postscale, int process_set, int priority) {
  for (int i = 0; i < n && in && out; i++)
    if (out[i] == in[i]) return mx_refuse("reducescatter cannot run in place");
  return mx_push_reduction(MX_REDUCESCATTER, mx_run_reducescatter, in, out, n, name,
                           reduce_op, prescale, postscale, process_set, priority);
}

static void on_scattered(hvd_handle h, int status, void *arg) {
  (void)h;
  mx_op *op = arg;
  for (int i = 0; status == 0 && i < op->n; i++) {
    void *padded = op->scratch[2 * i + 1];
    size_t bytes = (size_t)rows_for(dim0_of(op, i), op->set_size, op->set_rank) * row_bytes(op, i);
    if (padded && bytes) memcpy(op->outs[i], padded, bytes);
  }
  mx_op_end(op, status, status < 0 ? mx_capi->last_error() : NULL);
}

/* Tensor i's send and receive buffers (padded when its dim0 is uneven)
 * and element count; -1 when out of memory. */
static int scatter_buffers(mx_op *op, int i, const void **send, void **recv, size_t *count) {
  int n = op->set_size;
  int64_t dim0 = dim0_of(op, i), block = (dim0 + n - 1) / n;
  size_t rowb = row_bytes(op, i);
  *send = op->ins[i];
  *recv = op->outs[i];
  *count = (size_t)(n * block) * mx_row_size(op->in[i]);
  if (dim0 % n == 0) return 0;
  char *padded = op->scratch[2 * i] = calloc((size_t)(n * block) * rowb + 1, 1);
  op->scratch[2 * i + 1] = malloc((size_t)block * rowb + 1);
  if (!padded || !op->scratch[2 * i + 1]) return -1;
  const char *from = op->ins[i];
  for (int r = 0; r < n; from += (size_t)rows_for(dim0, n, r) * rowb, r++) /* rank r's rows */
    memcpy(padded + (size_t)(r * block) * rowb, from, (size_t)rows_for(dim0, n, r) * rowb);
  *send = padded;
  *recv = op->scratch[2 * i + 1];
  return 0;
}

void mx_run_reducescatter(mx_op *op) {
  int k = op->n;
  const void **sends = calloc((size_t)k, sizeof *sends);
  void **recvs = calloc((size_t)k, sizeof *recvs);
  size_t *counts = calloc((size_t)k, sizeof *counts);
  int rc = sends && recvs && counts ? 0 : -1;
  for (int i = 0; rc == 0 && i < k; i++) rc = scatter_buffers(op, i, &sends[i], &recvs[i], &counts[i]);
  hvd_handle h = HVD_E_NOMEM;
  op->opts.callback = on_scattered;
  op->opts.callback_arg = op;
  if (rc == 0 && k == 1) {
    int64_t padded[HVD_MAX_DIMS]; /* the negotiated shape: the padded one, alike everywhere */
    memcpy(padded, op->shape, sizeof padded);
    padded[0] = (int64_t)(counts[0] / (mx_row_size(op->in[0]) ? mx_row_size(op->in[0]) : 1));
    op->opts.shape = padded;
    op->opts.ndims = op->ndims;
    h = mx_capi->reducescatter_async(sends[0], recvs[0], counts[0], op->dtype,
                                     (hvd_op)op->reduce_op, op->name, &op->opts);
  } else if (rc == 0) {
    h = mx_capi->grouped_reducescatter_async(sends, recvs, counts, k, op->dtype,
                                             (hvd_op)op->reduce_op, op->name, &op->opts);
  }
  free(sends);
  free(recvs);
  free(counts);
  if (h < 0) mx_op_end(op, (int)h, rc == 0 ? mx_capi->last_error() : "out of memory");
}
