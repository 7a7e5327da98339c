/*
 * test_host_plan.c -- grouping ranks by host from the rendezvous table
 * (bootstrap/host_plan.h): the plan every rank computes alike, shared
 * memory only where the launcher's placement holds, and a reason naming
 * the ranks when it does not.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bootstrap/host_plan.h"

#define MAX 12

/* hosts[r] names rank r's host ("h0"...), placed as hvdrun does: local
 * ranks count up within each host in rank order. */
static void table_of(hvd_rdzv_entry *t, int n, const char *const *hosts) {
  memset(t, 0, (size_t)n * sizeof *t);
  for (int r = 0; r < n; r++) {
    int local = 0, count = 0;
    for (int q = 0; q < n; q++)
      if (strcmp(hosts[q], hosts[r]) == 0) local += q < r, count++;
    t[r].rank = (uint32_t)r;
    t[r].size = (uint32_t)n;
    snprintf(t[r].hostname, sizeof t[r].hostname, "%s", hosts[r]);
    snprintf(t[r].host_id, sizeof t[r].host_id, "%s/boot", hosts[r]);
    t[r].local_rank = (uint32_t)local;
    t[r].local_size = (uint32_t)count;
    t[r].shm = 1;
  }
}

static void plan(const hvd_rdzv_entry *t, int n, int rank, hvd_host_plan *p) {
  assert_int_equal(hvd__host_plan(t, n, rank, p), 0);
}

static void assert_members(const hvd_host_plan *p, int n, const int *want) {
  assert_int_equal(p->n, n);
  for (int i = 0; i < n; i++) assert_int_equal(p->members[i], want[i]);
}

static void test_one_host_uses_shared_memory_in_rank_order(void **state) {
  (void)state;
  const char *hosts[] = {"a", "a", "a"};
  hvd_rdzv_entry t[3];
  hvd_host_plan p;
  table_of(t, 3, hosts);
  /* A launcher may number local ranks differently from ranks: the
   * segment still follows the job's numbers. */
  t[0].local_rank = 2, t[2].local_rank = 0;
  for (int r = 0; r < 3; r++) {
    plan(t, 3, r, &p);
    assert_int_equal(p.mode, HVD_PLAN_SHM);
    assert_true(p.shm);
    assert_members(&p, 3, (int[]){0, 1, 2});
    assert_int_equal(p.me, r);
    assert_string_equal(p.why, "");
    hvd__host_plan_free(&p);
  }
}

static void test_hosts_interleaved_in_local_rank_order(void **state) {
  (void)state;
  const char *hosts[] = {"b", "a", "b", "a", "c"};
  hvd_rdzv_entry t[5];
  hvd_host_plan p;
  table_of(t, 5, hosts);
  t[0].local_rank = 1, t[2].local_rank = 0; /* host b: rank 2 is its local rank 0 */
  plan(t, 5, 0, &p);
  assert_int_equal(p.mode, HVD_PLAN_HYBRID);
  assert_true(p.shm);
  assert_members(&p, 2, (int[]){2, 0});
  assert_int_equal(p.me, 1);
  hvd__host_plan_free(&p);
  plan(t, 5, 4, &p); /* alone on c: TCP, but the job is hybrid */
  assert_int_equal(p.mode, HVD_PLAN_HYBRID);
  assert_false(p.shm);
  assert_members(&p, 1, (int[]){4});
  hvd__host_plan_free(&p);
}

static void test_one_rank_per_host_is_plain_tcp(void **state) {
  (void)state;
  const char *hosts[] = {"a", "b", "c", "d"};
  hvd_rdzv_entry t[4];
  hvd_host_plan p;
  table_of(t, 4, hosts);
  plan(t, 4, 2, &p);
  assert_int_equal(p.mode, HVD_PLAN_TCP);
  assert_false(p.shm);
  hvd__host_plan_free(&p);
}

