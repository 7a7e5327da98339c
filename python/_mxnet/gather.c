/*
 * gather.c -- allgather (one tensor or a group) and alltoall, whose
 * outputs' first dimension is known only once every rank has answered.
 *
 * The operation writes a placeholder NDArray (the holder) and keeps hvd's
 * results in an mx_result; hvd.mxnet waits on the holder, as Horovod
 * waits on its outputs, then allocates the outputs from the result's rows
 * and copies them in (hvd_mx_result_*).  MXNet's C API cannot resize an
 * NDArray inside an operation, which is how Horovod's C++ does it.
 *
 * Ranks must agree on the dimensions after the first.  A single tensor's
 * shape goes to hvd's engine (hvd_opts.shape), which fails every rank
 * when they differ.  A grouped allgather takes no shape there, so each
 * rank's part of each tensor travels behind a header with its shape:
 * every rank reads every rank's header, and ranks that disagree fail on
 * every rank alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd_mx.h"

/* A shape header: the number of dimensions, then the dimensions (the
 * first, which ranks may differ in, is 0).  264 bytes: whole elements of
 * every dtype. */
#define HEADER_DIMS (1 + HVD_MAX_DIMS)
#define HEADER_BYTES (HEADER_DIMS * sizeof(int64_t))

typedef struct mx_result {
  int n, set_size;
  size_t esize;
  void **bufs;     /* hvd's malloc()ed results, per tensor: rows (behind headers) */
  size_t hdr;      /* elements of the header before each part: 0 or HEADER_BYTES' */
  size_t *counts;  /* elements from each rank: [tensor * set_size + rank] */
  size_t *rows;    /* per tensor: the rows every rank sent in all */
  size_t *row;     /* per tensor: elements in a row */
} mx_result;

HVD_MX_EXPORT void hvd_mx_result_free(mx_result *res) {
  if (!res) return;
  for (int i = 0; i < res->n && res->bufs; i++) free(res->bufs[i]);
  free(res->bufs);
  free(res->counts);
  free(res->rows);
  free(res->row);
  free(res);
}

static mx_result *result_new(const mx_op *op) {
  mx_result *res = calloc(1, sizeof *res);
  if (!res) return NULL;
  res->n = op->n;
  res->set_size = op->set_size;
  res->esize = mx_capi->dtype_size(op->dtype);
  res->bufs = calloc((size_t)op->n, sizeof *res->bufs);
  res->counts = calloc((size_t)op->n * (size_t)op->set_size, sizeof *res->counts);
  res->rows = calloc((size_t)op->n, sizeof *res->rows);
  res->row = calloc((size_t)op->n, sizeof *res->row);
  if (res->bufs && res->counts && res->rows && res->row) return res;
  hvd_mx_result_free(res);
  return NULL;
}

/* The op of a gather: in[i] read, holder written, results kept in a new
 * *result the caller frees; NULL after mx_refuse(). */
static mx_op *gather_op(mx_kind kind, NDArrayHandle *in, int n, NDArrayHandle holder,
                        const char *name, int process_set, mx_result **result) {
  mx_op *op = mx_op_new(kind, in, NULL, n, name, process_set);
  if (!op) return NULL;
  if (mx_op_hold(holder, &op->holder) < 0 || !(op->result = result_new(op))) {
    if (op->holder) mx_refuse("out of memory");
    mx_op_free(op);
    return NULL;
  }
  for (int i = 0; i < n; i++) op->result->row[i] = mx_row_size(in[i]);
  *result = op->result;
  return op;
}

/* ---- the shape headers ---- */

/* Writes tensor a's header at dst (a scalar is one row of one element). */
static void header_write(NDArrayHandle a, char *dst) {
  int64_t h[HEADER_DIMS] = {0};
  int nd = 0;
  const int *dims = NULL;
  if (MXNDArrayGetShapeEx(a, &nd, &dims) == 0 && nd >= 0 && nd <= HVD_MAX_DIMS) {
    h[0] = nd > 0 ? nd : 1;
    for (int d = 1; d < nd; d++) h[1 + d] = dims[d];
  }
  memcpy(dst, h, sizeof h);
}

/* The shape in header src, printed as hvd's engine prints the shapes it
 * negotiates for a single tensor ("[*, 3, 4]"). */
static void header_print(const char *src, char *out, size_t cap) {
  int64_t h[HEADER_DIMS];
  memcpy(h, src, sizeof h);
  int nd = h[0] >= 1 && h[0] <= HVD_MAX_DIMS ? (int)h[0] : 1;
  size_t len = (size_t)snprintf(out, cap, "[*");
  for (int d = 1; d < nd && len < cap; d++)
    len += (size_t)snprintf(out + len, cap - len, ", %lld", (long long)h[1 + d]);
  if (len < cap) snprintf(out + len, cap - len, "]");
}

/* Checks that every rank's part of tensor i has rank 0's header and
 * whole rows, and counts the rows; -1 with the message naming every
 * rank's shape otherwise.  Every rank reads the same parts, so every
 * rank decides alike. */
