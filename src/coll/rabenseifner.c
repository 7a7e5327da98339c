/*
 * rabenseifner.c -- Rabenseifner's allreduce: a reduce-scatter by
 * recursive halving, then an allgather by recursive doubling.
 *
 * With n a power of two, at round k = 0, 1, ... rank r and its partner
 * r ^ 2^k split the block they both hold in two halves; each sends the
 * other the half it gives up and reduces the half it keeps.  After log2(n)
 * rounds each rank holds 1/n of the vector reduced over all ranks; the
 * allgather undoes the rounds in reverse, doubling the blocks back.  Each
 * rank sends 2(n-1)/n of the data, as in the ring, but in 2 log2(n) steps
 * instead of 2(n-1), each with one partner: on hosts whose ranks share
 * cores, and on networks where a message costs more than its bytes, that
 * is what matters.  Other n fold the extra ranks in first, as recursive
 * doubling does (recursive_doubling.c).
 *
 * Bits: the rounds pair ranks in the same order as recursive doubling's
 * and put the lower rank's partial result on the left, so every element is
 * combined by the same balanced tree over ranks 0..n-1, whatever its
 * position: the result is bit for bit recursive doubling's, on every rank,
 * fused or not.  AVERAGE divides each block once, on its owner.
 */
#include <stdlib.h>

#include "reduce.h"
#include "coll.h"

#define MAX_ROUNDS 32

typedef struct {
  size_t lo, count; /* elements */
} block;

typedef struct {
  hvd_comm *c;
  uint32_t tag;
  hvd_pieces all;
  size_t esize;
  hvd_piece *send, *recv; /* room for the sub-pieces of a block */
} job;

static hvd_pieces sub(const job *j, block b, hvd_piece *room) {
  return hvd__pieces_sub(j->all, b.lo * j->esize, b.count * j->esize, room);
}

/* Sends `give` to peer while receiving its `keep` (reduced in if mode). */
static int swap(job *j, int peer, block give, block keep, const hvd_recv_mode *mode) {
  return hvd__stream_pieces(j->c, j->tag, peer, sub(j, give, j->send), peer,
                            sub(j, keep, j->recv), mode);
}

/* The halving rounds among ranks 0..p-1, the division, and the doubling
 * rounds back. */
static int rounds(job *j, int p, hvd_dtype dtype, hvd_op op) {
  int r = j->c->rank, k = 0;
  block held[MAX_ROUNDS], b = {0, hvd__pieces_len(j->all) / j->esize};
  hvd_recv_mode mine_first = {1, dtype, op, 0}, theirs_first = {1, dtype, op, 1};
  for (int mask = 1; mask < p; mask <<= 1, k++) {
    int peer = r ^ mask;
    block lower = {b.lo, b.count / 2}, upper = {b.lo + b.count / 2, b.count - b.count / 2};
    held[k] = b;
    b = (r & mask) ? upper : lower;
    HVD__CHECK(swap(j, peer, (r & mask) ? lower : upper, b,
                    peer < r ? &theirs_first : &mine_first));
  }
  if (op == HVD_AVERAGE) {
    hvd_pieces mine = sub(j, b, j->recv);
    for (int i = 0; i < mine.n; i++)
      hvd__reduce_average(mine.p[i].ptr, mine.p[i].len / j->esize, dtype, j->c->size);
  }
  while (k-- > 0) {
    int mask = 1 << k;
    block whole = held[k], lower = {whole.lo, whole.count / 2},
          upper = {whole.lo + whole.count / 2, whole.count - whole.count / 2};
    HVD__CHECK(swap(j, r ^ mask, b, (r & mask) ? lower : upper, NULL));
    b = whole;
  }
  return 0;
}

int hvd__rabenseifner(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype, hvd_op op) {
  int p = hvd__pow2_floor(c->size), sat_out;
  HVD__CHECK(hvd__fold_in(c, tag, all, dtype, op, p, &sat_out));
  if (sat_out) return 0; /* it got the result, divided by its partner */
  job j = {c, tag, all, hvd_dtype_size(dtype), malloc(sizeof(hvd_piece) * (size_t)(all.n + 1)),
           malloc(sizeof(hvd_piece) * (size_t)(all.n + 1))};
  int rc = j.send && j.recv ? rounds(&j, p, dtype, op)
                            : hvd__err(HVD_E_NOMEM, "allocating %d pieces", all.n);
  free(j.send);
  free(j.recv);
  HVD__CHECK(rc);
  return hvd__fold_out(c, tag, all, p);
}
