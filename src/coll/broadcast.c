/*
 * broadcast.c -- pipelined chain broadcast.
 *
 * Ranks form a chain starting at the root (position v = (rank - root) mod n).
 * The buffer moves in chunks: while a rank forwards chunk k-1 to the next
 * position it already receives chunk k from the previous one, so a large
 * buffer costs about one buffer's transfer time plus n-1 chunk times, and
 * each rank sends the data at most once.  (A binomial tree for small
 * messages comes with the speed work.)
 */
#include "coll.h"

static int broadcast_body(hvd_comm *c, uint32_t tag, void *buf, size_t bytes, int root) {
  int n = c->size, v = (c->rank - root + n) % n;
  if (n == 1) return 0;
  int prev = v > 0 ? (c->rank - 1 + n) % n : -1;
  int next = v < n - 1 ? (c->rank + 1) % n : -1;
  size_t chunk = HVD_CHUNK_BYTES;
  size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  char *p = buf;

  /* Iteration k receives chunk k (if any) and forwards chunk k-1; the root
   * has nothing to receive, so it sends chunk k at iteration k+1. */
  for (size_t k = 0; k <= nchunks; k++) {
    int from = (prev >= 0 && k < nchunks) ? prev : -1;
    int to = (next >= 0 && k >= 1) ? next : -1;
    size_t roff = k * chunk, soff = (k - 1) * chunk;
    size_t rlen = from >= 0 ? (bytes - roff < chunk ? bytes - roff : chunk) : 0;
    size_t slen = to >= 0 ? (bytes - soff < chunk ? bytes - soff : chunk) : 0;
    if (from < 0 && to < 0) continue;
    HVD__CHECK(hvd__comm_sendrecv(c, to, slen ? p + soff : NULL, slen, from,
                             rlen ? p + roff : NULL, rlen, tag));
  }
  return 0;
}

int hvd__broadcast(hvd_comm *c, void *buf, size_t bytes, int root) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  int rc = broadcast_body(c, tag, buf, bytes, root);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