static int check_parts(mx_op *op, int i, const char *kind, char *msg, size_t cap) {
  mx_result *res = op->result;
  const size_t *counts = res->counts + (size_t)i * res->set_size;
  size_t hdr = res->hdr, row = res->row[i], rows = 0;
  const char *first = res->bufs[i], *part = first;
  int bad = 0;
  for (int r = 0; r < res->set_size; part += counts[r++] * res->esize) {
    size_t got = counts[r] >= hdr ? counts[r] - hdr : 0;
    if (counts[r] < hdr || (hdr && memcmp(part, first, HEADER_BYTES) != 0) ||
        (row ? got % row : got))
      bad = 1;
    rows += row ? got / row : 0;
  }
  res->rows[i] = rows;
  if (!bad) return 0;
  size_t len = (size_t)snprintf(msg, cap, "Mismatched %s tensor dimensions after the first "
                                "for '%s.%d': ", kind, op->name, i);
  part = first;
  for (int r = 0; r < res->set_size && len < cap; part += counts[r++] * res->esize) {
    char shape[200] = "(no shape)";
    if (hdr && counts[r] >= hdr) header_print(part, shape, sizeof shape);
    len += (size_t)snprintf(msg + len, cap - len, "%srank %d sent %s", r ? ", " : "", r, shape);
  }
  return -1;
}

static void on_gathered(hvd_handle h, int status, void *arg) {
  (void)h;
  mx_op *op = arg;
  char msg[900];
  if (status < 0) {
    mx_op_end(op, status, mx_capi->last_error());
    return;
  }
  for (int i = 0; i < op->n; i++) {
    if (check_parts(op, i, op->kind == MX_ALLGATHER ? "allgather" : "alltoall", msg,
                    sizeof msg) < 0) {
      mx_op_end(op, HVD_E_MISMATCH, msg);
      return;
    }
  }
  mx_op_end(op, 0, NULL);
}

/* ---- allgather ---- */

/* Concatenates every rank's in[i] along the first dimension (n > 1: as
 * one group, tensor i named "<name>.<i>").  The results are in *result
 * once holder is written. */
HVD_MX_EXPORT int hvd_mx_allgather(NDArrayHandle *in, int n, NDArrayHandle holder,
                                   const char *name, int process_set, int priority,
                                   mx_result **result) {
  mx_op *op = gather_op(MX_ALLGATHER, in, n, holder, name, process_set, result);
  if (!op) return -1;
  return mx_op_push(op, mx_run_allgather, priority);
}

/* Tensor i behind its header, in op->scratch[i]; -1 without memory. */
static int with_header(mx_op *op, int i) {
  size_t esize = op->result->esize;
  char *buf = op->scratch[i] = malloc(HEADER_BYTES + op->counts[i] * esize);
  if (!buf) return -1;
  header_write(op->in[i], buf);
  if (op->counts[i]) memcpy(buf + HEADER_BYTES, op->ins[i], op->counts[i] * esize);
  op->counts[i] += op->result->hdr;
  return 0;
}

/* The shape hvd's engine negotiates for a single tensor (a scalar is one
 * row of one element). */
static void engine_shape(mx_op *op) {
  if (op->ndims == 0) {
    op->shape[0] = 1;
    op->ndims = 1;
  }
  op->opts.shape = op->shape;
  op->opts.ndims = op->ndims;
}

void mx_run_allgather(mx_op *op) {
  mx_result *res = op->result;
  op->opts.callback = on_gathered;
  op->opts.callback_arg = op;
  hvd_handle h;
  if (op->n == 1) {
    engine_shape(op);
    h = mx_capi->allgather_async(op->ins[0], op->counts[0], op->dtype, &res->bufs[0],
                                 res->counts, op->name, &op->opts);
    if (h < 0) mx_end_refused(op, h);
    return;
  }
  res->hdr = HEADER_BYTES / res->esize;
  for (int i = 0; i < op->n; i++) {
    if (with_header(op, i) < 0) {
      mx_op_end(op, HVD_E_NOMEM, "out of memory");
      return;
    }
  }
  h = mx_capi->grouped_allgather_async((const void *const *)op->scratch, op->counts, op->n,
                                       op->dtype, res->bufs, res->counts, op->name, &op->opts);
  if (h < 0) mx_end_refused(op, h);
}

/* ---- alltoall ---- */

/* Sends splits[r] rows (the first dimension) of in to rank r of the
 * process set, equal parts when splits has no elements; the rows received
 * and how many came from each rank are in *result once holder is
 * written. */
HVD_MX_EXPORT int hvd_mx_alltoall(NDArrayHandle in, NDArrayHandle splits, NDArrayHandle holder,
                                  const char *name, int process_set, int priority,
                                  mx_result **result) {
  int flag = -1;
  if (MXNDArrayGetDType(splits, &flag) != 0) return mx_refuse("%s", MXGetLastError());
  if (flag != 4) return mx_refuse("alltoall: splits must be an int32 NDArray");
  mx_op *op = gather_op(MX_ALLTOALL, &in, 1, holder, name, process_set, result);
  if (!op) return -1;
  if (mx_op_hold(splits, &op->splits) < 0) {
    mx_op_free(op);
    return -1;
  }
  return mx_op_push(op, mx_run_alltoall, priority);
}

