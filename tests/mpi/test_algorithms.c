/*
 * test_algorithms.c -- every allreduce algorithm gives the reference
 * result and the same bits on every rank.
 *
 * tests.cmake runs this program once per value of
 * HOROVOD_ALLREDUCE_ALGORITHM (auto, ring, recursive_doubling, rabenseifner,
 * shm) at job sizes 1 to 8, powers of two and not, and with
 * HOROVOD_HIERARCHICAL_ALLREDUCE=1 on emulated hosts.  Three parts:
 *
 *   - every dtype x op at 0, 1, 7, 1000 and 100003 elements against
 *     reference.h's order-independent references (bitwise);
 *   - inputs whose result does depend on the order of reduction (random
 *     floats; NaNs with rank-dependent payloads, -0 and +0 for MIN/MAX):
 *     every rank must hold the same bits;
 *   - a burst of async allreduces of sizes on both sides of auto's
 *     crossover, fused by the engine, must give each tensor exactly the
 *     bits it gets reduced alone.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, failures, checks;

#include "reference.h"

static const size_t counts[] = {0, 1, 7, 1000, 100003};

/* ---- against the reference ---- */

static void reference_case(hvd_dtype t, hvd_op op, size_t count, int in_place, uint64_t seed) {
  size_t es = hvd_dtype_size(t);
  char *in = malloc(count * es + 1), *out = malloc(count * es + 1);
  fill(t, op, seed, rank, in, count);
  char *got = in_place ? in : out;
  CALL(hvd_allreduce(in, got, count, t, op, "ref"));
  compare(in_place ? "allreduce in place" : "allreduce", t, op, seed, got, 0, count);
  free(in);
  free(out);
}

static void test_reference(void) {
  uint64_t seed = 1;
  for (size_t a = 0; a < LEN(all_dtypes); a++)
    for (size_t b = 0; b < LEN(all_ops); b++) {
      if (all_dtypes[a] == HVD_BOOL && all_ops[b] == HVD_AVERAGE) continue;
      for (size_t c = 0; c < LEN(counts); c++, seed++)
        reference_case(all_dtypes[a], all_ops[b], counts[c], (int)(seed % 2), seed);
    }
}

/* ---- the same bits everywhere ---- */

/* Every rank's hash of `buf` must be this rank's. */
static void check_same_everywhere(const char *what, hvd_dtype t, hvd_op op, const void *buf,
                                  size_t count) {
  uint64_t h = fnv(buf, count * hvd_dtype_size(t)), *all = NULL;
  CALL(hvd_allgather(&h, 1, HVD_INT64, (void **)&all, NULL, "hashes"));
  for (int q = 0; q < size; q++)
    CHECK(all[q] == h, "%s %s %s count %zu differs between rank %d and rank %d", what,
          hvd_dtype_name(t), hvd_op_name(op), count, rank, q);
  free(all);
}

/* Random values in (-1, 1) of very different magnitudes, so that sums
 * round differently in every order; for MIN/MAX, also NaNs whose payload
 * names the rank, and zeros of both signs. */
static double tricky(hvd_op op, int who, size_t i) {
  uint64_t r = rnd(77, who, i);
  if ((op == HVD_MIN || op == HVD_MAX) && r % 5 == 0) {
    double nan_ = nan("");
    uint64_t bits;
    memcpy(&bits, &nan_, 8);
    bits |= (uint64_t)(who + 1) << 40; /* survives narrowing to float32 */
    memcpy(&nan_, &bits, 8);
    return nan_;
  }
  if ((op == HVD_MIN || op == HVD_MAX) && r % 5 == 1) return (r >> 8) % 2 ? 0.0 : -0.0;
  return ((double)(r % 2000001) / 1000000.0 - 1.0) * ldexp(1.0, (int)((r >> 32) % 20) - 10);
}