static void test_shm_disable_on_one_rank_turns_its_host_to_tcp(void **state) {
  (void)state;
  const char *hosts[] = {"a", "a", "b", "b"};
  hvd_rdzv_entry t[4];
  hvd_host_plan p;
  table_of(t, 4, hosts);
  t[3].shm = 0;
  plan(t, 4, 2, &p);
  assert_int_equal(p.mode, HVD_PLAN_HYBRID); /* host a still has it */
  assert_false(p.shm);
  assert_string_equal(p.why, ""); /* asked for: no warning */
  hvd__host_plan_free(&p);
  plan(t, 4, 0, &p);
  assert_true(p.shm);
  hvd__host_plan_free(&p);
  t[0].shm = 0;
  plan(t, 4, 0, &p);
  assert_int_equal(p.mode, HVD_PLAN_TCP);
  hvd__host_plan_free(&p);
}

/* A misplaced host gets TCP and a reason; the others are not affected. */
static void expect_misplaced(hvd_rdzv_entry *t, int n, int rank, const char *words) {
  hvd_host_plan p;
  plan(t, n, rank, &p);
  assert_false(p.shm);
  if (!strstr(p.why, words)) fail_msg("reason \"%s\" lacks \"%s\"", p.why, words);
  hvd__host_plan_free(&p);
}

static void test_misplacements_are_refused_with_a_reason(void **state) {
  (void)state;
  const char *hosts[] = {"a", "a", "a", "b", "b"};
  hvd_rdzv_entry t[5];
  table_of(t, 5, hosts);
  snprintf(t[2].host_id, sizeof t[2].host_id, "elsewhere/boot");
  expect_misplaced(t, 5, 0, "ranks 0 and 2 were placed on host 'a' but run on different "
                             "machines (a/boot and elsewhere/boot)");
  table_of(t, 5, hosts);
  t[1].local_size = 2;
  expect_misplaced(t, 5, 1, "rank 1 says HOROVOD_LOCAL_SIZE=2, but 3 ranks name host 'a'");
  table_of(t, 5, hosts);
  t[2].local_rank = 1;
  expect_misplaced(t, 5, 2, "ranks 1 and 2 of host 'a' both say HOROVOD_LOCAL_RANK=1");
  table_of(t, 5, hosts);
  t[0].local_rank = 2; /* 2, 1, 2: local rank 0 is missing */
  expect_misplaced(t, 5, 0, "no rank of host 'a' says HOROVOD_LOCAL_RANK=0");
  hvd_host_plan p;
  plan(t, 5, 3, &p); /* host b is fine */
  assert_true(p.shm);
  assert_int_equal(p.mode, HVD_PLAN_HYBRID);
  hvd__host_plan_free(&p);
}

static void test_every_rank_agrees_on_the_mode(void **state) {
  (void)state;
  const char *hosts[MAX];
  hvd_rdzv_entry t[MAX];
  for (int n = 1; n <= MAX; n++) {
    for (int layout = 0; layout < 4; layout++) {
      static const char *names[] = {"x", "y", "z"};
      for (int r = 0; r < n; r++) hosts[r] = names[(r * (layout + 1) / 3) % (layout + 1) % 3];
      table_of(t, n, hosts);
      hvd_host_plan p0;
      plan(t, n, 0, &p0);
      for (int r = 1; r < n; r++) {
        hvd_host_plan p;
        plan(t, n, r, &p);
        assert_int_equal(p.mode, p0.mode);
        assert_int_equal(p.members[p.me], r);
        hvd__host_plan_free(&p);
      }
      hvd__host_plan_free(&p0);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_host_uses_shared_memory_in_rank_order),
      cmocka_unit_test(test_hosts_interleaved_in_local_rank_order),
      cmocka_unit_test(test_one_rank_per_host_is_plain_tcp),
      cmocka_unit_test(test_shm_disable_on_one_rank_turns_its_host_to_tcp),
      cmocka_unit_test(test_misplacements_are_refused_with_a_reason),
      cmocka_unit_test(test_every_rank_agrees_on_the_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
