/*
 * test_elastic.c -- the elastic driver's decisions (src/launcher/elastic.c),
 * driven by hand: which workers start where, when a job is formed and with
 * which ranks, what members are told, and when the job ends -- for a lost
 * worker, a lost host, an added host, a worker that fails at start,
 * workers that never come back, fewer than --min-np, --reset-limit, and
 * success.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "elastic.h"
#include "host_pool.h"

/* What the driver asked for, as text, in order. */
static char log_[8192];

static void say(const char *fmt, ...) {
  size_t len = strlen(log_);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(log_ + len, sizeof log_ - len, fmt, ap);
  va_end(ap);
}

static host_pool pool;

static void act_start(void *ctx, int host, const uint32_t *ids, int n) {
  (void)ctx;
  say("start %s:", pool.hosts[host].name);
  for (int i = 0; i < n; i++) say(" %u", ids[i]);
  say("; ");
}
static void act_stop(void *ctx, uint32_t id) { (void)ctx, say("stop %u; ", id); }
static void act_announce(void *ctx, uint64_t stamp, int added, int removed) {
  (void)ctx;
  say("announce %llu%s%s; ", (unsigned long long)stamp, added ? " added" : "",
      removed ? " removed" : "");
}
static void act_form(void *ctx, int generation, const elastic_member *m, int n) {
  (void)ctx;
  say("form %d:", generation);
  for (int i = 0; i < n; i++)
    say(" %u=r%d(%d/%d,%d/%d)", m[i].id, m[i].rank, m[i].local_rank, m[i].local_size,
        m[i].cross_rank, m[i].cross_size);
  say("; ");
}
static void act_refuse(void *ctx, uint32_t id, const char *why) {
  (void)ctx;
  say("refuse %u (%s); ", id, why);
}
static int end_code = -1;
static void act_end(void *ctx, int code, const char *why) {
  (void)ctx;
  end_code = code;
  say("end %d%s%s; ", code, why ? ": " : "", why ? why : "");
}

static const elastic_actions actions = {NULL, act_start, act_stop, act_announce,
                                        act_form, act_refuse, act_end};

/* A driver over a pool listing `hosts` (discovery output). */
static void setup(elastic *e, const char *hosts, int np, int min_np, int max_np, int reset_limit) {
  char why[128];
  log_[0] = '\0';
  end_code = -1;
  host_pool_init(&pool, 1, 0, 0);
  int changed = host_pool_update(&pool, hosts, strlen(hosts), 1, why, sizeof why);
  elastic_config cfg = {np, min_np, max_np, 64, 10000, 3000, reset_limit};
  elastic_init(e, &cfg, &actions, &pool);
  elastic_hosts_changed(e, changed, 1);
}

static void teardown(elastic *e) {
  elastic_free(e);
  host_pool_free(&pool);
}

/* The log since the last call, and the check of it. */
static void expect(const char *want) {
  print_message("got:  %s\nwant: %s\n", log_, want);
  assert_string_equal(log_, want);
  log_[0] = '\0';
}

static void discover(elastic *e, const char *hosts, uint64_t now) {
  char why[128];
  elastic_hosts_changed(e, host_pool_update(&pool, hosts, strlen(hosts), now, why, sizeof why),
                        now);
}

static void register_all(elastic *e, uint32_t first, uint32_t last, uint64_t now) {
  for (uint32_t id = first; id <= last; id++) elastic_registered(e, id, now);
}

static void test_first_job_and_success(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:2\nb:2\nc:2\n", 4, 2, 6, -1);
  expect("start a: 0 1; start b: 2 3; ");
  register_all(&e, 0, 2, 10);
  expect(""); /* 3 is awaited */
  elastic_registered(&e, 3, 11);
  expect("form 1: 0=r0(0/2,0/2) 1=r1(1/2,0/2) 2=r2(0/2,1/2) 3=r3(1/2,1/2); ");
  for (uint32_t id = 0; id < 3; id++) elastic_exited(&e, id, 0, 20);
  expect("");
  elastic_exited(&e, 3, 0, 21);
  expect("end 0; ");
  teardown(&e);
}

static void test_lost_worker_survivors_reform_and_a_replacement_joins(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:2\nb:2\nc:2\n", 4, 2, 4, -1);
  register_all(&e, 0, 3, 10);
  expect("start a: 0 1; start b: 2 3; form 1: 0=r0(0/2,0/2) 1=r1(1/2,0/2) "
         "2=r2(0/2,1/2) 3=r3(1/2,1/2); ");
  /* 2 dies: one failure leaves b in use, and a new worker takes its slot. */
  elastic_exited(&e, 2, 1, 20);
  expect("start b: 4; ");
  /* The survivors come back at once (their collectives failed) and form a
   * job without waiting for the new one. */
  register_all(&e, 0, 1, 21);
  expect("");
  elastic_registered(&e, 3, 22);
  expect("form 2: 0=r0(0/2,0/2) 1=r1(1/2,0/1) 3=r2(0/1,1/2); ");
  /* The new one arrives: announced; at the next commit the members come
   * back and form a job with it. */
  elastic_registered(&e, 4, 30);
  expect("announce 1 added; ");
  elastic_registered(&e, 1, 40);
  elastic_registered(&e, 0, 40);
  elastic_registered(&e, 3, 40);
  expect("form 3: 0=r0(0/2,0/2) 1=r1(1/2,0/2) 3=r2(0/2,1/2) 4=r3(1/2,1/2); ");
  /* b's workers keep failing: b is blacklisted, its other worker leaves at
   * the next commit, and c's slots are filled. */
  elastic_exited(&e, 4, 1, 50);
  expect("announce 2 removed; start c: 5 6; ");
  register_all(&e, 0, 1, 51);
  expect("stop 3; form 4: 0=r0(0/2,0/1) 1=r1(1/2,0/1); ");
  elastic_exited(&e, 3, 1, 52); /* the one stopped: expected */
  expect("");
  teardown(&e);
}

