/*
 * test_cache_path.c -- the response cache's fast path (engine/cycle.c):
 * tensors every rank enqueues with the parameters it has seen before run
 * after one small allreduce of cache bits instead of an exchange of
 * requests.
 *
 *   same bits    float32 inputs whose sums round differently in every
 *                order: the first call (negotiated in full), the cached
 *                calls after it (the fast path, counted through the
 *                internal hvd__cycle_counts()) and the same calls with
 *                the cache off (HOROVOD_CACHE_CAPACITY=0) all give the
 *                same bits, alone and fused, blocking and async.
 *   leaving      a tensor whose shape or dtype changes on every rank is
 *                negotiated again (right result, no mismatch); one whose
 *                shape changes on one rank fails on every rank naming both
 *                shapes; with HOROVOD_CACHE_CAPACITY=2 and five tensors
 *                taking turns, evicted tensors come back in full.
 *   skew         ranks enqueue cached tensors at different times, one
 *                more than a second late (it is then negotiated in full,
 *                where the stall inspector can see it): exact results.
 *
 * Linked with libhvd's objects for hvd__cycle_counts().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "api_hooks.h"
#include "engine/engine.h"
#include "testing.h"

static int rank, size, failures, checks;

#define N 4099 /* odd: uneven slices */
#define NT 6

/* Values of every magnitude and sign: sums round differently in every order. */
static void fill(float *x, size_t n, int who, int salt) {
  for (size_t i = 0; i < n; i++) {
    uint64_t m = mix((uint64_t)who * 1000003u + i * 7919u + (uint64_t)salt);
    x[i] = (float)((double)(int64_t)(m >> 11) / (double)(1ull << 50)) * (float)(1 + m % 1000);
  }
}

static uint64_t fast_tensors(void) {
  uint64_t fast = 0, full = 0;
  CALL(hvd__cycle_counts(&fast, &full));
  return fast;
}

/* NT tensors of different lengths, reduced blocking one by one, then
 * async all at once (fused), `reps` times; hashes of each result. */
static void reduce_all(float **buf, uint64_t *alone, uint64_t *fused, int reps) {
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < NT; k++) {
      char name[32];
      snprintf(name, sizeof name, "alone.%d", k);
      fill(buf[k], N - (size_t)k * 100, rank, k);
      CALL(hvd_allreduce(buf[k], buf[k], N - (size_t)k * 100, HVD_FLOAT32, HVD_SUM, name));
      uint64_t h = fnv(buf[k], (N - (size_t)k * 100) * sizeof(float));
      if (r == 0) alone[k] = h;
      else CHECK(h == alone[k], "%s: repetition %d differs from the first", name, r);
    }
    hvd_handle hs[NT];
    for (int k = 0; k < NT; k++) {
      char name[32];
      snprintf(name, sizeof name, "fused.%d", k);
      fill(buf[k], N - (size_t)k * 100, rank, k);
      CALL(hs[k] = hvd_allreduce_async(buf[k], buf[k], N - (size_t)k * 100, HVD_FLOAT32, HVD_SUM,
                                       name));
    }
    for (int k = 0; k < NT; k++) {
      CALL(hvd_wait(hs[k]));
      uint64_t h = fnv(buf[k], (N - (size_t)k * 100) * sizeof(float));
      if (r == 0) fused[k] = h;
      else CHECK(h == fused[k], "fused.%d: repetition %d differs from the first", k, r);
    }
  }
}

static void test_same_bits(void) {
  float *buf[NT];
  uint64_t alone[NT], fused[NT], alone0[NT], fused0[NT];
  for (int k = 0; k < NT; k++) buf[k] = malloc(N * sizeof(float));

  CALL(hvd_init());
  uint64_t before = fast_tensors();
  reduce_all(buf, alone, fused, 5);
  uint64_t fast = fast_tensors() - before;
  CALL(hvd_shutdown());
  /* every call after the first of each tensor: 4 x (6 blocking + 6 fused) */
  CHECK(fast >= 48, "only %llu tensors took the cached fast path", (unsigned long long)fast);

  setenv("HOROVOD_CACHE_CAPACITY", "0", 1);
  CALL(hvd_init());
  before = fast_tensors();
  reduce_all(buf, alone0, fused0, 2);
  CHECK(fast_tensors() == before, "the fast path ran with the cache off");
  CALL(hvd_shutdown());
  unsetenv("HOROVOD_CACHE_CAPACITY");
  for (int k = 0; k < NT; k++) {
    CHECK(alone[k] == alone0[k], "alone.%d: cached and uncached results differ", k);
    CHECK(fused[k] == fused0[k], "fused.%d: cached and uncached results differ", k);
    CHECK(alone[k] == fused[k], "tensor %d: fused and alone differ", k);
  }
  /* and the same bits on every rank */
  uint64_t *all = NULL;
  CALL(hvd_init());
  CALL(hvd_allgather(alone, NT, HVD_INT64, (void **)&all, NULL, "hashes"));
  for (int q = 0; q < size; q++)
    for (int k = 0; k < NT; k++)
      CHECK(all[(size_t)q * NT + k] == alone[k], "tensor %d: rank %d differs", k, q);
  free(all);
  CALL(hvd_shutdown());
  for (int k = 0; k < NT; k++) free(buf[k]);
}

