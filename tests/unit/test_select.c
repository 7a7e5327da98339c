/*
 * test_select.c -- HOROVOD_ALLREDUCE_ALGORITHM and the cost model that
 * picks an allreduce algorithm for "auto" (coll/select.c), and the choice
 * on shared memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/coll.h"
#include "env.h"

static void test_parse(void **state) {
  (void)state;
  static const struct {
    const char *text;
    hvd_ar_algo want;
  } good[] = {{"auto", HVD_AR_AUTO},
              {"ring", HVD_AR_RING},
              {"recursive_doubling", HVD_AR_RECURSIVE_DOUBLING},
              {"shm", HVD_AR_SHM},
              {"Rabenseifner", HVD_AR_RABENSEIFNER},
              {"RING", HVD_AR_RING},
              {"Recursive_Doubling", HVD_AR_RECURSIVE_DOUBLING}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    hvd_ar_algo a = HVD_AR_AUTO;
    assert_int_equal(hvd__allreduce_algo_parse(good[i].text, &a), 0);
    assert_int_equal(a, good[i].want);
  }
  assert_string_equal(hvd__allreduce_algo_name(HVD_AR_RECURSIVE_DOUBLING),
                      "recursive_doubling");
  static const char *const bad[] = {"tree", "", "ring ", "recursive-doubling", "rd"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hvd_ar_algo a;
    assert_int_equal(hvd__allreduce_algo_parse(bad[i], &a), HVD_E_ENV);
    assert_non_null(strstr(hvd_last_error(), "HOROVOD_ALLREDUCE_ALGORITHM"));
    assert_non_null(strstr(hvd_last_error(), "auto, ring, recursive_doubling, rabenseifner or shm"));
  }
}

static void test_env(void **state) {
  (void)state;
  hvd_ar_algo a = HVD_AR_RING;
  unsetenv("HOROVOD_ALLREDUCE_ALGORITHM");
  assert_int_equal(hvd__allreduce_algo_env(&a), 0);
  assert_int_equal(a, HVD_AR_AUTO);
  setenv("HOROVOD_ALLREDUCE_ALGORITHM", "", 1); /* empty is unset */
  assert_int_equal(hvd__allreduce_algo_env(&a), 0);
  assert_int_equal(a, HVD_AR_AUTO);
  setenv("HOROVOD_ALLREDUCE_ALGORITHM", "recursive_doubling", 1);
  assert_int_equal(hvd__allreduce_algo_env(&a), 0);
  assert_int_equal(a, HVD_AR_RECURSIVE_DOUBLING);
  unsetenv("HOROVOD_ALLREDUCE_ALGORITHM");
}

/* An unknown name fails hvd_init before it looks for a job. */
static void test_init_refuses_unknown(void **state) {
  (void)state;
  setenv("HOROVOD_ALLREDUCE_ALGORITHM", "tree", 1);
  assert_int_equal(hvd_init(), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "HOROVOD_ALLREDUCE_ALGORITHM='tree'"));
  assert_non_null(strstr(hvd_last_error(), "auto, ring, recursive_doubling, rabenseifner or shm"));
  assert_int_equal(hvd_is_initialized(), 0);
  unsetenv("HOROVOD_ALLREDUCE_ALGORITHM");
}

/* The table in select.c's comment, within rounding of the printed values. */
static void test_crossovers(void **state) {
  (void)state;
  static const struct {
    int n;
    size_t kib10; /* tenths of a KiB as printed, 1K = 1000 */
  } table[] = {{2, 2000}, {3, 55}, {4, 320}, {5, 150}, {6, 230},
               {7, 320},  {8, 205}, {16, 165}, {32, 144}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    size_t got = hvd__allreduce_crossover(table[i].n), want = table[i].kib10 * 100;
    assert_in_range(got, want - want / 20, want + want / 20);
  }
  assert_int_equal(hvd__allreduce_crossover(1), 0);
}

/* Above the crossover: Rabenseifner where n is a power of two from 4
 * (the ring's bytes in fewer messages), else the ring. */
static hvd_ar_algo large_for(int n) {
  return n >= 4 && (n & (n - 1)) == 0 ? HVD_AR_RABENSEIFNER : HVD_AR_RING;
}

