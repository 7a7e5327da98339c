/*
 * test_env.c -- the environment table: strict parsing of every kind, the
 * job description's validation, and docs/environment.md documenting every
 * variable with its default (the table is the single source of the knobs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bootstrap/bootstrap.h"
#include "env.h"

static void clear_job_env(void) {
  for (int id = 0; id < HVD_P__COUNT; id++) unsetenv(hvd__params[id].name);
}

static void test_int_defaults_and_values(void **state) {
  (void)state;
  long v;
  clear_job_env();
  assert_int_equal(hvd__param_int(HVD_P_GLOO_TIMEOUT_SECONDS, &v), 0);
  assert_int_equal(v, 30);
  setenv("HOROVOD_GLOO_TIMEOUT_SECONDS", "7", 1);
  assert_int_equal(hvd__param_int(HVD_P_GLOO_TIMEOUT_SECONDS, &v), 0);
  assert_int_equal(v, 7);
  static const char *bad[] = {"abc", "7s", "0", "-3", "99999999999999999999", "1.5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("HOROVOD_GLOO_TIMEOUT_SECONDS", bad[i], 1);
    assert_int_equal(hvd__param_int(HVD_P_GLOO_TIMEOUT_SECONDS, &v), HVD_E_ENV);
    assert_non_null(strstr(hvd_last_error(), "HOROVOD_GLOO_TIMEOUT_SECONDS"));
    assert_non_null(strstr(hvd_last_error(), bad[i]));
  }
  unsetenv("HOROVOD_GLOO_TIMEOUT_SECONDS");
}

static void test_bool_and_level(void **state) {
  (void)state;
  int b, l;
  setenv("HOROVOD_LOG_HIDE_TIME", "Yes", 1);
  assert_int_equal(hvd__param_bool(HVD_P_LOG_HIDE_TIME, &b), 0);
  assert_int_equal(b, 1);
  setenv("HOROVOD_LOG_HIDE_TIME", "off", 1);
  assert_int_equal(hvd__param_bool(HVD_P_LOG_HIDE_TIME, &b), 0);
  assert_int_equal(b, 0);
  setenv("HOROVOD_LOG_HIDE_TIME", "maybe", 1);
  assert_int_equal(hvd__param_bool(HVD_P_LOG_HIDE_TIME, &b), HVD_E_ENV);
  unsetenv("HOROVOD_LOG_HIDE_TIME");
  setenv("HOROVOD_LOG_LEVEL", "debug", 1);
  assert_int_equal(hvd__param_level(HVD_P_LOG_LEVEL, &l), 0);
  assert_int_equal(l, HVD_LOG_DEBUG);
  setenv("HOROVOD_LOG_LEVEL", "LOUD", 1);
  assert_int_equal(hvd__param_level(HVD_P_LOG_LEVEL, &l), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "LOUD"));
  unsetenv("HOROVOD_LOG_LEVEL");
}

static void test_job_alone_is_size_one(void **state) {
  (void)state;
  hvd_job job;
  clear_job_env();
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_int_equal(job.rank, 0);
  assert_int_equal(job.size, 1);
  assert_int_equal(job.local_size, 1);
  assert_int_equal(job.cross_size, 1);
}

/* Each case: variables to set, and the variable the error must name. */
static void expect_job_error(const char *const *kv, const char *needle) {
  hvd_job job;
  clear_job_env();
  for (; kv[0]; kv += 2) setenv(kv[0], kv[1], 1);
  assert_int_equal(hvd__job_from_env(&job), HVD_E_ENV);
  if (!strstr(hvd_last_error(), needle))
    fail_msg("message '%s' does not name %s", hvd_last_error(), needle);
}

static void test_job_validation(void **state) {
  (void)state;
  expect_job_error((const char *[]){"HOROVOD_SIZE", "4", "HOROVOD_RANK", "4", NULL},
                   "HOROVOD_RANK");
  expect_job_error((const char *[]){"HOROVOD_SIZE", "0", NULL}, "HOROVOD_SIZE");
  expect_job_error((const char *[]){"HOROVOD_SIZE", "two", NULL}, "HOROVOD_SIZE");
  expect_job_error((const char *[]){"HOROVOD_RANK", "-1", NULL}, "HOROVOD_RANK");
  expect_job_error((const char *[]){"HOROVOD_SIZE", "4", "HOROVOD_LOCAL_SIZE", "2",
                                    "HOROVOD_LOCAL_RANK", "2", NULL},
                   "HOROVOD_LOCAL_RANK");
  expect_job_error((const char *[]){"HOROVOD_SIZE", "4", "HOROVOD_LOCAL_SIZE", "5", NULL},
                   "HOROVOD_LOCAL_SIZE");
  expect_job_error((const char *[]){"HOROVOD_SIZE", "4", "HOROVOD_CROSS_SIZE", "2",
                                    "HOROVOD_CROSS_RANK", "3", NULL},
                   "HOROVOD_CROSS_RANK");
  clear_job_env();
}

/* hvd_init itself refuses a bad environment with the variable's name. */
static void test_init_reports_bad_env(void **state) {
  (void)state;
  clear_job_env();
  setenv("HOROVOD_SIZE", "2", 1);
  assert_int_equal(hvd_init(), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "HOROVOD_GLOO_RENDEZVOUS_ADDR"));
  setenv("HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1", 1);
  setenv("HOROVOD_GLOO_RENDEZVOUS_PORT", "70000", 1);
  setenv("_HOROVOD_SECRET_KEY", "c2VjcmV0", 1);
  assert_int_equal(hvd_init(), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "HOROVOD_GLOO_RENDEZVOUS_PORT"));
  setenv("HOROVOD_GLOO_RENDEZVOUS_PORT", "1234", 1);
  assert_int_equal(hvd_init(), HVD_E_ENV); /* the key is 6 bytes, not 32 */
  assert_non_null(strstr(hvd_last_error(), "_HOROVOD_SECRET_KEY"));
  clear_job_env();
  setenv("HOROVOD_START_TIMEOUT", "soon", 1);
  assert_int_equal(hvd_init(), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "HOROVOD_START_TIMEOUT"));
  clear_job_env();
  assert_int_equal(hvd_is_initialized(), 0);
}

/* Every variable of the table appears in a row of docs/environment.md's table, with
 * its default for the tunables ("unset" for an empty one). */
static void test_docs_document_every_variable(void **state) {
  (void)state;
  FILE *f = fopen(HVD_SOURCE_DIR "/docs/environment.md", "r");
  assert_non_null(f);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  for (int id = 0; id < HVD_P__COUNT; id++) {
    const hvd_param *p = &hvd__params[id];
    char row[256];
    if (p->kind == HVD_PK_JOB)
      snprintf(row, sizeof row, "| `%s` |", p->name);
    else if (p->def[0] == '\0')
      snprintf(row, sizeof row, "| `%s` | unset |", p->name);
    else
      snprintf(row, sizeof row, "| `%s` | `%s` |", p->name, p->def);
    if (!strstr(text, row)) fail_msg("docs/environment.md has no table row starting '%s'", row);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int_defaults_and_values),
      cmocka_unit_test(test_bool_and_level),
      cmocka_unit_test(test_job_alone_is_size_one),
      cmocka_unit_test(test_job_validation),
      cmocka_unit_test(test_init_reports_bad_env),
      cmocka_unit_test(test_docs_document_every_variable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
