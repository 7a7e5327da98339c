/*
 * allreduce.c -- ring allreduce and ring reduce-scatter.
 *
 * The buffer is cut into n segments (hvd__split_*).  In the reduce-scatter
 * phase, at step s = 0..n-2, rank r sends segment (r-s-1) mod n to its
 * right neighbour and receives segment (r-s-2) mod n from its left one,
 * reducing it into its own copy; after n-1 steps rank r holds segment r
 * reduced over all ranks.  The allgather phase then passes the finished
 * segments around the ring.  Each rank sends 2(n-1)/n of the data in all,
 * which is optimal for bandwidth.
 *
 * Each finished segment is computed on exactly one rank and copied to the
 * others, so the result is bitwise identical everywhere, whatever the
 * floating-point rounding.  AVERAGE divides on the owner, once, after the
 * sum.
 */
#include <stdlib.h>
#include <string.h>

#include "../reduce.h"
#include "coll.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Pointer and byte length of segment i of a buffer of count elements. */
static char *segment(void *buf, size_t count, size_t esize, int n, int i, size_t *len) {
  *len = hvd__split_count(count, n, i) * esize;
  return (char *)buf + hvd__split_offset(count, n, i) * esize;
}

/* Leaves segment `rank` of buf reduced over all ranks (averaged if asked). */
static int reduce_scatter_phase(hvd_comm *c, uint32_t tag, void *buf, size_t count,
                                hvd_dtype dtype, hvd_op op) {
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
  size_t esize = hvd_dtype_size(dtype), slen, rlen;
  hvd_recv_mode mode = {1, dtype, op};
  for (int s = 0; s < n - 1; s++) {
    char *sp = segment(buf, count, esize, n, mod(r - s - 1, n), &slen);
    char *rp = segment(buf, count, esize, n, mod(r - s - 2, n), &rlen);
    HVD__CHECK(hvd__stream(c, tag, right, sp, slen, left, rp, rlen, &mode));
  }
  if (op == HVD_AVERAGE) {
    char *own = segment(buf, count, esize, n, r, &rlen);
    hvd__reduce_average(own, rlen / esize, dtype, n);
  }
  return 0;
}

static int allgather_phase(hvd_comm *c, uint32_t tag, void *buf, size_t count, size_t esize) {
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
  size_t slen, rlen;
  for (int s = 0; s < n - 1; s++) {
    char *sp = segment(buf, count, esize, n, mod(r - s, n), &slen);
    char *rp = segment(buf, count, esize, n, mod(r - s - 1, n), &rlen);
    HVD__CHECK(hvd__stream(c, tag, right, sp, slen, left, rp, rlen, NULL));
  }
  return 0;
}

static int allreduce_body(hvd_comm *c, uint32_t tag, void *rbuf, size_t count,
                          hvd_dtype dtype, hvd_op op) {
  if (c->size == 1) return 0; /* AVERAGE over one rank divides by 1 */
  HVD__CHECK(reduce_scatter_phase(c, tag, rbuf, count, dtype, op));
  return allgather_phase(c, tag, rbuf, count, hvd_dtype_size(dtype));
}

int hvd__allreduce(hvd_comm *c, const void *sbuf, void *rbuf, size_t count, hvd_dtype dtype,
                   hvd_op op) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  if (sbuf != rbuf && count) memcpy(rbuf, sbuf, count * hvd_dtype_size(dtype));
  int rc = allreduce_body(c, tag, rbuf, count, dtype, op);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}

static int reducescatter_body(hvd_comm *c, uint32_t tag, const void *sbuf, void *rbuf,
                              size_t count, hvd_dtype dtype, hvd_op op) {
  size_t esize = hvd_dtype_size(dtype), own_len;
  if (c->size == 1) {
    if (count && sbuf != rbuf) memcpy(rbuf, sbuf, count * esize);
    return 0;
  }
  /* The phase works in place on a full-size copy: sendbuf is the caller's
   * and recvbuf only holds this rank's share. */
  void *work = count ? malloc(count * esize) : NULL;
  if (count && !work) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes", count * esize);
  if (count) memcpy(work, sbuf, count * esize);
  int rc = reduce_scatter_phase(c, tag, work, count, dtype, op);
  if (rc == 0) {
    char *own = segment(work, count, esize, c->size, c->rank, &own_len);
    if (own_len) memcpy(rbuf, own, own_len);
  }
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
