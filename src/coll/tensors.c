/*
 * tensors.c -- several tensors reduced in place as one collective per
 * algorithm, each with exactly the bits it gets alone (the engine's
 * fused responses, through dispatch.c).
 *
 * The reduction order of an element depends only on its segment of the
 * ring's partition (allreduce.c), so the collective runs over a layout
 * that goes segment by segment: segment s holds segment s of each tensor.
 * The tensors stay where they are (no fusion buffer to copy through).
 * For the same reason each tensor's algorithm follows from its own size
 * (hvd__allreduce_algo), never from the total: one collective runs per
 * algorithm among the tensors, in the order of hvd_ar_algo.  The
 * hierarchical allreduce, when on, takes every tensor and the same
 * segments.
 */
#include <stdlib.h>

#include "coll.h"

/* The pieces of one collective, allocated once for every algorithm's. */
typedef struct {
  unsigned char *algo; /* [k]: tensor i's algorithm */
  hvd_piece *pieces;   /* [n * k] */
  hvd_pieces *segs;    /* [n] */
} layout;

/* Segment s of the collective is segment s of every tensor reduced with
 * `algo`, in order.  Returns how many tensors that is. */
static int lay_out(const hvd_comm *c, const layout *l, void *const *bufs, const size_t *counts,
                   int k, size_t esize, hvd_ar_algo algo) {
  int n = c->size, used = 0;
  for (int i = 0; i < k; i++) {
    if (l->algo[i] != algo) continue;
    for (int s = 0; s < n; s++) {
      l->pieces[s * k + used].ptr = (char *)bufs[i] + hvd__split_offset(counts[i], n, s) * esize;
      l->pieces[s * k + used].len = hvd__split_count(counts[i], n, s) * esize;
    }
    used++;
  }
  for (int s = 0; s < n; s++) l->segs[s] = (hvd_pieces){&l->pieces[s * k], used};
  return used;
}

/* A few tensors over a few ranks lay out on the stack (most responses:
 * a small allreduce called in a loop is one tensor). */
#define FEW_PIECES 32
#define FEW 8

int hvd__allreduce_tensors(hvd_comm *c, void *const *bufs, const size_t *counts, int k,
                           hvd_dtype dtype, hvd_op op) {
  size_t n = (size_t)c->size, esize = hvd_dtype_size(dtype);
  hvd_piece few_pieces[FEW_PIECES];
  hvd_pieces few_segs[FEW];
  unsigned char few_algo[FEW];
  layout l = {few_algo, few_pieces, few_segs};
  char *m = NULL;
  if (n * (size_t)k > FEW_PIECES || n > FEW || k > FEW) {
    m = calloc(1, n * (size_t)k * sizeof(hvd_piece) + n * sizeof(hvd_pieces) + (size_t)k);
    if (!m) return hvd__err(HVD_E_NOMEM, "allocating the layout of %d tensors", k);
    l.pieces = (hvd_piece *)m;
    l.segs = (hvd_pieces *)(m + n * (size_t)k * sizeof(hvd_piece));
    l.algo = (unsigned char *)(l.segs + n);
  }
  for (int i = 0; i < k; i++) l.algo[i] = (unsigned char)hvd__allreduce_algo(c, counts[i] * esize);
  int rc = 0;
  for (int a = HVD_AR_AUTO + 1; rc == 0 && a < HVD_AR_N; a++)
    if (lay_out(c, &l, bufs, counts, k, esize, (hvd_ar_algo)a))
      rc = hvd__allreduce_pieces(c, (hvd_ar_algo)a, l.segs, dtype, op);
  free(m);
  return rc;
}
