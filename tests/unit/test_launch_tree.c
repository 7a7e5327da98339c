/*
 * test_launch_tree.c -- the shape of hvdrun's launch tree
 * (src/launcher/launch_tree.c): who starts whose ssh session.
 *
 * For every host count up to 600 and fanouts 2..16: every parent comes
 * before its children, no starter (hvdrun or an agent) starts more than
 * `fanout` sessions, and the depth is the least the fanout allows: d
 * levels hold fanout * (fanout^d - 1) / (fanout - 1) hosts, computed here
 * independently; so at most ceil(log2(hosts + 1)) sequential steps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "launch_tree.h"

/* The fewest levels that hold n hosts when each starter starts f. */
static int least_depth(int n, int f) {
  long per_run = 1, held = f; /* a run of depth d holds 1 + f + ... + f^(d-1) hosts */
  int d = 1;
  while (held < n) {
    per_run = 1 + f * per_run;
    held = f * per_run;
    d++;
  }
  return d;
}

static void check_shape(int n, int f) {
  int *parent = malloc((size_t)n * sizeof *parent), *kids = calloc((size_t)n + 1, sizeof *kids);
  launch_tree(n, f, parent);
  for (int i = 0; i < n; i++) {
    assert_true(parent[i] >= -1 && parent[i] < i);
    kids[parent[i] + 1]++; /* kids[0]: hvdrun's */
  }
  for (int i = 0; i <= n; i++) assert_true(kids[i] <= f);
  int depth = launch_tree_depth(n, parent);
  assert_int_equal(depth, least_depth(n, f));
  assert_true(depth <= (int)ceil(log2(n + 1.0)));
  free(parent);
  free(kids);
}

static void test_every_size(void **state) {
  (void)state;
  for (int f = 2; f <= 16; f++)
    for (int n = 1; n <= 600; n++) check_shape(n, f);
}

static void test_flat_up_to_the_fanout(void **state) {
  (void)state;
  int parent[8];
  launch_tree(8, 8, parent);
  for (int i = 0; i < 8; i++) assert_int_equal(parent[i], -1);
  assert_int_equal(launch_tree_depth(8, parent), 1);
  launch_tree(8, 0, parent); /* --launch-fanout 0: hvdrun starts them all */
  for (int i = 0; i < 8; i++) assert_int_equal(parent[i], -1);
}

/* 16 hosts, fanout 8 (the default; the cluster test's 16 hosts): hvdrun
 * starts every other host, each of which starts the next. */
static void test_sixteen_hosts(void **state) {
  (void)state;
  int parent[16];
  launch_tree(16, LAUNCH_FANOUT_DEFAULT, parent);
  for (int i = 0; i < 16; i++) assert_int_equal(parent[i], i % 2 ? i - 1 : -1);
  assert_int_equal(launch_tree_depth(16, parent), 2);
  int wide[512];
  launch_tree(512, LAUNCH_FANOUT_DEFAULT, wide);
  assert_int_equal(launch_tree_depth(512, wide), 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_size),
      cmocka_unit_test(test_flat_up_to_the_fanout),
      cmocka_unit_test(test_sixteen_hosts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
