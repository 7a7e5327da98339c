/*
 * test_fast_rider.c -- a small allreduce riding the fast path's exchange
 * (engine/rider.c): its values travel with the cache bits and every rank
 * reduces them itself, one round instead of two.
 *
 *   same bits    per dtype and op (float32 sum with prescale and
 *                postscale, float16 and bfloat16 sums, float64 average,
 *                int32 min and product): the same inputs four times in a
 *                row; the first call is negotiated in full and reduced by
 *                the collective, the second takes the fast path, the last
 *                two ride (counted through the internal hvd__rider_count):
 *                all four give the same bits, the same as with
 *                HOROVOD_FAST_PATH_RIDER_BYTES=0, on every rank; an exact
 *                int32 sum against its closed form.
 *   fused        the riding tensor enqueued with two others (one too big
 *                to ride): it rides, the others are reduced in one fused
 *                response around it, every result as in full negotiation.
 *   in turn      two tensors taking turns ride once learned (the guess
 *                is the one that ran alone after the last one, the last
 *                time; before, the one that ran alone last, which was
 *                never the one held): at least 4 of 12 calls ride.
 *   wrong guess  a tensor followed by two others in turn (the guess after
 *                it is always the other one), an empty tensor, and a rank
 *                arriving late (its flag is 0): nothing rides that should
 *                not, results exact.
 *
 * Run over shared memory (the shm allreduce's rank order) and TCP
 * (recursive doubling's tree; at np 3 with its fold-in).
 * Linked with libhvd's objects for hvd__rider_count().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "api_hooks.h"
#include "reduce.h"
#include "testing.h"

static int rank, size, failures, checks;

typedef struct {
  const char *name;
  hvd_dtype dtype;
  hvd_op op;
  size_t count;
  double prescale, postscale;
} rider_case;

static const rider_case cases[] = {
    {"f32.sum", HVD_FLOAT32, HVD_SUM, 1, 1.0, 1.0},
    {"f32.scaled", HVD_FLOAT32, HVD_SUM, 1000, 0.5, 3.0},
    {"f16.sum", HVD_FLOAT16, HVD_SUM, 333, 1.0, 1.0},
    {"bf16.sum", HVD_BFLOAT16, HVD_SUM, 64, 1.0, 1.0},
    {"f64.avg", HVD_FLOAT64, HVD_AVERAGE, 129, 1.0, 1.0},
    {"i32.min", HVD_INT32, HVD_MIN, 17, 1.0, 1.0},
    {"i32.prod", HVD_INT32, HVD_PRODUCT, 5, 1.0, 1.0},
};
#define NCASES LEN(cases)
#define REPS 4

static uint64_t rode(void) {
  uint64_t n = 0;
  CALL(hvd__rider_count(&n));
  return n;
}

/* Values of every magnitude and sign: sums round differently in every
 * order (integers small, products in range). */
static void fill(void *buf, const rider_case *c, int salt) {
  for (size_t i = 0; i < c->count; i++) {
    uint64_t m = mix((uint64_t)rank * 1000003u + i * 7919u + (uint64_t)salt);
    float f = (float)((double)(int64_t)(m >> 11) / (double)(1ull << 50)) * (float)(1 + m % 1000);
    switch (c->dtype) {
      case HVD_FLOAT32: ((float *)buf)[i] = f; break;
      case HVD_FLOAT64: ((double *)buf)[i] = (double)f * 1.000000001; break;
      case HVD_FLOAT16: ((uint16_t *)buf)[i] = hvd__float_to_half(f / 64); break;
      case HVD_BFLOAT16: ((uint16_t *)buf)[i] = hvd__float_to_bf16(f); break;
      default: ((int32_t *)buf)[i] = (int32_t)(m % 7) - 3; break;
    }
  }
}

static uint64_t reduce_case(const rider_case *c, void *buf, int salt) {
  hvd_opts o = HVD_OPTS_INIT;
  o.prescale_factor = c->prescale;
  o.postscale_factor = c->postscale;
  fill(buf, c, salt);
  CALL(hvd_wait(hvd_allreduce_async_opts(buf, buf, c->count, c->dtype, c->op, c->name, &o)));
  return fnv(buf, c->count * hvd_dtype_size(c->dtype));
}

/* Every case REPS times in a row; hashes[k] its result. */
static void run_cases(uint64_t *hashes, int riding) {
  void *buf = malloc(1000 * 8);
  for (size_t k = 0; k < NCASES; k++) {
    uint64_t before = rode();
    for (int r = 0; r < REPS; r++) {
      uint64_t h = reduce_case(&cases[k], buf, (int)k);
      if (r == 0) hashes[k] = h;
      else CHECK(h == hashes[k], "%s: call %d differs from the first", cases[k].name, r + 1);
    }
    uint64_t n = rode() - before;
    if (riding) CHECK(n >= 2, "%s: %llu of %d calls rode", cases[k].name, (unsigned long long)n, REPS);
    else CHECK(n == 0, "%s: %llu calls rode with riding off", cases[k].name, (unsigned long long)n);
  }
  free(buf);
}

