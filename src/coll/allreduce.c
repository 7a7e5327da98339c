/*
 * allreduce.c -- ring allreduce and ring reduce-scatter, and the entry
 * that runs whichever allreduce algorithm was chosen (select.c; the others
 * live in recursive_doubling.c, rabenseifner.c and shm_allreduce.c).
 *
 * The buffer is cut into n segments (the two phases are ring.c's, which
 * the hierarchical allreduce shares).  In the reduce-scatter phase, at step
 * s = 0..n-2, rank r sends segment (r-s-1) mod n to its right neighbour
 * and receives segment (r-s-2) mod n from its left one, reducing it into
 * its own copy; after n-1 steps rank r holds segment r reduced over all
 * ranks.  The allgather phase then passes the finished segments around the
 * ring.  Each rank sends 2(n-1)/n of the data in all, which is optimal for
 * bandwidth.
 *
 * Each finished segment is computed on exactly one rank and copied to the
 * others, so the result is bitwise identical everywhere, whatever the
 * floating-point rounding.  AVERAGE divides on the owner, once, after the
 * sum.
 *
 * The order in which an element is reduced depends only on its segment.
 * The engine fuses tensors segment by segment (segment i of the fused
 * buffer = segment i of each tensor), so that a tensor reduced with others
 * gets exactly the bits it would get alone; hvd__allreduce_pieces takes
 * such segments as lists of pieces, which may lie in different buffers
 * (the tensors themselves: no copy into a fusion buffer).
 *
 * On shared memory (one host) the shm allreduce (shm_allreduce.c) runs
 * instead, for every size.
 * The hierarchical allreduce (hierarchical.c) runs the same two phases
 * over its sub-communicators, on groups of these segments.
 *
 * Which algorithm reduces a tensor is decided by the tensor's own size
 * (the engine groups a fused response by it), never by the fused total:
 * the ring and recursive doubling combine elements in different orders,
 * and fusion must not change a bit.
 */
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "coll.h"

static int run_flat(hvd_comm *c, uint32_t tag, hvd_ar_algo algo, hvd_pieces all,
                    hvd_dtype dtype, hvd_op op) {
  switch (algo) {
    case HVD_AR_RECURSIVE_DOUBLING: return hvd__recursive_doubling(c, tag, all, dtype, op);
    case HVD_AR_RABENSEIFNER: return hvd__rabenseifner(c, tag, all, dtype, op);
    case HVD_AR_SHM: return hvd__shm_allreduce(c, tag, all, dtype, op);
    default: return hvd__err(HVD_E_INVALID, "no allreduce algorithm %d", (int)algo);
  }
}

static int run_algo(hvd_comm *c, uint32_t tag, hvd_ar_algo algo, const hvd_pieces *segs,
                    hvd_dtype dtype, hvd_op op) {
  if (algo == HVD_AR_HIERARCHICAL) return hvd__hierarchical(c, tag, segs, dtype, op);
  if (algo != HVD_AR_RING) {
    hvd_piece *flat = NULL;
    hvd_pieces all;
    int rc = hvd__pieces_concat(segs, c->size, &flat, &all);
    if (rc == 0) rc = run_flat(c, tag, algo, all, dtype, op);
    free(flat);
    return rc;
  }
  int rc = hvd__ring_reduce_scatter(c, tag, segs, dtype, op, c->size);
  return rc == 0 ? hvd__ring_allgather(c, tag, segs) : rc;
}

/* Every allreduce's frame: its tag, the one-rank case, a failure marking
 * the communicator.  segs: the vector as c->size segments; NULL: whole,
 * for the element-wise algorithms, which do not need it split. */
static int framed(hvd_comm *c, hvd_ar_algo algo, const hvd_pieces *segs, hvd_pieces whole,
                  hvd_dtype dtype, hvd_op op) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  if (c->size == 1) return 0; /* AVERAGE over one rank divides by 1 */
  int rc = segs ? run_algo(c, tag, algo, segs, dtype, op)
                : run_flat(c, tag, algo, whole, dtype, op);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}