static void store_tricky(hvd_dtype t, double x, void *p) {
  if (t == HVD_FLOAT64) {
    memcpy(p, &x, 8);
  } else { /* half types from float32's upper bits keep the NaN payload's top */
    float f = (float)x;
    if (t == HVD_FLOAT32) {
      memcpy(p, &f, 4);
    } else {
      uint32_t u;
      memcpy(&u, &f, 4);
      uint16_t b = t == HVD_BFLOAT16 ? (uint16_t)(u >> 16) : ref_half(x);
      memcpy(p, &b, 2);
    }
  }
}

static void test_same_bits(void) {
  static const hvd_dtype types[] = {HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64};
  static const hvd_op ops[] = {HVD_SUM, HVD_AVERAGE, HVD_PRODUCT, HVD_MIN, HVD_MAX};
  for (size_t a = 0; a < LEN(types); a++)
    for (size_t b = 0; b < LEN(ops); b++)
      for (size_t c = 1; c < LEN(counts); c++) {
        hvd_dtype t = types[a];
        size_t n = counts[c], es = hvd_dtype_size(t);
        char *buf = malloc(n * es);
        for (size_t i = 0; i < n; i++) store_tricky(t, tricky(ops[b], rank, i), buf + i * es);
        CALL(hvd_allreduce(buf, buf, n, t, ops[b], "bits"));
        check_same_everywhere("allreduce", t, ops[b], buf, n);
        free(buf);
      }
}

/* ---- fused = alone ---- */

/* Sizes in float32 elements: some below every crossover, some above. */
static const size_t fused_counts[] = {1, 3, 100, 1000, 5000, 20000, 70000, 150000};
#define NF LEN(fused_counts)

static void test_fused_equals_alone(void) {
  float *in[NF], *fused[NF], *alone[NF];
  hvd_handle h[NF];
  char name[32];
  for (size_t k = 0; k < NF; k++) {
    size_t n = fused_counts[k];
    in[k] = malloc(n * sizeof(float));
    fused[k] = malloc(n * sizeof(float));
    alone[k] = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) in[k][i] = (float)tricky(HVD_SUM, rank, i + 7919 * k);
  }
  for (int step = 0; step < 3; step++) {
    /* One burst, so that the engine fuses (each rank in its own order). */
    for (size_t j = 0; j < NF; j++) {
      size_t k = (j + (size_t)rank) % NF;
      snprintf(name, sizeof name, "fused.%zu", k);
      CALL(h[k] = hvd_allreduce_async(in[k], fused[k], fused_counts[k], HVD_FLOAT32,
                                      HVD_SUM, name));
    }
    for (size_t k = 0; k < NF; k++) CALL(hvd_wait(h[k]));
  }
  for (size_t k = 0; k < NF; k++) {
    snprintf(name, sizeof name, "alone.%zu", k);
    CALL(hvd_allreduce(in[k], alone[k], fused_counts[k], HVD_FLOAT32, HVD_SUM, name));
    CHECK(memcmp(fused[k], alone[k], fused_counts[k] * sizeof(float)) == 0,
          "%zu floats: fused and alone differ", fused_counts[k]);
    check_same_everywhere("fused allreduce", HVD_FLOAT32, HVD_SUM, fused[k], fused_counts[k]);
    free(in[k]);
    free(fused[k]);
    free(alone[k]);
  }
}

int main(void) {
  limit_stalls();
  CALL(hvd_init());
  rank = hvd_rank();
  size = hvd_size();
  const char *algo = getenv("HOROVOD_ALLREDUCE_ALGORITHM"),
             *hier = getenv("HOROVOD_HIERARCHICAL_ALLREDUCE");
  if (hier && strcmp(hier, "1") == 0) algo = "hierarchical";
  test_reference();
  test_same_bits();
  test_fused_equals_alone();
  CALL(hvd_shutdown());
  char program[96];
  snprintf(program, sizeof program, "test_algorithms (%s)", algo && *algo ? algo : "auto");
  return report_checks(program, rank, size, checks, failures);
}
