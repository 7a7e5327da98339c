/*
 * test_autotune.c -- the autotuner (engine/autotune.c) against a
 * synthetic engine.
 *
 * A "training loop" of four tensors per step, whose step time is a known
 * function of the knobs (a best fusion threshold and cycle time, the
 * cache a little faster on, the hierarchical allreduce slower), runs on a
 * simulated clock.  Started from a bad setting (1 MiB, 20 ms, as
 * docs/benchmarks.md's curve), the tuner must settle within the samples it
 * is allowed, on settings whose step time is within 10% of the best, and
 * log one CSV line per sample.  Then the workload changes (another
 * best): three slow samples in a row must start the tuning again, logged
 * with why, and it must settle near the new best.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine/autotune.h"

#define STEP_BYTES 100e6

/* The synthetic engine's step time in seconds: 20 ms at its best, more as
 * the knobs move away on their log scales. */
typedef struct {
  double best_fusion_mb, best_cycle_ms;
} workload;

static double step_time(const workload *w, const hvd_tune *t) {
  double f = log2(1 + t->fusion_mb) - log2(1 + w->best_fusion_mb);
  double c = log10(t->cycle_ms / w->best_cycle_ms);
  double s = 0.020 * (1 + 0.02 * f * f + 0.5 * c * c);
  if (!t->cache_on) s *= 1.08;
  if (t->hierarchical) s *= 1.2;
  return s;
}

typedef struct {
  hvd_autotune *a;
  hvd_tune cur;
  double now;
  int applied; /* settings changes */
} sim;

/* One step: four tensors, the first of which marks steps. */
static void step(sim *s, const workload *w) {
  static const uint64_t names[4] = {11, 22, 33, 44};
  double dt = step_time(w, &s->cur);
  for (int i = 0; i < 4; i++) {
    hvd_tune next;
    s->now += dt / 4;
    if (hvd__autotune_tensor(s->a, names[i], (uint64_t)(STEP_BYTES / 4), s->now, &next)) {
      s->cur = next; /* every rank applies it at the next cycle */
      s->applied++;
      hvd__autotune_applied(s->a, s->now);
    }
  }
}

/* Steps until the tuner settles (or `limit` steps). */
static int run_until_settled(sim *s, const workload *w, int limit) {
  int n = 0;
  while (!hvd__autotune_settled(s->a) && n < limit) step(s, w), n++;
  return n;
}

static char log_path[64];

static int count_lines(const char *needle) {
  FILE *f = fopen(log_path, "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
  if (f) fclose(f);
  return n;
}

static void test_settles_near_the_best_and_retunes(void **state) {
  (void)state;
  snprintf(log_path, sizeof log_path, "/tmp/hvd-test-autotune-%d.csv", (int)getpid());
  hvd_autotune_config cfg = {.warmup_samples = 3, .steps_per_sample = 10, .max_samples = 20,
                             .noise = 0.8, .retune_drop = 0.25, .tune_cache = 1,
                             .tune_hierarchical = 1, .log_path = log_path};
  hvd_tune bad = {1, 20, 1, 0};
  sim s = {.cur = bad, .now = 100};
  assert_int_equal(hvd__autotune_create(&cfg, &bad, &s.a), 0);

  workload w1 = {96, 0.6};
  hvd_tune best1 = {96, 0.6, 1, 0};
  int steps = run_until_settled(&s, &w1, 2000);
  int samples = hvd__autotune_samples(s.a);
  printf("settled after %d steps, %d samples: %.4g MiB, %.4g ms, cache %d, hier %d: "
         "%.2f ms per step (best %.2f)\n", steps, samples, s.cur.fusion_mb, s.cur.cycle_ms,
         s.cur.cache_on, s.cur.hierarchical, step_time(&w1, &s.cur) * 1e3,
         step_time(&w1, &best1) * 1e3);
  assert_true(hvd__autotune_settled(s.a));
  /* warm-up, the Bayesian samples, two per categorical knob */
  assert_true(samples <= 3 + 20 + 4);
  assert_true(step_time(&w1, &s.cur) <= 1.10 * step_time(&w1, &best1));
  assert_int_equal(s.cur.cache_on, 1);
  assert_int_equal(s.cur.hierarchical, 0);
  assert_int_equal(count_lines(",warmup,"), 3);
  assert_int_equal(count_lines(",bayes,"), 20);
  assert_int_equal(count_lines(",categorical,"), 4);

  /* Watching: the reference, then nothing changes for a while. */
  for (int i = 0; i < 200; i++) step(&s, &w1);
  assert_true(hvd__autotune_settled(s.a));
  assert_int_equal(count_lines(",retune,"), 0);

  /* The workload changes: the settled settings are now much slower. */
  workload w2 = {0, 8};
  hvd_tune best2 = {0, 8, 1, 0};
  int before = hvd__autotune_samples(s.a);
  while (hvd__autotune_settled(s.a) && hvd__autotune_samples(s.a) < before + 10) step(&s, &w2);
  assert_false(hvd__autotune_settled(s.a));
  assert_int_equal(count_lines(",retune,"), 1);
  assert_int_equal(count_lines("tuning again"), 1);
  run_until_settled(&s, &w2, 2000);
  printf("settled again: %.4g MiB, %.4g ms: %.2f ms per step (best %.2f)\n", s.cur.fusion_mb,
         s.cur.cycle_ms, step_time(&w2, &s.cur) * 1e3, step_time(&w2, &best2) * 1e3);
  assert_true(hvd__autotune_settled(s.a));
  assert_true(step_time(&w2, &s.cur) <= 1.10 * step_time(&w2, &best2));
  hvd__autotune_destroy(s.a);
  unlink(log_path);
}

static void test_bad_log_path_fails(void **state) {
  (void)state;
  hvd_autotune_config cfg = {.warmup_samples = 1, .steps_per_sample = 1, .max_samples = 3,
                             .noise = 0.8, .log_path = "/nonexistent/dir/log.csv"};
  hvd_tune start = {1, 1, 1, 0};
  hvd_autotune *a = NULL;
  assert_int_equal(hvd__autotune_create(&cfg, &start, &a), HVD_E_SYSTEM);
  assert_non_null(strstr(hvd_last_error(), "/nonexistent/dir/log.csv"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settles_near_the_best_and_retunes),
      cmocka_unit_test(test_bad_log_path_fails),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
