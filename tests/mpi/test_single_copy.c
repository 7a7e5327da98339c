/*
 * test_single_copy.c -- the shm allreduce straight from the other ranks'
 * buffers (coll/shm_direct.c), between processes, against the same
 * allreduce through the shared windows.
 *
 * Run on one host at np 2, with HOROVOD_SHM_SINGLE_COPY_MIN_BYTES at 1 MiB
 * (by default the direct way does not run: it did not pay where it was
 * measured): a vector past it, of floats whose sum depends on the order of
 * reduction, is reduced with single copy on (the probe must have passed
 * here: the internal hvd__peer_read_on() says so) and again with
 * HOROVOD_SHM_SINGLE_COPY=0 on one rank (the fallback: it must be off).  The bits
 * must be the same, and the same on every rank; a small vector and an
 * AVERAGE too.
 *
 * Linked with libhvd's objects for hvd__peer_read_on().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "api_hooks.h"
#include "coll/coll.h"
#include "testing.h"

static int rank, size, failures, checks;

#define BIG (((size_t)6 << 20) / sizeof(float) + 3) /* past the 1 MiB minimum, uneven slices */

static void fill(float *v, size_t n, int who) {
  for (size_t i = 0; i < n; i++) {
    uint64_t m = mix((uint64_t)who * 7919u + i);
    v[i] = (float)(int32_t)(uint32_t)m / 3.0e5f;
  }
}

/* Hashes of a big SUM, a small SUM and a big AVERAGE. */
static void reduce(float *v, uint64_t *h) {
  static const struct { size_t n; hvd_op op; } cases[3] = {{BIG, HVD_SUM}, {1000, HVD_SUM},
                                                          {BIG - 3, HVD_AVERAGE}};
  for (int k = 0; k < 3; k++) {
    char name[16];
    snprintf(name, sizeof name, "case.%d", k);
    fill(v, cases[k].n, rank);
    CALL(hvd_allreduce(v, v, cases[k].n, HVD_FLOAT32, cases[k].op, name));
    h[k] = fnv(v, cases[k].n * sizeof *v);
  }
}

int main(void) {
  limit_stalls();
  float *v = malloc(BIG * sizeof *v);
  uint64_t on[3], off[3], *all = NULL;
  if (learn_job(&rank, &size) != 0) return 1;

  setenv("HOROVOD_SHM_SINGLE_COPY_MIN_BYTES", "1048576", 1);
  setenv("HOROVOD_SHM_SINGLE_COPY", "1", 1);
  CALL(hvd_init());
  CHECK(hvd__peer_read_on(), "the single-copy probe failed on one host");
  reduce(v, on);
  CHECK(hvd__peer_read_on() == 2, "no allreduce read the other ranks' buffers");
  CALL(hvd_shutdown());

  setenv("HOROVOD_SHM_SINGLE_COPY", rank == size - 1 ? "0" : "1", 1); /* one rank says no */
  CALL(hvd_init());
  CHECK(!hvd__peer_read_on(), "single copy is on although rank %d refused it", size - 1);
  reduce(v, off);
  CALL(hvd_allgather(on, 3, HVD_INT64, (void **)&all, NULL, "hashes"));
  CALL(hvd_shutdown());

  for (int k = 0; k < 3; k++) {
    CHECK(on[k] == off[k], "case %d: single copy and the windows differ", k);
    for (int q = 0; q < size; q++)
      CHECK(all[(size_t)q * 3 + k] == on[k], "case %d: rank %d differs from rank %d", k, q, rank);
  }
  free(all);
  free(v);
  return report_checks("test_single_copy", rank, size, checks, failures);
}
