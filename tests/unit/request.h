/*
 * request.h -- the unit tests' one way to make a request: an allreduce
 * (sum) of `count` elements of `dtype` in one dimension, no scaling, as a
 * rank would send it to the coordinator.  Tests that need another kind
 * change the fields they care about.
 */
#ifndef HVD_TESTS_UNIT_REQUEST_H
#define HVD_TESTS_UNIT_REQUEST_H

#include <stdio.h>
#include <string.h>

#include "engine/request.h"

static inline hvd_request req_allreduce(const char *name, int dtype, uint64_t count) {
  hvd_request r;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "%s", name);
  r.type = HVD_REQ_ALLREDUCE;
  r.dtype = (uint8_t)dtype;
  r.op = HVD_SUM;
  r.count = count;
  r.ndims = 1;
  r.shape[0] = (int64_t)count;
  r.prescale = r.postscale = 1.0;
  return r;
}

#endif
