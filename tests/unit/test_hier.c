/*
 * test_hier.c -- the checks the hierarchical allreduce makes of every
 * rank's HOROVOD_LOCAL_* / HOROVOD_CROSS_* (coll/hierarchical.c,
 * hvd__hier_check): hvdrun's layouts pass, even and uneven, and each kind
 * of disagreement fails with HVD_E_ENV naming the rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coll/coll.h"

/* {local_rank, local_size, cross_rank, cross_size} per rank. */
static const hvd_place even[] = {{0, 2, 0, 3}, {1, 2, 0, 3}, {0, 2, 1, 3},
                                 {1, 2, 1, 3}, {0, 2, 2, 3}, {1, 2, 2, 3}};
/* Hosts of 1, 3 and 2 ranks (tests/unit/test_place.c has the same). */
static const hvd_place uneven[] = {{0, 1, 0, 3}, {0, 3, 1, 3}, {1, 3, 0, 2},
                                   {2, 3, 0, 1}, {0, 2, 2, 3}, {1, 2, 1, 2}};

static void test_launcher_layouts_pass(void **state) {
  (void)state;
  assert_int_equal(hvd__hier_check(even, 6), 0);
  assert_int_equal(hvd__hier_check(uneven, 6), 0);
  /* Hosts need not be contiguous ranks: host 0 = ranks 0 and 2. */
  static const hvd_place interleaved[] = {{0, 2, 0, 2}, {0, 2, 1, 2}, {1, 2, 0, 2}, {1, 2, 1, 2}};
  assert_int_equal(hvd__hier_check(interleaved, 4), 0);
}

/* even[] with rank r's place replaced must fail, saying `want`. */
static void expect_error(int r, hvd_place p, const char *want) {
  hvd_place all[6];
  memcpy(all, even, sizeof all);
  all[r] = p;
  assert_int_equal(hvd__hier_check(all, 6), HVD_E_ENV);
  if (!strstr(hvd_last_error(), want)) fail_msg("'%s' does not say '%s'", hvd_last_error(), want);
}

static void test_disagreements_fail(void **state) {
  (void)state;
  expect_error(5, (hvd_place){1, 2, 2, 4}, "rank 5 has HOROVOD_CROSS_SIZE=4, expected 3");
  expect_error(5, (hvd_place){1, 2, 1, 3}, "rank 5 has HOROVOD_CROSS_RANK=1, expected a value "
                                           "other than rank 3's");
  expect_error(4, (hvd_place){0, 3, 2, 3}, "rank 4 has HOROVOD_LOCAL_SIZE=3");
  expect_error(2, (hvd_place){2, 3, 0, 1}, "has HOROVOD_");
  expect_error(0, (hvd_place){0, 7, 0, 3}, "rank 0 has HOROVOD_LOCAL_SIZE=7, expected 1 to 6");
  expect_error(1, (hvd_place){2, 2, 0, 3}, "rank 1 has HOROVOD_LOCAL_RANK=2, expected 0 to 1");
  expect_error(1, (hvd_place){1, 2, -1, 3}, "rank 1 has HOROVOD_CROSS_RANK=-1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_launcher_layouts_pass),
      cmocka_unit_test(test_disagreements_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