static void test_choose(void **state) {
  (void)state;
  for (int n = 2; n <= 64; n++) {
    size_t x = hvd__allreduce_crossover(n);
    assert_true(x > 0);
    assert_int_equal(hvd__allreduce_choose(HVD_AR_AUTO, n, 0), HVD_AR_RECURSIVE_DOUBLING);
    assert_int_equal(hvd__allreduce_choose(HVD_AR_AUTO, n, 8), HVD_AR_RECURSIVE_DOUBLING);
    assert_int_equal(hvd__allreduce_choose(HVD_AR_AUTO, n, x - 1), HVD_AR_RECURSIVE_DOUBLING);
    assert_int_equal(hvd__allreduce_choose(HVD_AR_AUTO, n, x), large_for(n));
    assert_int_equal(hvd__allreduce_choose(HVD_AR_AUTO, n, 256u << 20), large_for(n));
    /* A forced algorithm holds at every size. */
    assert_int_equal(hvd__allreduce_choose(HVD_AR_RING, n, 8), HVD_AR_RING);
    assert_int_equal(hvd__allreduce_choose(HVD_AR_RECURSIVE_DOUBLING, n, 256u << 20),
                     HVD_AR_RECURSIVE_DOUBLING);
    assert_int_equal(hvd__allreduce_choose(HVD_AR_RABENSEIFNER, n, 8), HVD_AR_RABENSEIFNER);
  }
}

/* A transport with windows (as shm's) or without (as tcp's): only the
 * ops' presence matters to the choice. */
static unsigned char *no_window(hvd_transport *t, int rank, int which) {
  (void)t, (void)rank, (void)which;
  return NULL;
}
static int no_sync(hvd_transport *t, const hvd_sync_stamp *m, hvd_sync_stamp *o, int *r) {
  (void)t, (void)m, (void)o, (void)r;
  return 0;
}
static const hvd_transport_ops shm_like = {.name = "shm",
                                           .caps = {.window = no_window, .sync = no_sync}};
static const hvd_transport_ops tcp_like = {.name = "tcp"};

static hvd_ar_algo algo_for(const hvd_transport_ops *ops, int setting, int n, int *members,
                            size_t bytes) {
  hvd_transport t = {.ops = ops, .rank = 0, .size = n, .window_bytes = ops->caps.window ? 1 << 18 : 0};
  hvd_comm c = {.rank = 0, .size = n, .members = members, .xport = &t, .allreduce_algo = setting};
  return hvd__allreduce_algo(&c, bytes);
}

/* On shared memory: the shm allreduce, except between two ranks above
 * 8 KiB; never over TCP or in a process set (whose syncs would not be the
 * set's); "shm" where it cannot run means auto. */
static void test_choose_shm(void **state) {
  (void)state;
  int members[4] = {0, 1, 2, 3};
  for (int n = 3; n <= 8; n++)
    for (size_t b = 8; b <= (256u << 20); b *= 4)
      assert_int_equal(algo_for(&shm_like, HVD_AR_AUTO, n, NULL, b), HVD_AR_SHM);
  assert_int_equal(algo_for(&shm_like, HVD_AR_AUTO, 2, NULL, 8), HVD_AR_SHM);
  assert_int_equal(algo_for(&shm_like, HVD_AR_AUTO, 2, NULL, 8191), HVD_AR_SHM);
  assert_int_equal(algo_for(&shm_like, HVD_AR_AUTO, 2, NULL, 8192), HVD_AR_RECURSIVE_DOUBLING);
  assert_int_equal(algo_for(&shm_like, HVD_AR_AUTO, 2, NULL, 32768), HVD_AR_RING);
  assert_int_equal(algo_for(&shm_like, HVD_AR_SHM, 2, NULL, 1 << 20), HVD_AR_SHM);
  assert_int_equal(algo_for(&shm_like, HVD_AR_RING, 4, NULL, 8), HVD_AR_RING);
  assert_int_equal(algo_for(&shm_like, HVD_AR_AUTO, 4, members, 8), HVD_AR_RECURSIVE_DOUBLING);
  assert_int_equal(algo_for(&tcp_like, HVD_AR_AUTO, 4, NULL, 8), HVD_AR_RECURSIVE_DOUBLING);
  assert_int_equal(algo_for(&tcp_like, HVD_AR_SHM, 4, NULL, 8), HVD_AR_RECURSIVE_DOUBLING);
  assert_int_equal(algo_for(&tcp_like, HVD_AR_SHM, 4, NULL, 1 << 20), HVD_AR_RABENSEIFNER);
  assert_int_equal(algo_for(&tcp_like, HVD_AR_SHM, 3, NULL, 1 << 20), HVD_AR_RING);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_env),
      cmocka_unit_test(test_init_refuses_unknown),
      cmocka_unit_test(test_crossovers),
      cmocka_unit_test(test_choose),
      cmocka_unit_test(test_choose_shm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
