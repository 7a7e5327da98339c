/*
 * test_host_pool.c -- the elastic driver's hosts (src/launcher/host_pool.c):
 * discovery output parsed (slots, bare names, IPv6, comments, bad lines
 * named), hosts kept in the order first seen, changes reported only when
 * the usable slots change, and the blacklist with and without a cooldown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "host_pool.h"

static int update(host_pool *p, const char *text, uint64_t now) {
  char why[256] = "";
  int rc = host_pool_update(p, text, strlen(text), now, why, sizeof why);
  if (rc < 0) print_message("why: %s\n", why);
  return rc;
}

static void test_parse_forms(void **state) {
  (void)state;
  host_pool p;
  host_pool_init(&p, 3, 0, 0);
  assert_int_equal(update(&p, "# the hosts\nh0:2\n  h1  \n\n[fd00::7]:4\nfd00::8:1\nh0:1 # more\n",
                          0), 1);
  assert_int_equal(p.n, 4);
  assert_string_equal(p.hosts[0].name, "h0");
  assert_int_equal(p.hosts[0].slots, 3); /* a host listed twice: slots add up */
  assert_string_equal(p.hosts[1].name, "h1");
  assert_int_equal(p.hosts[1].slots, 3); /* bare: --slots-per-host */
  assert_string_equal(p.hosts[2].name, "fd00::7");
  assert_int_equal(p.hosts[2].slots, 4);
  assert_string_equal(p.hosts[3].name, "fd00::8");
  assert_int_equal(p.hosts[3].slots, 1);
  assert_int_equal(host_pool_slots(&p, 0), 11);
  host_pool_free(&p);
}

static void test_bad_lines_are_named_and_change_nothing(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"h0:2\nh1:zero\n", "line 2: host 'h1' has slots 'zero'"},
      {"h0:0\n", "line 1: host 'h0' has slots '0'"},
      {"h0 slots=2\n", "line 1: expected 'host:slots'"},
      {"h0:2\n[fd00::1:3\n", "line 2: bad host"},
      {"-oProxyCommand=x:1\n", "line 1: bad host"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    host_pool p;
    char why[256] = "";
    host_pool_init(&p, 1, 0, 0);
    assert_int_equal(update(&p, "h9:1\n", 0), 1);
    assert_int_equal(host_pool_update(&p, cases[i].text, strlen(cases[i].text), 0, why,
                                      sizeof why), -1);
    print_message("%s -> %s\n", cases[i].text, why);
    assert_non_null(strstr(why, cases[i].want));
    assert_int_equal(p.n, 1); /* the listing before stands */
    assert_true(host_pool_usable(&p, 0, 0));
    host_pool_free(&p);
  }
  host_pool p;
  host_pool_init(&p, 1, 0, 0);
  const char nul[] = "h0:1\nh1\0x:2\n";
  char why[128];
  assert_int_equal(host_pool_update(&p, nul, sizeof nul - 1, 0, why, sizeof why), -1);
  assert_non_null(strstr(why, "line 2: a NUL byte"));
  host_pool_free(&p);
}

static void test_order_first_seen_and_changes(void **state) {
  (void)state;
  host_pool p;
  host_pool_init(&p, 1, 0, 0);
  assert_int_equal(update(&p, "b:1\na:1\n", 0), 1);
  assert_int_equal(update(&p, "a:1\nb:1\n", 0), 0); /* same hosts, other order: no change */
  assert_int_equal(update(&p, "c:2\na:1\n", 0), 1); /* b gone, c new */
  assert_string_equal(p.hosts[0].name, "b");
  assert_string_equal(p.hosts[2].name, "c"); /* new hosts come last */
  assert_false(host_pool_usable(&p, 0, 0));
  assert_int_equal(host_pool_slots(&p, 0), 3);
  assert_int_equal(update(&p, "c:3\na:1\n", 0), 1); /* more slots on c */
  assert_int_equal(update(&p, "b:1\nc:3\na:1\n", 0), 1); /* b back, keeps its place */
  assert_int_equal(host_pool_find(&p, "B"), 0);
  host_pool_free(&p);
}

static void test_blacklist_for_good(void **state) {
  (void)state;
  host_pool p;
  host_pool_init(&p, 1, 0, 0);
  assert_int_equal(update(&p, "h0:2\nh1:2\n", 0), 1);
  assert_int_equal(host_pool_failed(&p, "h1", 4), 0); /* one failure: still in use */
  assert_true(host_pool_usable(&p, 1, 4));
  assert_int_equal(host_pool_failed(&p, "h1", 5), 1); /* they keep failing */
  assert_false(host_pool_usable(&p, 1, 1000000));
  assert_int_equal(host_pool_slots(&p, 1000000), 2);
  assert_int_equal(host_pool_next_return(&p, 10), HVD__NEVER);
  assert_int_equal(update(&p, "h0:2\nh1:2\n", 99), 0); /* listed, still out */
  assert_int_equal(host_pool_failed(&p, "nobody", 5), 0); /* unknown: ignored */
  host_pool_free(&p);
}

static void test_blacklist_cooldown_grows_to_the_cap(void **state) {
  (void)state;
  host_pool p;
  host_pool_init(&p, 1, 10, 35);
  assert_int_equal(update(&p, "h0:1\nh1:1\n", 0), 1);
  static const long want_s[] = {10, 20, 35, 35}; /* doubling, capped at MAX */
  uint64_t t = 1000;
  for (int k = 0; k < 4; k++) {
    assert_int_equal(host_pool_failed(&p, "h1", t), 0);
    assert_int_equal(host_pool_failed(&p, "h1", t), 1);
    uint64_t until = p.hosts[1].cool_until;
    print_message("failure %d: out for %llu ms\n", k + 1, (unsigned long long)(until - t));
    assert_true(until >= t + (uint64_t)want_s[k] * 1000);
    assert_true(until <= t + (uint64_t)want_s[k] * 1100); /* at most a tenth more */
    assert_false(host_pool_usable(&p, 1, until - 1));
    assert_int_equal(host_pool_next_return(&p, t), until);
    assert_true(host_pool_usable(&p, 1, until));
    t = until;
  }
  /* A host no longer listed does not come back when its cooldown ends. */
  host_pool_failed(&p, "h1", t);
  host_pool_failed(&p, "h1", t);
  assert_int_equal(update(&p, "h0:1\n", t), 0); /* h1 was out anyway */
  assert_false(host_pool_usable(&p, 1, HVD__NEVER - 1));
  assert_int_equal(host_pool_next_return(&p, t), HVD__NEVER);
  host_pool_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_forms),
      cmocka_unit_test(test_bad_lines_are_named_and_change_nothing),
      cmocka_unit_test(test_order_first_seen_and_changes),
      cmocka_unit_test(test_blacklist_for_good),
      cmocka_unit_test(test_blacklist_cooldown_grows_to_the_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