static void test_host_removed_then_added_back(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:1\nb:1\nc:1\n", 3, 2, 3, -1);
  register_all(&e, 0, 2, 10);
  expect("start a: 0; start b: 1; start c: 2; form 1: 0=r0(0/1,0/3) 1=r1(0/1,1/3) "
         "2=r2(0/1,2/3); ");
  discover(&e, "a:1\nc:1\n", 20);
  expect("announce 1 removed; "); /* b's worker stays until the commit */
  elastic_registered(&e, 0, 25);
  expect("");
  elastic_registered(&e, 2, 25);  /* b's is not awaited: stopped as the job forms */
  expect("stop 1; form 2: 0=r0(0/1,0/2) 2=r1(0/1,1/2); ");
  elastic_registered(&e, 1, 25);
  expect("refuse 1 (its host was removed from the job); ");
  elastic_exited(&e, 1, 1, 26);
  expect("");
  discover(&e, "a:1\nb:1\nc:1\n", 30);
  expect("start b: 3; ");
  elastic_registered(&e, 3, 31);
  expect("announce 2 added; ");
  register_all(&e, 0, 0, 32);
  elastic_registered(&e, 2, 32);
  expect("form 3: 0=r0(0/1,0/3) 3=r1(0/1,1/3) 2=r2(0/1,2/3); "); /* b keeps its place */
  teardown(&e);
}

static void test_worker_failing_at_start_is_blacklisted(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:1\nb:1\nc:1\n", 2, 2, 2, -1);
  expect("start a: 0; start b: 1; ");
  elastic_registered(&e, 0, 5);
  elastic_exited(&e, 1, 1, 6); /* b's worker cannot start: b again */
  expect("start b: 2; ");
  elastic_exited(&e, 2, 1, 7); /* and again: b is blacklisted */
  expect("start c: 3; ");
  elastic_registered(&e, 3, 8);
  expect("form 1: 0=r0(0/1,0/2) 3=r1(0/1,1/2); ");
  assert_false(host_pool_usable(&pool, 1, 100000));
  teardown(&e);
}

static void test_members_that_do_not_come_back_are_stopped(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:3\n", 3, 2, 3, -1);
  register_all(&e, 0, 2, 10);
  log_[0] = '\0';
  elastic_registered(&e, 0, 100);
  elastic_registered(&e, 1, 100);
  assert_int_equal(elastic_deadline(&e), 100 + 3000);
  elastic_tick(&e, 3099);
  expect("");
  elastic_tick(&e, 3100);
  expect("stop 2; form 2: 0=r0(0/2,0/1) 1=r1(1/2,0/1); ");
  teardown(&e);
}

static void test_below_min_np_until_the_timeout(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:1\nb:1\n", 2, 2, 2, -1);
  register_all(&e, 0, 1, 10);
  log_[0] = '\0';
  elastic_exited(&e, 1, 1, 20);
  elastic_exited(&e, 2, 1, 20); /* b blacklisted for good: one slot left */
  expect("start b: 2; ");
  elastic_registered(&e, 0, 21);
  expect(""); /* one worker: below --min-np, no job */
  elastic_tick(&e, 21);
  assert_int_equal(elastic_deadline(&e), 21 + 10000);
  discover(&e, "a:1\nb:1\n", 5000);
  elastic_tick(&e, 10020);
  expect("");
  elastic_tick(&e, 10021);
  expect("stop 0; end 1: fewer than --min-np 2 workers for longer than --elastic-timeout 10 s; ");
  elastic_registered(&e, 0, 10022);
  expect("refuse 0 (the job is over); ");
  teardown(&e);
}

static void test_waiting_for_hosts_at_start(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:1\n", 2, 2, 4, -1);
  expect(""); /* one slot, --min-np 2: nothing starts */
  elastic_tick(&e, 5);
  discover(&e, "a:1\nb:2\n", 100);
  expect("start a: 0; start b: 1; ");
  teardown(&e);
}

