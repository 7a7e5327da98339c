/*
 * recursive_doubling.c -- allreduce in log2(n) exchanges of the whole
 * vector: the algorithm for small messages, where the ring's 2(n-1)
 * latency-bound steps cost more than the bytes.
 *
 * With n a power of two, at round k = 0, 1, ... rank r swaps its whole
 * vector with partner r ^ 2^k and both combine the two; after log2(n)
 * rounds every rank holds the reduction over all.  Otherwise, with p the
 * largest power of two below n, the n - p extra ranks r >= p first hand
 * their vector to rank r - p (which reduces it into its own), sit out the
 * rounds among ranks 0..p-1, and get the result back from r - p.
 *
 * Bitwise agreement: both partners of an exchange combine the same two
 * vectors in the same order, the lower rank's on the left (inout = lower
 * (op) higher), so they hold the same bits afterwards, whatever the
 * kernel's rounding or its choice between NaN payloads, -0 and +0.  By
 * induction every rank ends with the same bits; the extra ranks get a
 * copy.  Each element is combined in an order fixed by n alone (a
 * balanced tree over ranks 0..n-1), never by where it lies in the
 * buffer, so a tensor fused with others gets the bits it gets alone.
 * Half-precision types round to their own precision after every
 * combination, as in the ring.  AVERAGE divides at the end, on every
 * rank, the same bits by the same division.
 */
#include <stdlib.h>

#include "reduce.h"
#include "coll.h"

int hvd__fold_in(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype, hvd_op op, int p,
                int *sat_out) {
  int n = c->size, r = c->rank;
  hvd_recv_mode mine_first = {1, dtype, op, 0};
  *sat_out = r >= p;
  if (r >= p) {
    HVD__CHECK(hvd__stream_pieces(c, tag, r - p, all, -1, all, NULL));
    return hvd__stream_pieces(c, tag, -1, all, r - p, all, NULL);
  }
  return r + p < n ? hvd__stream_pieces(c, tag, -1, all, r + p, all, &mine_first) : 0;
}

int hvd__fold_out(hvd_comm *c, uint32_t tag, hvd_pieces all, int p) {
  int r = c->rank;
  return r + p < c->size ? hvd__stream_pieces(c, tag, r + p, all, -1, all, NULL) : 0;
}

int hvd__recursive_doubling(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype,
                            hvd_op op) {
  int n = c->size, r = c->rank, p = hvd__pow2_floor(n), sat_out;
  hvd_recv_mode mine_first = {1, dtype, op, 0}, theirs_first = {1, dtype, op, 1};
  HVD__CHECK(hvd__fold_in(c, tag, all, dtype, op, p, &sat_out));
  for (int mask = 1; !sat_out && mask < p; mask <<= 1) {
    int peer = r ^ mask;
    HVD__CHECK(hvd__stream_pieces(c, tag, peer, all, peer, all,
                                  peer < r ? &theirs_first : &mine_first));
  }
  if (!sat_out) HVD__CHECK(hvd__fold_out(c, tag, all, p));
  if (op == HVD_AVERAGE)
    for (int i = 0; i < all.n; i++)
      hvd__reduce_average(all.p[i].ptr, all.p[i].len / hvd_dtype_size(dtype), dtype, n);
  return 0;
}