/* ---- leaving the cache ---- */

/* Sum over ranks of (rank + 1) * (i % 7 + 1) for n elements of dtype,
 * checked exactly (small integers: exact in every dtype used). */
static void exact_allreduce(const char *name, hvd_dtype dtype, size_t n, const int64_t *shape,
                            int ndims) {
  size_t esize = hvd_dtype_size(dtype);
  unsigned char *buf = malloc(n * esize + 1);
  for (size_t i = 0; i < n; i++) {
    double v = (double)(rank + 1) * (double)(i % 7 + 1);
    if (dtype == HVD_FLOAT32) ((float *)buf)[i] = (float)v;
    else ((double *)buf)[i] = v;
  }
  hvd_opts o = HVD_OPTS_INIT;
  o.shape = shape;
  o.ndims = ndims;
  CALL(hvd_wait(hvd_allreduce_async_opts(buf, buf, n, dtype, HVD_SUM, name, &o)));
  size_t bad = 0;
  double ranks = (double)size * (size + 1) / 2;
  for (size_t i = 0; i < n; i++) {
    double got = dtype == HVD_FLOAT32 ? ((float *)buf)[i] : ((double *)buf)[i];
    bad += got != ranks * (double)(i % 7 + 1);
  }
  CHECK(bad == 0, "%s: %zu of %zu elements wrong", name, bad, n);
  free(buf);
}

static void test_leaving_the_cache(void) {
  CALL(hvd_init());
  int64_t s1[2] = {6, 10}, s2[2] = {10, 6}, s3[1] = {60};
  for (int r = 0; r < 3; r++) exact_allreduce("w", HVD_FLOAT32, 60, s1, 2); /* cached */
  exact_allreduce("w", HVD_FLOAT32, 60, s2, 2); /* a new shape, everywhere */
  exact_allreduce("w", HVD_FLOAT32, 60, s2, 2);
  exact_allreduce("w", HVD_FLOAT64, 60, s2, 2); /* a new dtype */
  exact_allreduce("w", HVD_FLOAT64, 60, s2, 2);
  exact_allreduce("w", HVD_FLOAT32, 61, NULL, 0); /* a new count */
  exact_allreduce("w", HVD_FLOAT32, 61, NULL, 0);

  /* One rank alone changes the shape: every rank fails, naming both. */
  if (size > 1) {
    float buf[60] = {0};
    hvd_opts o = HVD_OPTS_INIT;
    o.shape = rank == size - 1 ? s3 : s1;
    o.ndims = rank == size - 1 ? 1 : 2;
    for (int r = 0; r < 2; r++) { /* cache "v" with [6, 10] first */
      hvd_opts same = HVD_OPTS_INIT;
      same.shape = s1;
      same.ndims = 2;
      CALL(hvd_wait(hvd_allreduce_async_opts(buf, buf, 60, HVD_FLOAT32, HVD_SUM, "v", &same)));
    }
    int rc = hvd_wait(hvd_allreduce_async_opts(buf, buf, 60, HVD_FLOAT32, HVD_SUM, "v", &o));
    CHECK(rc == HVD_E_MISMATCH, "one rank's new shape: %s, expected HVD_E_MISMATCH",
          hvd_err_name(rc));
    CHECK(strstr(hvd_last_error(), "[6, 10]") && strstr(hvd_last_error(), "[60]"),
          "the message names both shapes: %s", hvd_last_error());
  }
  CALL(hvd_shutdown());

  /* Five tensors through a cache of two: evicted, back in full, again. */
  setenv("HOROVOD_CACHE_CAPACITY", "2", 1);
  CALL(hvd_init());
  for (int step = 0; step < 12; step++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", (step * 3) % 5);
    exact_allreduce(name, HVD_FLOAT32, 100 + (size_t)(step % 5), NULL, 0);
    if (step % 2) exact_allreduce("steady", HVD_FLOAT32, 33, NULL, 0);
  }
  CALL(hvd_shutdown());
  unsetenv("HOROVOD_CACHE_CAPACITY");
}

/* ---- skew ---- */

static void test_skew(void) {
  CALL(hvd_init());
  for (int step = 0; step < 6; step++) {
    /* ranks arrive in turn, a few milliseconds apart */
    sleep_ms(((rank + step) % size) * 3);
    exact_allreduce("skewed", HVD_FLOAT32, 500, NULL, 0);
  }
  uint64_t fast0 = fast_tensors();
  /* the last rank comes 1.2 s late: the others' held tensor goes to the
   * full exchange after HELD_MAX_MS, and still meets it there */
  if (rank == size - 1) sleep_ms(1200);
  exact_allreduce("skewed", HVD_FLOAT32, 500, NULL, 0);
  exact_allreduce("skewed", HVD_FLOAT32, 500, NULL, 0);
  CHECK(fast_tensors() > fast0, "no tensor took the fast path after the late rank");
  CALL(hvd_shutdown());
}

int main(void) {
  limit_stalls();
  if (learn_job(&rank, &size) != 0) return 1;
  test_same_bits();
  test_leaving_the_cache();
  test_skew();
  return report_checks("test_cache_path", rank, size, checks, failures);
}
