/*
 * test_place.c -- hvdrun's placement of ranks on hosts (src/launcher/place.c):
 * the HOROVOD_LOCAL_* and HOROVOD_CROSS_* values each rank gets, for even
 * and uneven hosts, and only the first np slots used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "place.h"

#define MAX 16

/* Places np ranks on `slots` and checks every rank's values against
 * want[r] = {local_rank, local_size, cross_rank, cross_size}. */
static void check(const long *slots, int nhosts, int np, const int (*want)[4]) {
  rank_place got[MAX];
  assert_int_equal(place_ranks(slots, nhosts, np, got), 0);
  for (int r = 0; r < np; r++) {
    print_message("rank %d\n", r);
    assert_int_equal(got[r].local_rank, want[r][0]);
    assert_int_equal(got[r].local_size, want[r][1]);
    assert_int_equal(got[r].cross_rank, want[r][2]);
    assert_int_equal(got[r].cross_size, want[r][3]);
  }
}

/* One host: today's values, local = global, one cross group. */
static void test_one_host(void **state) {
  (void)state;
  static const long slots[] = {4};
  static const int want[][4] = {{0, 3, 0, 1}, {1, 3, 0, 1}, {2, 3, 0, 1}};
  check(slots, 1, 3, want);
}

static void test_even_hosts(void **state) {
  (void)state;
  static const long slots[] = {2, 2, 2};
  static const int want[][4] = {{0, 2, 0, 3}, {1, 2, 0, 3}, {0, 2, 1, 3},
                                {1, 2, 1, 3}, {0, 2, 2, 3}, {1, 2, 2, 3}};
  check(slots, 3, 6, want);
}

/* Local ranks 1 and 2 exist on the first host only: their cross group is
 * that host alone. */
static void test_uneven_hosts(void **state) {
  (void)state;
  static const long slots[] = {3, 1};
  static const int want[][4] = {{0, 3, 0, 2}, {1, 3, 0, 1}, {2, 3, 0, 1}, {0, 1, 1, 2}};
  check(slots, 2, 4, want);
  /* The small host first: its rank 0 is cross rank 0 of local rank 0. */
  static const long slots2[] = {1, 3, 2};
  static const int want2[][4] = {{0, 1, 0, 3}, {0, 3, 1, 3}, {1, 3, 0, 2},
                                 {2, 3, 0, 1}, {0, 2, 2, 3}, {1, 2, 1, 2}};
  check(slots2, 3, 6, want2);
}

/* Only the first np slots: the last host is cut short, later ones get no
 * rank and do not count as hosts. */
static void test_first_slots_only(void **state) {
  (void)state;
  static const long slots[] = {2, 3, 4, 5};
  static const int want[][4] = {{0, 2, 0, 2}, {1, 2, 0, 1}, {0, 1, 1, 2}};
  check(slots, 4, 3, want);
  static const int want1[][4] = {{0, 1, 0, 1}};
  check(slots, 4, 1, want1);
}

static void test_too_few_slots(void **state) {
  (void)state;
  static const long slots[] = {2, 1};
  rank_place got[MAX];
  assert_int_equal(place_ranks(slots, 2, 4, got), -1);
  assert_int_equal(place_ranks(slots, 0, 1, got), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_host),       cmocka_unit_test(test_even_hosts),
      cmocka_unit_test(test_uneven_hosts),   cmocka_unit_test(test_first_slots_only),
      cmocka_unit_test(test_too_few_slots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