int hvd__allreduce_pieces(hvd_comm *c, hvd_ar_algo algo, const hvd_pieces *segs,
                          hvd_dtype dtype, hvd_op op) {
  return framed(c, algo, segs, (hvd_pieces){NULL, 0}, dtype, op);
}

/* buf's even split (hvd__split_*) as one piece per segment. */
static int split_pieces(void *buf, size_t count, size_t esize, int n, hvd_piece **pieces,
                        hvd_pieces **segs) {
  *pieces = malloc((size_t)n * sizeof **pieces);
  *segs = malloc((size_t)n * sizeof **segs);
  if (!*pieces || !*segs) return hvd__err(HVD_E_NOMEM, "allocating %d segments", n);
  for (int i = 0; i < n; i++) {
    (*pieces)[i].ptr = (char *)buf + hvd__split_offset(count, n, i) * esize;
    (*pieces)[i].len = hvd__split_count(count, n, i) * esize;
    (*segs)[i].p = &(*pieces)[i];
    (*segs)[i].n = 1;
  }
  return 0;
}

static int allreduce_with(hvd_comm *c, hvd_ar_algo algo, void *buf, size_t count,
                          hvd_dtype dtype, hvd_op op) {
  if (algo != HVD_AR_RING && algo != HVD_AR_HIERARCHICAL) {
    /* Element-wise algorithms take the vector whole: no split to
     * allocate (three mallocs and frees per call, a tenth of a small
     * allreduce's work). */
    hvd_piece whole = {buf, count * hvd_dtype_size(dtype)};
    return framed(c, algo, NULL, (hvd_pieces){&whole, 1}, dtype, op);
  }
  hvd_piece *pieces = NULL;
  hvd_pieces *segs = NULL;
  int rc = split_pieces(buf, count, hvd_dtype_size(dtype), c->size, &pieces, &segs);
  if (rc == 0) rc = hvd__allreduce_pieces(c, algo, segs, dtype, op);
  free(pieces);
  free(segs);
  return rc;
}

int hvd__allreduce(hvd_comm *c, const void *sbuf, void *rbuf, size_t count, hvd_dtype dtype,
                   hvd_op op) {
  size_t esize = hvd_dtype_size(dtype);
  if (sbuf != rbuf && count) memcpy(rbuf, sbuf, count * esize);
  return allreduce_with(c, hvd__allreduce_algo(c, count * esize), rbuf, count, dtype, op);
}

int hvd__allreduce_small(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype, hvd_op op) {
  hvd_ar_algo algo = hvd__shm_usable(c) ? HVD_AR_SHM : HVD_AR_RECURSIVE_DOUBLING;
  return allreduce_with(c, algo, buf, count, dtype, op);
}

static int reducescatter_body(hvd_comm *c, uint32_t tag, const void *sbuf, void *rbuf,
                              size_t count, hvd_dtype dtype, hvd_op op) {
  size_t esize = hvd_dtype_size(dtype);
  if (c->size == 1) {
    if (count && sbuf != rbuf) memcpy(rbuf, sbuf, count * esize);
    return 0;
  }
  /* The phase works in place on a full-size copy: sendbuf is the caller's
   * and recvbuf only holds this rank's share. */
  void *work = count ? malloc(count * esize) : NULL;
  if (count && !work) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes", count * esize);
  if (count) memcpy(work, sbuf, count * esize);
  hvd_piece *pieces = NULL;
  hvd_pieces *segs = NULL;
  int rc = split_pieces(work, count, esize, c->size, &pieces, &segs);
  if (rc == 0) rc = hvd__ring_reduce_scatter(c, tag, segs, dtype, op, c->size);
  if (rc == 0 && pieces[c->rank].len) memcpy(rbuf, pieces[c->rank].ptr, pieces[c->rank].len);
  free(pieces);
  free(segs);
  free(work);
  return rc;
}

int hvd__reducescatter(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                       hvd_dtype dtype, hvd_op op) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  int rc = reducescatter_body(c, tag, sbuf, rbuf, count, dtype, op);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
