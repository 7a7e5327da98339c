/*
 * nn_testing.h -- what the multi-rank tests of libhvd_nn share, on top of
 * testing.h.
 */
#ifndef HVD_TESTS_MPI_NN_TESTING_H
#define HVD_TESTS_MPI_NN_TESTING_H

#include <hvd_nn.h>

#include "testing.h"

/* One hash over every parameter's bits: equal models, equal hashes. */
static inline uint64_t model_hash(hvd_nn_model *m) {
  uint64_t h = 0;
  for (int i = 0; i < hvd_nn_num_params(m); i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    h = h * 31 + fnv(p->value, p->count * sizeof(float));
  }
  return h;
}

#endif
