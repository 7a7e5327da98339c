/*
 * barrier.c -- dissemination barrier.
 *
 * In round k (distance 1, 2, 4, ...) rank r signals rank r+k and waits for
 * rank r-k.  After ceil(log2 n) rounds every rank has heard, directly or
 * through others, from every rank, so none can leave before all arrived.
 */
#include "coll.h"

static int barrier_body(hvd_comm *c, uint32_t tag) {
  int n = c->size, r = c->rank;
  for (int k = 1; k < n; k *= 2)
    HVD__CHECK(hvd__comm_sendrecv(c, (r + k) % n, NULL, 0, (r - k + n) % n, NULL, 0, tag));
  return 0;
}

int hvd__barrier(hvd_comm *c) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  int rc = barrier_body(c, tag);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