static void test_reset_limit(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:1\nb:1\nc:1\n", 3, 1, 3, 1);
  register_all(&e, 0, 2, 10);
  log_[0] = '\0';
  elastic_exited(&e, 2, 1, 20);
  register_all(&e, 0, 1, 21);
  expect("start c: 3; form 2: 0=r0(0/1,0/2) 1=r1(0/1,1/2); "); /* one reset: allowed */
  elastic_exited(&e, 1, 1, 30);
  elastic_registered(&e, 0, 31);
  expect("start b: 4; stop 0; stop 3; stop 4; end 1: the job was re-formed 2 times; "
         "--reset-limit is 1; ");
  assert_int_equal(end_code, 1);
  teardown(&e);
}

static void test_a_connection_lost_before_the_job_forms(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:3\n", 3, 2, 3, -1);
  register_all(&e, 0, 2, 10);
  log_[0] = '\0';
  elastic_registered(&e, 0, 20);
  elastic_registered(&e, 1, 20);
  elastic_left(&e, 1, 21); /* 1's connection went: not placed until it is back */
  elastic_registered(&e, 2, 22);
  expect("");
  elastic_registered(&e, 1, 23);
  expect("form 2: 0=r0(0/3,0/1) 1=r1(1/3,0/1) 2=r2(2/3,0/1); ");
  teardown(&e);
}

static void test_at_most_max_workers_over_the_job(void **state) {
  (void)state;
  elastic e;
  char why[64];
  log_[0] = '\0';
  host_pool_init(&pool, 1, 1, 1); /* hosts come back after a second */
  host_pool_update(&pool, "a:1\nb:1\n", 8, 1, why, sizeof why);
  elastic_config cfg = {2, 1, 2, 4, 10000, 3000, -1};
  elastic_init(&e, &cfg, &actions, &pool);
  elastic_hosts_changed(&e, 1, 1);
  expect("start a: 0; start b: 1; ");
  register_all(&e, 0, 1, 10);
  log_[0] = '\0';
  elastic_exited(&e, 1, 1, 20);
  elastic_exited(&e, 2, 1, 20); /* b blacklisted for a second */
  expect("start b: 2; ");
  elastic_tick(&e, 21);
  assert_true(elastic_deadline(&e) >= 1020 && elastic_deadline(&e) <= 1120); /* b's return */
  elastic_tick(&e, 3000);
  expect("start b: 3; ");
  elastic_exited(&e, 3, 1, 3100); /* the fourth and last worker this job may start */
  elastic_tick(&e, 6000);
  expect("");
  teardown(&e);
}

static void test_every_member_lost(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:1\nb:1\nc:1\n", 2, 1, 2, -1);
  register_all(&e, 0, 1, 10);
  log_[0] = '\0';
  elastic_exited(&e, 0, 1, 20);
  elastic_exited(&e, 1, 1, 20);
  expect("start a: 2; stop 2; end 1: every worker that held the job's state was lost: there "
         "is nothing to go on from; ");
  teardown(&e);
}

/* A program that never uses hvd: its workers are done when they exit 0. */
static void test_workers_done_before_joining(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:2\n", 2, 1, 2, -1);
  expect("start a: 0 1; ");
  elastic_exited(&e, 0, 0, 5);
  expect(""); /* done, not restarted */
  elastic_registered(&e, 1, 6); /* the other one does use hvd */
  expect("form 1: 1=r0(0/1,0/1); ");
  elastic_exited(&e, 1, 0, 7);
  expect("end 0; ");
  teardown(&e);
  setup(&e, "a:1\n", 1, 1, 1, -1);
  expect("start a: 0; ");
  elastic_exited(&e, 0, 0, 5);
  expect("end 0; ");
  assert_int_equal(end_code, 0);
  teardown(&e);
}

/* An import error, say: before any job, once the hosts left cannot meet
 * --min-np, the job ends with the worker's code instead of waiting. */
static void test_failing_before_the_first_job_ends_it(void **state) {
  (void)state;
  elastic e;
  setup(&e, "a:2\n", 2, 2, 2, -1);
  expect("start a: 0 1; ");
  elastic_exited(&e, 0, 3, 5);
  expect("start a: 2; "); /* one failure: the host may have hiccuped */
  elastic_exited(&e, 2, 3, 6);
  expect("stop 1; end 3: worker 2 failed before it joined a job (said above), and the hosts "
         "left have 0 slots, fewer than --min-np 2; ");
  assert_int_equal(end_code, 3);
  elastic_exited(&e, 1, 143, 6); /* stopped: nothing more to say */
  expect("");
  teardown(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_job_and_success),
      cmocka_unit_test(test_lost_worker_survivors_reform_and_a_replacement_joins),
      cmocka_unit_test(test_host_removed_then_added_back),
      cmocka_unit_test(test_worker_failing_at_start_is_blacklisted),
      cmocka_unit_test(test_members_that_do_not_come_back_are_stopped),
      cmocka_unit_test(test_below_min_np_until_the_timeout),
      cmocka_unit_test(test_waiting_for_hosts_at_start),
      cmocka_unit_test(test_reset_limit),
      cmocka_unit_test(test_a_connection_lost_before_the_job_forms),
      cmocka_unit_test(test_at_most_max_workers_over_the_job),
      cmocka_unit_test(test_every_member_lost),
      cmocka_unit_test(test_workers_done_before_joining),
      cmocka_unit_test(test_failing_before_the_first_job_ends_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