static void exact_sum(const char *name, size_t n) {
  int32_t *x = calloc(n ? n : 1, sizeof *x); /* read even when n is 0, as far as gcc knows */
  for (size_t i = 0; i < n; i++) x[i] = (rank + 1) * (int32_t)(i % 7 + 1);
  CALL(hvd_allreduce(x, x, n, HVD_INT32, HVD_SUM, name));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += x[i] != size * (size + 1) / 2 * (int32_t)(i % 7 + 1);
  CHECK(bad == 0, "%s: %zu of %zu elements wrong", name, bad, n);
  free(x);
}

static void test_same_bits(void) {
  uint64_t on[NCASES], off[NCASES], *all = NULL;
  CALL(hvd_init());
  run_cases(on, 1);
  uint64_t before = rode();
  for (int r = 0; r < REPS; r++) exact_sum("exact", 100);
  CHECK(rode() - before >= 2, "the exact sum never rode");
  CALL(hvd_allgather(on, NCASES, HVD_INT64, (void **)&all, NULL, "hashes"));
  for (int q = 0; q < size; q++)
    for (size_t k = 0; k < NCASES; k++)
      CHECK(all[(size_t)q * NCASES + k] == on[k], "%s: rank %d differs", cases[k].name, q);
  free(all);
  CALL(hvd_shutdown());

  setenv("HOROVOD_FAST_PATH_RIDER_BYTES", "0", 1);
  CALL(hvd_init());
  run_cases(off, 0);
  CALL(hvd_shutdown());
  unsetenv("HOROVOD_FAST_PATH_RIDER_BYTES");
  for (size_t k = 0; k < NCASES; k++)
    CHECK(on[k] == off[k], "%s: riding and not riding differ", cases[k].name);
}

/* m rides; x and y (too big to ride) are reduced around it, fused. */
static void test_fused(void) {
  static const rider_case m = {"m", HVD_FLOAT32, HVD_SUM, 100, 1.0, 1.0};
  static const rider_case x = {"x", HVD_FLOAT32, HVD_SUM, 300, 1.0, 1.0};
  static const rider_case y = {"y", HVD_FLOAT32, HVD_SUM, 3000, 1.0, 1.0};
  const rider_case *cs[3] = {&m, &x, &y};
  float *buf[3];
  uint64_t first[3];
  for (int i = 0; i < 3; i++) buf[i] = malloc(3000 * sizeof(float));
  CALL(hvd_init());
  reduce_case(&m, buf[0], 7);
  reduce_case(&m, buf[0], 7); /* cached, alone: m is the one to ride */
  uint64_t before = rode();
  for (int r = 0; r < 3; r++) {
    hvd_handle h[3];
    for (int i = 0; i < 3; i++) {
      fill(buf[i], cs[i], 7 + i);
      CALL(h[i] = hvd_allreduce_async(buf[i], buf[i], cs[i]->count, HVD_FLOAT32, HVD_SUM,
                                      cs[i]->name));
    }
    for (int i = 0; i < 3; i++) {
      CALL(hvd_wait(h[i]));
      uint64_t hash = fnv(buf[i], cs[i]->count * sizeof(float));
      if (r == 0) first[i] = hash;
      else CHECK(hash == first[i], "%s: fused call %d differs from the first", cs[i]->name, r + 1);
    }
  }
  CHECK(rode() - before >= 1, "m never rode beside x and y");
  CALL(hvd_shutdown());
  for (int i = 0; i < 3; i++) free(buf[i]);
}

static void test_in_turn(void) {
  CALL(hvd_init());
  for (int r = 0; r < 4; r++) exact_sum(r % 2 ? "a" : "b", 10 + (size_t)(r % 2));
  uint64_t before = rode();
  for (int r = 0; r < 12; r++) exact_sum(r % 2 ? "a" : "b", 10 + (size_t)(r % 2));
  uint64_t n = rode() - before;
  CHECK(n >= 4, "%llu of 12 calls of two tensors in turn rode", (unsigned long long)n);
  CALL(hvd_shutdown());
}

static void test_wrong_guess(void) {
  static const char *const turn[4] = {"a", "b", "a", "c"};
  CALL(hvd_init());
  for (int r = 0; r < 12; r++) exact_sum(turn[r % 4], 10 + (size_t)(r % 4));
  for (int r = 0; r < 4; r++) exact_sum("empty", 0); /* nothing to carry: never rides */
  for (int r = 0; r < 6; r++) {
    if (rank == size - 1) sleep_ms(20);
    exact_sum("late", 50);
  }
  CALL(hvd_shutdown());
}

int main(void) {
  limit_stalls();
  if (learn_job(&rank, &size) != 0) return 1;
  test_same_bits();
  test_fused();
  test_in_turn();
  test_wrong_guess();
  return report_checks("test_fast_rider", rank, size, checks, failures);
}
