/*
 * agree.c -- every rank learns whether one of them failed (dispatch.h):
 * one small MAX allreduce of the highest failing rank plus one, so a
 * failure found on one rank before a collective (a missing GPU, a library
 * that would not load) fails it on every rank, each saying who and why,
 * instead of leaving the others inside a collective it never joins.
 */
#include <stdio.h>

#include "dispatch.h"

int hvd__coll_agree(hvd_comm *c, int rc, const char *what, int *fatal) {
  char why[512];
  snprintf(why, sizeof why, "%s", rc < 0 ? hvd_last_error() : "");
  int32_t failed = rc < 0 ? (int32_t)c->rank + 1 : 0;
  *fatal = 1;
  HVD__CHECK(hvd__coll_allreduce_small(c, &failed, 1, HVD_INT32, HVD_MAX));
  *fatal = 0;
  if (failed == 0) return 0;
  if (rc < 0) return hvd__err(rc, "rank %d %s: %s", c->rank, what, why);
  return hvd__err(HVD_E_UNSUPPORTED, "rank %d %s (its own error says why)", (int)failed - 1,
                  what);
}
