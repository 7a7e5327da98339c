/*
 * gpu_required.h -- how a GPU test starts: with the CUDA runtime and a
 * device it goes on; without, it prints why and exits 77 (ctest: skipped),
 * or 1 when HVD_TEST_EXPECT_GPU=1 says a device must be there
 * (scripts/gpu-check.sh on the GPU machine).
 */
#ifndef HVD_TEST_GPU_REQUIRED_H
#define HVD_TEST_GPU_REQUIRED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* rc: 0 or a negative HVD_E_* code, with hvd_last_error() saying why.
 * Returns only when rc is 0. */
static void gpu_required(int rc) {
  if (rc >= 0) return;
  const char *v = getenv("HVD_TEST_EXPECT_GPU");
  int expect = v != NULL && strcmp(v, "1") == 0;
  printf("%s: %s\n", expect ? "FAILED (HVD_TEST_EXPECT_GPU=1)" : "SKIPPED", hvd_last_error());
  exit(expect ? 1 : 77);
}

#endif /* HVD_TEST_GPU_REQUIRED_H */
