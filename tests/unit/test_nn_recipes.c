/*
 * test_nn_recipes.c -- the distributed sampler's rules and the learning
 * rate warmup (sampler.c, recipes.c), on one process: the sampler is
 * instantiated once per simulated rank.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "hvd_nn.h"

/* Every rank's sampler for one epoch; counts[i] = times index i is drawn. */
static void draw_all(int n, int replicas, uint64_t seed, int64_t epoch, int *counts,
                     int **per_rank) {
  memset(counts, 0, (size_t)n * sizeof *counts);
  for (int r = 0; r < replicas; r++) {
    hvd_nn_sampler s;
    assert_int_equal(hvd_nn_sampler_init(&s, n, replicas, r, seed), 0);
    assert_int_equal(hvd_nn_sampler_set_epoch(&s, epoch), 0);
    assert_int_equal(s.num_samples, (n + replicas - 1) / replicas);
    for (int k = 0; k < s.num_samples; k++) {
      assert_true(s.indices[k] >= 0 && s.indices[k] < n);
      counts[s.indices[k]]++;
    }
    if (per_rank) memcpy(per_rank[r], s.indices, (size_t)s.num_samples * sizeof(int));
    hvd_nn_sampler_free(&s);
  }
}

/* The shards cover the data set; only the padding repeats samples. */
static void test_shards_cover(void **state) {
  (void)state;
  static const int sizes[][2] = {{100, 4}, {101, 4}, {7, 3}, {3, 8}, {1, 1}, {60000, 4}};
  for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
    int n = sizes[c][0], replicas = sizes[c][1];
    int *counts = malloc((size_t)n * sizeof *counts);
    draw_all(n, replicas, 42, 3, counts, NULL);
    int total = (n + replicas - 1) / replicas * replicas, extra = 0;
    for (int i = 0; i < n; i++) {
      assert_true(counts[i] >= 1);
      extra += counts[i] - 1;
    }
    assert_int_equal(extra, total - n);
    free(counts);
  }
}

/* The ranks interleave one shared permutation: position p of the padded
 * list belongs to rank p % replicas, and the permutation is a shuffle. */
static void test_one_shared_permutation(void **state) {
  (void)state;
  enum { N = 1000, R = 4 };
  int counts[N], *rows[R], perm[N];
  for (int r = 0; r < R; r++) rows[r] = malloc(N / R * sizeof(int));
  draw_all(N, R, 7, 0, counts, rows);
  for (int p = 0; p < N; p++) perm[p] = rows[p % R][p / R];
  int moved = 0;
  for (int p = 0; p < N; p++) moved += perm[p] != p;
  assert_true(moved > N / 2);
  /* one rank alone reproduces the whole permutation */
  hvd_nn_sampler one;
  assert_int_equal(hvd_nn_sampler_init(&one, N, 1, 0, 7), 0);
  assert_memory_equal(one.indices, perm, sizeof perm);
  hvd_nn_sampler_free(&one);
  for (int r = 0; r < R; r++) free(rows[r]);
}

static void test_epochs_reshuffle_deterministically(void **state) {
  (void)state;
  hvd_nn_sampler a, b;
  assert_int_equal(hvd_nn_sampler_init(&a, 500, 2, 1, 9), 0);
  assert_int_equal(hvd_nn_sampler_init(&b, 500, 2, 1, 9), 0);
  int first[250];
  memcpy(first, a.indices, sizeof first);
  assert_int_equal(hvd_nn_sampler_set_epoch(&a, 1), 0);
  assert_memory_not_equal(first, a.indices, sizeof first);
  assert_int_equal(hvd_nn_sampler_set_epoch(&b, 1), 0);
  assert_memory_equal(a.indices, b.indices, sizeof first);
  assert_int_equal(hvd_nn_sampler_set_epoch(&a, 0), 0);
  assert_memory_equal(first, a.indices, sizeof first);
  /* another seed, another order */
  hvd_nn_sampler c;
  assert_int_equal(hvd_nn_sampler_init(&c, 500, 2, 1, 10), 0);
  assert_memory_not_equal(first, c.indices, sizeof first);
  /* shuffle off: plain interleaving */
  c.shuffle = 0;
  assert_int_equal(hvd_nn_sampler_set_epoch(&c, 5), 0);
  for (int k = 0; k < 250; k++) assert_int_equal(c.indices[k], 2 * k + 1);
  hvd_nn_sampler_free(&a);
  hvd_nn_sampler_free(&b);
  hvd_nn_sampler_free(&c);
}

static void test_sampler_rejects_bad_arguments(void **state) {
  (void)state;
  hvd_nn_sampler s;
  assert_int_equal(hvd_nn_sampler_init(&s, 0, 1, 0, 1), HVD_E_INVALID);
  assert_int_equal(hvd_nn_sampler_init(&s, 10, 2, 2, 1), HVD_E_INVALID);
  assert_non_null(strstr(hvd_nn_last_error(), "rank 2"));
  assert_null(s.indices);
  assert_int_equal(hvd_nn_sampler_init(&s, 10, 0, 0, 1), HVD_E_INVALID);
  assert_int_equal(hvd_nn_sampler_set_epoch(&s, 1), HVD_E_INVALID);
  hvd_nn_sampler_free(&s);
}

/* Goyal et al.: from the base rate at epoch 0 to scale times it at the end
 * of the warmup, linearly, and flat after. */
static void test_lr_warmup(void **state) {
  (void)state;
  assert_float_equal(hvd_nn_lr_warmup(0.1, 4, 0.0, 2.0), 0.1, 1e-12);
  assert_float_equal(hvd_nn_lr_warmup(0.1, 4, 1.0, 2.0), 0.25, 1e-12);
  assert_float_equal(hvd_nn_lr_warmup(0.1, 4, 2.0, 2.0), 0.4, 1e-12);
  assert_float_equal(hvd_nn_lr_warmup(0.1, 4, 9.5, 2.0), 0.4, 1e-12);
  assert_float_equal(hvd_nn_lr_warmup(0.1, 4, 0.0, 0.0), 0.4, 1e-12);
  assert_float_equal(hvd_nn_lr_warmup(0.1, 1, 0.5, 2.0), 0.1, 1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shards_cover),
      cmocka_unit_test(test_one_shared_permutation),
      cmocka_unit_test(test_epochs_reshuffle_deterministically),
      cmocka_unit_test(test_sampler_rejects_bad_arguments),
      cmocka_unit_test(test_lr_warmup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
