/*
 * reduce.c -- allreduce (one tensor or a group) and broadcast, whose
 * outputs have their inputs' shapes: the caller allocates them (or passes
 * the inputs again: in place) before the push.
 */
#include <string.h>

#include "hvd_mx.h"

/* Reduces in[i] into out[i] (the same NDArray: in place) over the
 * process set with hvd's op and scale factors; n > 1 reduces the tensors
 * as one group, tensor i named "<name>.<i>".  0, or -1 with
 * hvd_mx_last_error() saying why. */
HVD_MX_EXPORT int hvd_mx_allreduce(NDArrayHandle *in, NDArrayHandle *out, int n,
                                   const char *name, int reduce_op, double prescale,
                                   double postscale, int process_set, int priority) {
  return mx_push_reduction(MX_ALLREDUCE, mx_run_allreduce, in, out, n, name, reduce_op,
                           prescale, postscale, process_set, priority);
}

void mx_run_allreduce(mx_op *op) {
  op->opts.callback = mx_on_done;
  op->opts.callback_arg = op;
  hvd_handle h;
  if (op->n == 1) {
    op->opts.shape = op->shape;
    op->opts.ndims = op->ndims;
    h = mx_capi->allreduce_async_opts(op->ins[0], op->outs[0], op->counts[0], op->dtype,
                                      (hvd_op)op->reduce_op, op->name, &op->opts);
  } else {
    h = mx_capi->grouped_allreduce_async((const void *const *)op->ins, op->outs, op->counts,
                                         op->n, op->dtype, (hvd_op)op->reduce_op, op->name,
                                         &op->opts);
  }
  /* Past the enqueue, op may already be complete and freed. */
  if (h < 0) mx_end_refused(op, h);
}

/* Copies root_rank's (its place in the process set) in into out on every
 * rank (out may be in).  0, or -1 with hvd_mx_last_error() saying why. */
HVD_MX_EXPORT int hvd_mx_broadcast(NDArrayHandle in, NDArrayHandle out, const char *name,
                                   int root_rank, int process_set, int priority) {
  mx_op *op = mx_op_new(MX_BROADCAST, &in, &out, 1, name, process_set);
  if (!op) return -1;
  op->root_rank = root_rank;
  return mx_op_push(op, mx_run_broadcast, priority);
}

void mx_run_broadcast(mx_op *op) {
  if (op->outs[0] != op->ins[0] && op->counts[0] > 0)
    memcpy(op->outs[0], op->ins[0], op->counts[0] * mx_capi->dtype_size(op->dtype));
  op->opts.callback = mx_on_done;
  op->opts.callback_arg = op;
  op->opts.shape = op->shape;
  op->opts.ndims = op->ndims;
  hvd_handle h = mx_capi->broadcast_async_opts(op->outs[0], op->counts[0], op->dtype,
                                               op->root_rank, op->name, &op->opts);
  if (h < 0) mx_end_refused(op, h);
}
