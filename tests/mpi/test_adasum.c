/*
 * test_adasum.c -- HVD_ADASUM against an independent reference of the
 * formula (Maleki et al. 2020, as in Horovod):
 *     adasum(a, b) = a + b - (a.b / 2|a|^2) a - (a.b / 2|b|^2) b
 * applied recursively: ranks (0,1), (2,3), ... first, then the pairs'
 * results, lower ranks' vector first.  The reference runs in double over
 * every rank's input (each rank can generate all of them); the library's
 * float32 result must agree to float rounding, and every rank must hold
 * the same bits.  Exact cases: orthogonal gradients add, identical ones
 * stay as they are.  On a job size that is not a power of two the call
 * fails with HVD_E_UNSUPPORTED and says why.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, checks, failures;

static double input(int who, size_t i, uint64_t seed) {
  return (double)(mix(seed ^ mix((uint64_t)who * 1000003u + i)) % 2000001) / 1000000.0 - 1.0;
}

/* adasum(a, b) into a, in double, straight from the formula. */
static void ref_pair(double *a, const double *b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  for (size_t i = 0; i < n; i++)
    a[i] = a[i] + b[i] - (aa > 0 ? ab / (2 * aa) * a[i] : 0) - (bb > 0 ? ab / (2 * bb) * b[i] : 0);
}

/* The recursive reduction of all ranks' inputs: vec[r] holds rank r's. */
static void reference(double **vec, size_t n) {
  for (int d = 1; d < size; d *= 2)
    for (int r = 0; r < size; r += 2 * d) ref_pair(vec[r], vec[r + d], n);
}

static void check_random(hvd_dtype dtype, size_t n, uint64_t seed) {
  double **vec = malloc((size_t)size * sizeof *vec);
  for (int r = 0; r < size; r++) {
    vec[r] = malloc((n + 1) * sizeof **vec);
    for (size_t i = 0; i < n; i++) {
      double v = input(r, i, seed);
      vec[r][i] = dtype == HVD_FLOAT32 ? (double)(float)v : v; /* what the rank sends */
    }
  }
  size_t es = hvd_dtype_size(dtype);
  char *buf = malloc(n * es + 1);
  for (size_t i = 0; i < n; i++) {
    if (dtype == HVD_FLOAT32) ((float *)buf)[i] = (float)vec[rank][i];
    else ((double *)buf)[i] = vec[rank][i];
  }
  char name[64];
  snprintf(name, sizeof name, "adasum.%s.%zu", hvd_dtype_name(dtype), n);
  CALL(hvd_allreduce(buf, buf, n, dtype, HVD_ADASUM, name));
  reference(vec, n);
  size_t bad = 0;
  double tol = dtype == HVD_FLOAT32 ? 1e-5 : 1e-12;
  for (size_t i = 0; i < n; i++) {
    double got = dtype == HVD_FLOAT32 ? ((float *)buf)[i] : ((double *)buf)[i];
    bad += !(fabs(got - vec[0][i]) <= tol * (fabs(vec[0][i]) + 1));
  }
  CHECK(bad == 0, "%s: %zu of %zu elements differ from the reference", name, bad, n);
  uint64_t h = fnv(buf, n * es), *all = NULL;
  CALL(hvd_allgather(&h, 1, HVD_INT64, (void **)&all, NULL, "adasum.hash"));
  for (int q = 0; q < size; q++) CHECK(all[q] == h, "%s: rank %d's bits differ", name, q);
  free(all);
  free(buf);
  for (int r = 0; r < size; r++) free(vec[r]);
  free(vec);
}

/* Rank r's gradient is along axis r only: every pair is orthogonal, so
 * Adasum is the plain sum, exactly. */
static void check_orthogonal(void) {
  float g[8] = {0};
  g[rank] = (float)(rank + 1);
  CALL(hvd_allreduce(g, g, 8, HVD_FLOAT32, HVD_ADASUM, "adasum.orthogonal"));
  for (int i = 0; i < 8; i++)
    CHECK(g[i] == (i < size ? (float)(i + 1) : 0.0f), "orthogonal: g[%d] = %g", i, (double)g[i]);
}

/* The same gradient everywhere: Adasum returns it unchanged. */
static void check_identical(void) {
  double g[5] = {0.5, -2, 3.25, 0, 1e-3};
  CALL(hvd_allreduce(g, g, 5, HVD_FLOAT64, HVD_ADASUM, "adasum.identical"));
  double want[5] = {0.5, -2, 3.25, 0, 1e-3};
  for (int i = 0; i < 5; i++) CHECK(g[i] == want[i], "identical: g[%d] = %g", i, g[i]);
}

/* Several Adasum tensors in flight at once: each is its own reduction. */
static void check_async_batch(void) {
  enum { K = 6 };
  float t[K][33];
  hvd_handle h[K];
  for (int k = 0; k < K; k++) {
    char name[32];
    snprintf(name, sizeof name, "adasum.batch.%d", k);
    for (int i = 0; i < 33; i++) t[k][i] = (float)(rank == 0 ? k + 1 : 0); /* only rank 0 */
    h[k] = hvd_allreduce_async(t[k], t[k], 33, HVD_FLOAT32, HVD_ADASUM, name);
  }
  for (int k = 0; k < K; k++) {
    CALL(hvd_wait(h[k]));
    /* a zero vector adds nothing: the result is rank 0's tensor */
    CHECK(t[k][0] == (float)(k + 1) && t[k][32] == (float)(k + 1), "batch %d: %g", k,
          (double)t[k][0]);
  }
}

int main(void) {
  limit_stalls();
  if (init_or_complain() != 0) return 1;
  rank = hvd_rank();
  size = hvd_size();
  if (size & (size - 1)) {
    float g = 1;
    int rc = hvd_allreduce(&g, &g, 1, HVD_FLOAT32, HVD_ADASUM, "adasum.np3");
    CHECK(rc == HVD_E_UNSUPPORTED && strstr(hvd_last_error(), "power-of-two"),
          "size %d: got %s: %s", size, hvd_err_name(rc), hvd_last_error());
  } else {
    static const size_t counts[] = {0, 1, 7, 1000, 100003};
    uint64_t seed = 1;
    for (size_t c = 0; c < LEN(counts); c++) {
      check_random(HVD_FLOAT32, counts[c], seed++);
      check_random(HVD_FLOAT64, counts[c], seed++);
    }
    check_orthogonal();
    check_identical();
    check_async_batch();
  }
  CALL(hvd_shutdown());
  return report_checks("test_adasum", rank, size, checks, failures);
}