/* splits (rows to each rank; none: equal parts) as rows per rank; -1
 * with msg when they do not fit the tensor. */
static int send_rows(mx_op *op, const int32_t *s, size_t ns, int64_t *out, char *msg,
                     size_t cap) {
  int n = op->set_size;
  int64_t rows = op->ndims > 0 ? op->shape[0] : 1, sum = 0;
  if (ns == 0 && rows % n != 0) {
    snprintf(msg, cap, "alltoall: the first dimension (%lld) must be divisible by the number "
             "of processes (%d) when splits is not given", (long long)rows, n);
    return -1;
  }
  if (ns != 0 && ns != (size_t)n) {
    snprintf(msg, cap, "alltoall: splits has %zu entries, expected %d (one per process)", ns, n);
    return -1;
  }
  for (int r = 0; r < n; r++) {
    out[r] = ns ? s[r] : rows / n;
    sum = out[r] < 0 || sum < 0 ? -1 : sum + out[r];
  }
  if (sum == rows) return 0;
  snprintf(msg, cap, "alltoall: splits must be non-negative and sum to the first dimension "
           "(%lld)", (long long)rows);
  return -1;
}

/* Rank r's element count, for every r, from its rows. */
static void alltoall_counts(const mx_op *op, const int64_t *rows, size_t *counts) {
  for (int r = 0; r < op->set_size; r++) counts[r] = (size_t)rows[r] * op->result->row[0];
}

/* The splits' element counts per rank; -1 when the op ended. */
static int alltoall_prepare(mx_op *op, size_t *counts) {
  void *s = NULL;
  int nd = 0, rc = -1;
  const int *dims = NULL;
  char msg[300] = "out of memory";
  int64_t *rows = calloc((size_t)op->set_size, sizeof *rows);
  if (!rows || mx_data_of(op, op->splits, &s) != 0 ||
      MXNDArrayGetShapeEx(op->splits, &nd, &dims) != 0) {
    mx_op_end(op, HVD_E_NOMEM, rows ? hvd_mx_last_error() : msg);
    goto free_rows;
  }
  size_t ns = nd == 1 && s ? (size_t)dims[0] : 0;
  if (send_rows(op, s, ns, rows, msg, sizeof msg) < 0) {
    mx_op_end(op, HVD_E_INVALID, msg);
    goto free_rows;
  }
  alltoall_counts(op, rows, counts);
  rc = 0;
free_rows:
  free(rows);
  return rc;
}

void mx_run_alltoall(mx_op *op) {
  mx_result *res = op->result;
  size_t *counts = calloc((size_t)op->set_size, sizeof *counts);
  if (!counts) {
    mx_op_end(op, HVD_E_NOMEM, "out of memory");
    return;
  }
  if (alltoall_prepare(op, counts) < 0) {
    free(counts);
    return;
  }
  op->opts.callback = on_gathered;
  op->opts.callback_arg = op;
  engine_shape(op);
  hvd_handle h = mx_capi->alltoall_async(op->ins[0], counts, op->dtype, &res->bufs[0],
                                         res->counts, op->name, &op->opts);
  free(counts);
  if (h < 0) mx_end_refused(op, h);
}

/* ---- what hvd.mxnet reads once the holder is written ---- */

/* The rows tensor i's output has (every rank's, in rank order). */
HVD_MX_EXPORT int64_t hvd_mx_result_rows(const mx_result *res, int i) {
  return i >= 0 && i < res->n ? (int64_t)res->rows[i] : -1;
}

/* Copies tensor i's rows (without their headers) into out (allocated with
 * hvd_mx_result_rows() rows of the input's other dimensions). */
HVD_MX_EXPORT int hvd_mx_result_copy(mx_result *res, int i, NDArrayHandle out) {
  if (i < 0 || i >= res->n) return mx_refuse("no tensor %d in this result", i);
  size_t elements = res->rows[i] * res->row[i], hdr = res->hdr;
  if (elements == 0) return 0;
  char *to = res->bufs[i];
  const char *from = res->bufs[i];
  for (int r = 0; hdr && r < res->set_size; r++) { /* the rows together, in place */
    size_t c = res->counts[(size_t)i * res->set_size + r];
    memmove(to, from + HEADER_BYTES, (c - hdr) * res->esize);
    to += (c - hdr) * res->esize;
    from += c * res->esize;
  }
  if (MXNDArraySyncCopyFromCPU(out, res->bufs[i], elements) != 0)
    return mx_refuse("%s", MXGetLastError());
  return 0;
}

/* alltoall: the rows received from each rank of the set, into out
 * (set-size entries). */
HVD_MX_EXPORT void hvd_mx_result_splits(const mx_result *res, int32_t *out) {
  for (int r = 0; r < res->set_size; r++)
    out[r] = res->row[0] ? (int32_t)(res->counts[r] / res->row[0]) : 0;
}
