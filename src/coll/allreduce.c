/*
 * allreduce.c -- ring allreduce and ring reduce-scatter.
 *
 * The buffer is cut into n segments.  In the reduce-scatter phase, at step
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
 * The engine's fusion buffer therefore lays several tensors out segment by
 * segment (segment i of the buffer = segment i of each tensor), so that a
 * tensor reduced inside a fused buffer gets exactly the bits it would get
 * alone: hvd__allreduce_segments takes such a layout.
 */
#include <stdlib.h>
#include <string.h>

#include "../reduce.h"
#include "coll.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Where the segments of a buffer lie, in elements. */
typedef struct {
  const size_t *counts;
  size_t *offsets;
  size_t esize;
} layout;

static int layout_init(layout *l, const size_t *counts, int n, size_t esize) {
  l->counts = counts;
  l->esize = esize;
  l->offsets = malloc((size_t)n * sizeof *l->offsets);
  if (!l->offsets) return hvd__err(HVD_E_NOMEM, "allocating a layout of %d segments", n);
  size_t off = 0;
  for (int i = 0; i < n; i++) l->offsets[i] = off, off += counts[i];
  return 0;
}

/* Pointer and byte length of segment i. */
static char *segment(void *buf, const layout *l, int i, size_t *len) {
  *len = l->counts[i] * l->esize;
  return (char *)buf + l->offsets[i] * l->esize;
}

/* Leaves segment `rank` of buf reduced over all ranks (averaged if asked). */
static int reduce_scatter_phase(hvd_comm *c, uint32_t tag, void *buf, const layout *l,
                                hvd_dtype dtype, hvd_op op) {
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
  size_t slen, rlen;
  hvd_recv_mode mode = {1, dtype, op};
  for (int s = 0; s < n - 1; s++) {
    char *sp = segment(buf, l, mod(r - s - 1, n), &slen);
    char *rp = segment(buf, l, mod(r - s - 2, n), &rlen);
    HVD__CHECK(hvd__stream(c, tag, right, sp, slen, left, rp, rlen, &mode));
  }
  if (op == HVD_AVERAGE) {
    char *own = segment(buf, l, r, &rlen);
    hvd__reduce_average(own, rlen / l->esize, dtype, n);
  }
  return 0;
}

static int allgather_phase(hvd_comm *c, uint32_t tag, void *buf, const layout *l) {
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
  size_t slen, rlen;
  for (int s = 0; s < n - 1; s++) {
    char *sp = segment(buf, l, mod(r - s, n), &slen);
    char *rp = segment(buf, l, mod(r - s - 1, n), &rlen);
    HVD__CHECK(hvd__stream(c, tag, right, sp, slen, left, rp, rlen, NULL));
  }
  return 0;
}

static int allreduce_body(hvd_comm *c, uint32_t tag, void *buf, const size_t *seg_counts,
                          hvd_dtype dtype, hvd_op op) {
  layout l;
  if (c->size == 1) return 0; /* AVERAGE over one rank divides by 1 */
  HVD__CHECK(layout_init(&l, seg_counts, c->size, hvd_dtype_size(dtype)));
  int rc = reduce_scatter_phase(c, tag, buf, &l, dtype, op);
  if (rc == 0) rc = allgather_phase(c, tag, buf, &l);
  free(l.offsets);
  return rc;
}

int hvd__allreduce_segments(hvd_comm *c, void *buf, const size_t *seg_counts, hvd_dtype dtype,
                            hvd_op op) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  int rc = allreduce_body(c, tag, buf, seg_counts, dtype, op);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}

/* The even split of count elements: hvd__split_count per segment. */
static size_t *even_split(size_t count, int n) {
  size_t *counts = malloc((size_t)n * sizeof *counts);
  for (int i = 0; counts && i < n; i++) counts[i] = hvd__split_count(count, n, i);
  return counts;
}

int hvd__allreduce(hvd_comm *c, const void *sbuf, void *rbuf, size_t count, hvd_dtype dtype,
                   hvd_op op) {
  if (sbuf != rbuf && count) memcpy(rbuf, sbuf, count * hvd_dtype_size(dtype));
  size_t *counts = even_split(count, c->size);
  if (!counts) return hvd__err(HVD_E_NOMEM, "allocating %d segment counts", c->size);
  int rc = hvd__allreduce_segments(c, rbuf, counts, dtype, op);
  free(counts);
  return rc;
}

static int reducescatter_body(hvd_comm *c, uint32_t tag, const void *sbuf, void *rbuf,
                              const size_t *counts, size_t count, hvd_dtype dtype, hvd_op op) {
  size_t esize = hvd_dtype_size(dtype), own_len;
  layout l = {0};
  if (c->size == 1) {
    if (count && sbuf != rbuf) memcpy(rbuf, sbuf, count * esize);
    return 0;
  }
  /* The phase works in place on a full-size copy: sendbuf is the caller's
   * and recvbuf only holds this rank's share. */
  void *work = count ? malloc(count * esize) : NULL;
  if (count && !work) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes", count * esize);
  if (count) memcpy(work, sbuf, count * esize);
  int rc = layout_init(&l, counts, c->size, esize);
  if (rc == 0) rc = reduce_scatter_phase(c, tag, work, &l, dtype, op);
  if (rc == 0) {
    char *own = segment(work, &l, c->rank, &own_len);
    if (own_len) memcpy(rbuf, own, own_len);
  }
  free(l.offsets);
  free(work);
  return rc;
}

int hvd__reducescatter(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                       hvd_dtype dtype, hvd_op op) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  size_t *counts = even_split(count, c->size);
  int rc = counts ? reducescatter_body(c, tag, sbuf, rbuf, counts, count, dtype, op)
                  : hvd__err(HVD_E_NOMEM, "allocating %d segment counts", c->size);
  free(counts);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
