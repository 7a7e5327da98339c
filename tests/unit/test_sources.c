/*
 * test_sources.c -- bootstrap's sources of "who am I" (source.h) and
 * SLURM's compressed lists (slurm_lists.h).
 *
 * The lists get the odd forms SLURM writes (zero-padded ranges, several
 * bracket groups, counts with repeats) and every malformed one; each
 * source gets a consistent environment (what a task really sees, taken
 * from srun and mpirun here) and then one variable at a time made
 * inconsistent, as variables inherited from another job step would be:
 * the error must name that variable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bootstrap/source.h"
#include "rdzv/slurm_lists.h"
#include "mpi_controller.h"

/* ---- host lists ---- */

static void expect_hosts(const char *text, const char *const *want) {
  hvd_hostlist l;
  if (hvd__slurm_hostlist("SLURM_JOB_NODELIST", text, &l) != 0)
    fail_msg("'%s': %s", text, hvd_last_error());
  int n = 0;
  while (want[n]) n++;
  if (l.n != n) fail_msg("'%s' gave %d names, expected %d", text, l.n, n);
  for (int i = 0; i < n; i++) assert_string_equal(l.names[i], want[i]);
  hvd__slurm_hostlist_free(&l);
}

static void test_hostlists(void **state) {
  (void)state;
  expect_hosts("h0", (const char *[]){"h0", NULL});
  expect_hosts("h[0-3,7]", (const char *[]){"h0", "h1", "h2", "h3", "h7", NULL});
  expect_hosts("a[01-03]b,c", (const char *[]){"a01b", "a02b", "a03b", "c", NULL});
  expect_hosts("node[8-10]", (const char *[]){"node8", "node9", "node10", NULL});
  expect_hosts("x[009-011]", (const char *[]){"x009", "x010", "x011", NULL});
  expect_hosts("rack[1-2]n[0-1]",
               (const char *[]){"rack1n0", "rack1n1", "rack2n0", "rack2n1", NULL});
  expect_hosts("h[0-1],login-2,g[5]", (const char *[]){"h0", "h1", "login-2", "g5", NULL});
  expect_hosts("n[1,3-4]-ib", (const char *[]){"n1-ib", "n3-ib", "n4-ib", NULL});
}

static void test_hostlist_errors(void **state) {
  (void)state;
  static const char *const bad[] = {"",       "h[",     "h]",       "h[3-1]",   "h[]",
                                    "h[a-b]", "h[1-2",  "a,,b",     "a,",       "h[1,]",
                                    "h[[1]]", "h[1-2]]", "h[0-70000]", "h[1--2]", ",a",
                                    "h[1-]",  "h[-1]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hvd_hostlist l;
    if (hvd__slurm_hostlist("SLURM_STEP_NODELIST", bad[i], &l) != HVD_E_ENV)
      fail_msg("'%s' was accepted (%d names)", bad[i], l.n);
    assert_non_null(strstr(hvd_last_error(), "SLURM_STEP_NODELIST"));
  }
}

static void expect_counts(const char *text, const int *want, int n) {
  int *got, m;
  if (hvd__slurm_counts("SLURM_TASKS_PER_NODE", text, &got, &m) != 0)
    fail_msg("'%s': %s", text, hvd_last_error());
  assert_int_equal(m, n);
  for (int i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
  free(got);
}

static void test_counts(void **state) {
  (void)state;
  expect_counts("2(x3),1", (int[]){2, 2, 2, 1}, 4);
  expect_counts("4", (int[]){4}, 1);
  expect_counts("1(x1)", (int[]){1}, 1);
  expect_counts("3,1", (int[]){3, 1}, 2);
  expect_counts("2(x2),5(x1),7", (int[]){2, 2, 5, 7}, 4);
  static const char *const bad[] = {"", "2(x", "2(x0)", "0", "-1", "2,", "a", "2(x3)1",
                                    "2(y3)", ",2", "2(x3", "99999999999", "2 ,1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int *got, m;
    if (hvd__slurm_counts("SLURM_JOB_CPUS_PER_NODE", bad[i], &got, &m) != HVD_E_ENV)
      fail_msg("'%s' was accepted", bad[i]);
    assert_non_null(strstr(hvd_last_error(), "SLURM_JOB_CPUS_PER_NODE"));
  }
}

/* ---- the sources ---- */

static const char *const launcher_vars[] = {
    "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT", "_HOROVOD_SECRET_KEY",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID",
    "SLURM_STEPID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID",
    "SLURM_NODEID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_GTIDS", "SLURMD_NODENAME",
};

static const char secret[] = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=";

static void clear_env(void) {
  for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
    unsetenv(launcher_vars[i]);
}

static void set_env(const char *const *kv) {
  for (; kv[0]; kv += 2) setenv(kv[0], kv[1], 1);
}

/* Task 3 of `srun -N 2 --ntasks-per-node=2` in job 42, step 1 (what srun
 * gives here, less what hvd does not read). */
static const char *const srun_task3[] = {
    "SLURM_JOB_ID", "42", "SLURM_JOBID", "42", "SLURM_STEP_ID", "1", "SLURM_STEPID", "1",
    "SLURM_PROCID", "3", "SLURM_NTASKS", "4", "SLURM_NPROCS", "4", "SLURM_LOCALID", "1",
    "SLURM_NODEID", "1", "SLURM_STEP_NODELIST", "h[0-1]", "SLURM_STEP_TASKS_PER_NODE", "2(x2)",
    "SLURM_TASKS_PER_NODE", "2(x2)", "SLURM_STEP_NUM_TASKS", "4", "SLURM_STEP_NUM_NODES", "2",
    "SLURM_GTIDS", "2,3", "SLURMD_NODENAME", "h1", "_HOROVOD_SECRET_KEY", secret, NULL};

static void test_slurm_task(void **state) {
  (void)state;
  hvd_job job;
  clear_env();
  set_env(srun_task3);
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_string_equal(job.source, "SLURM");
  assert_int_equal(job.rank, 3);
  assert_int_equal(job.size, 4);
  assert_int_equal(job.local_rank, 1);
  assert_int_equal(job.local_size, 2);
  assert_int_equal(job.cross_rank, -1); /* from the table, once met */
  assert_string_equal(job.hostname, "h1");
  assert_int_equal(job.meet.kind, HVD_MEET_RANK0);
  assert_string_equal(job.meet.addr, "h0");
  assert_int_equal(job.meet.port, 10000 + (42 * 32 + 1) % 20000);
  /* The older names alone do too; an uneven step puts task 3 alone on h1. */
  set_env((const char *[]){"SLURM_STEP_TASKS_PER_NODE", "3,1", "SLURM_TASKS_PER_NODE", "3,1",
                           "SLURM_LOCALID", "0", "SLURM_GTIDS", "3", NULL});
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_STEP_ID");
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_int_equal(job.local_rank, 0);
  assert_int_equal(job.local_size, 1);
  /* A port of one's own. */
  setenv("HOROVOD_GLOO_RENDEZVOUS_PORT", "23456", 1);
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_int_equal(job.meet.port, 23456);
  clear_env();
}

/* Two steps of one job sharing a secret derive different keys. */
static void test_slurm_steps_do_not_share_keys(void **state) {
  (void)state;
  hvd_job a, b;
  clear_env();
  set_env(srun_task3);
  assert_int_equal(hvd__job_from_env(&a), 0);
  set_env((const char *[]){"SLURM_STEP_ID", "2", "SLURM_STEPID", "2", NULL});
  assert_int_equal(hvd__job_from_env(&b), 0);
  assert_memory_not_equal(a.meet.key.bytes, b.meet.key.bytes, HVD_SECRET_LEN);
  assert_int_not_equal(a.meet.port, b.meet.port);
  clear_env();
}

/* srun_task3 with kv changed: refused, naming `needle`. */
static void expect_refused(const char *const *kv, const char *needle) {
  hvd_job job;
  clear_env();
  set_env(srun_task3);
  for (; kv[0]; kv += 2) {
    if (kv[1]) setenv(kv[0], kv[1], 1);
    else unsetenv(kv[0]);
  }
  int rc = hvd__job_from_env(&job);
  if (rc != HVD_E_ENV) fail_msg("accepted (rc %d) where %s is wrong", rc, needle);
  if (!strstr(hvd_last_error(), needle))
    fail_msg("message '%s' does not name %s", hvd_last_error(), needle);
}

static void test_slurm_mismatches(void **state) {
  (void)state;
  expect_refused((const char *[]){"SLURM_STEPID", "7", NULL}, "SLURM_STEPID");
  expect_refused((const char *[]){"SLURM_JOBID", "41", NULL}, "SLURM_JOBID");
  expect_refused((const char *[]){"SLURM_NPROCS", "8", NULL}, "SLURM_NPROCS");
  expect_refused((const char *[]){"SLURM_STEP_NUM_TASKS", "2", NULL}, "SLURM_STEP_NUM_TASKS");
  expect_refused((const char *[]){"SLURM_STEP_NUM_NODES", "3", NULL}, "SLURM_STEP_NUM_NODES");
  expect_refused((const char *[]){"SLURM_STEP_TASKS_PER_NODE", "3(x2)", NULL},
                 "SLURM_STEP_TASKS_PER_NODE");
  expect_refused((const char *[]){"SLURM_STEP_TASKS_PER_NODE", "4", NULL},
                 "SLURM_STEP_TASKS_PER_NODE");
  expect_refused((const char *[]){"SLURM_PROCID", "4", NULL}, "SLURM_PROCID");
  expect_refused((const char *[]){"SLURM_LOCALID", "2", NULL}, "SLURM_LOCALID");
  expect_refused((const char *[]){"SLURM_NODEID", "2", NULL}, "SLURM_NODEID");
  expect_refused((const char *[]){"SLURM_GTIDS", "0,1", NULL}, "SLURM_GTIDS");
  expect_refused((const char *[]){"SLURMD_NODENAME", "h0", NULL}, "SLURMD_NODENAME");
  expect_refused((const char *[]){"PMIX_NAMESPACE", "slurm.pmix.42.0", NULL}, "PMIX_NAMESPACE");
  expect_refused((const char *[]){"SLURM_STEP_NODELIST", "h[0-1", NULL}, "SLURM_STEP_NODELIST");
  expect_refused((const char *[]){"SLURM_STEP_NODELIST", NULL, NULL}, "SLURM_STEP_NODELIST");
  expect_refused((const char *[]){"SLURM_NTASKS", "four", NULL}, "SLURM_NTASKS");
  expect_refused((const char *[]){"HOROVOD_GLOO_RENDEZVOUS_PORT", "0", NULL},
                 "HOROVOD_GLOO_RENDEZVOUS_PORT");
  expect_refused((const char *[]){"_HOROVOD_SECRET_KEY", "c2VjcmV0", NULL}, "_HOROVOD_SECRET_KEY");
  /* Task 0 elsewhere than on the first node cannot host the rendezvous. */
  expect_refused((const char *[]){"SLURM_PROCID", "0", "SLURM_GTIDS", "3,0", NULL},
                 "SLURM_NODEID");
  clear_env();
}

/* Without a secret: how to make one. */
static void test_slurm_without_secret(void **state) {
  (void)state;
  expect_refused((const char *[]){"_HOROVOD_SECRET_KEY", NULL, NULL}, "_HOROVOD_SECRET_KEY");
  assert_non_null(strstr(hvd_last_error(), "hvdrun --make-secret"));
  assert_non_null(strstr(hvd_last_error(), "srun"));
  /* A step of one task needs none. */
  hvd_job job;
  clear_env();
  set_env((const char *[]){"SLURM_JOB_ID", "5", "SLURM_STEP_ID", "0", "SLURM_PROCID", "0",
                           "SLURM_NTASKS", "1", "SLURM_LOCALID", "0", "SLURM_NODEID", "0",
                           "SLURM_STEP_NODELIST", "h3", "SLURM_STEP_TASKS_PER_NODE", "1",
                           NULL});
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_int_equal(job.meet.kind, HVD_MEET_ALONE);
  assert_int_equal(job.size, 1);
  assert_int_equal(job.cross_size, 1);
  clear_env();
}

/* hvdrun's variables win over the SLURM step hvdrun runs in. */
static void test_hvdrun_wins(void **state) {
  (void)state;
  hvd_job job;
  clear_env();
  set_env(srun_task3);
  set_env((const char *[]){"HOROVOD_RANK", "1", "HOROVOD_SIZE", "2",
                           "HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1",
                           "HOROVOD_GLOO_RENDEZVOUS_PORT", "1234", NULL});
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_string_equal(job.source, "hvdrun");
  assert_int_equal(job.rank, 1);
  assert_int_equal(job.size, 2);
  assert_int_equal(job.meet.kind, HVD_MEET_SERVER);
  clear_env();
}

static void test_open_mpi(void **state) {
  (void)state;
  hvd_job job;
  clear_env();
  set_env((const char *[]){"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "4",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "0", "OMPI_COMM_WORLD_LOCAL_SIZE",
                           "2", "PMIX_RANK", "2", "_HOROVOD_SECRET_KEY", secret, NULL});
  if (hvd__mpi_built()) {
    assert_int_equal(hvd__job_from_env(&job), 0);
    assert_int_equal(job.meet.kind, HVD_MEET_MPI);
  } else { /* several hosts and no MPI: rank 0's host must be named */
    assert_int_equal(hvd__job_from_env(&job), HVD_E_ENV);
    assert_non_null(strstr(hvd_last_error(), "HOROVOD_GLOO_RENDEZVOUS_ADDR"));
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    assert_int_equal(hvd__job_from_env(&job), 0);
    assert_int_equal(job.meet.kind, HVD_MEET_RANK0);
    assert_string_equal(job.meet.addr, "127.0.0.1");
    assert_in_range(job.meet.port, 10000, 29999);
    /* Without the secret: how to pass one, and that a build with MPI needs none. */
    unsetenv("_HOROVOD_SECRET_KEY");
    assert_int_equal(hvd__job_from_env(&job), HVD_E_ENV);
    const char *want[] = {"_HOROVOD_SECRET_KEY is not set: this hvd was built without MPI",
                          "mpirun -x _HOROVOD_SECRET_KEY",
                          "a build with MPI (libopenmpi-dev present when hvd is built; hvdrun "
                          "--check-build says) forms the job through MPI and needs no secret"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
      if (!strstr(hvd_last_error(), want[i]))
        fail_msg("'%s' does not say '%s'", hvd_last_error(), want[i]);
    setenv("_HOROVOD_SECRET_KEY", secret, 1);
  }
  assert_string_equal(job.source, "Open MPI");
  assert_int_equal(job.rank, 2);
  assert_int_equal(job.size, 4);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "4", 1);
  assert_int_equal(hvd__job_from_env(&job), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "OMPI_COMM_WORLD_LOCAL_RANK"));
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_RANK", "4", 1);
  assert_int_equal(hvd__job_from_env(&job), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "OMPI_COMM_WORLD_RANK"));
  clear_env();
}

static void test_mpich(void **state) {
  (void)state;
  hvd_job job;
  clear_env();
  set_env((const char *[]){"PMI_RANK", "1", "PMI_SIZE", "3", "MPI_LOCALRANKID", "1",
                           "MPI_LOCALNRANKS", "3", "_HOROVOD_SECRET_KEY", secret, NULL});
  assert_int_equal(hvd__job_from_env(&job), 0);
  assert_string_equal(job.source, "MPICH");
  assert_int_equal(job.meet.kind, HVD_MEET_RANK0);
  assert_string_equal(job.meet.addr, "127.0.0.1");
  setenv("MPI_LOCALNRANKS", "5", 1);
  assert_int_equal(hvd__job_from_env(&job), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "MPI_LOCALNRANKS"));
  clear_env();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hostlists),
      cmocka_unit_test(test_hostlist_errors),
      cmocka_unit_test(test_counts),
      cmocka_unit_test(test_slurm_task),
      cmocka_unit_test(test_slurm_steps_do_not_share_keys),
      cmocka_unit_test(test_slurm_mismatches),
      cmocka_unit_test(test_slurm_without_secret),
      cmocka_unit_test(test_hvdrun_wins),
      cmocka_unit_test(test_open_mpi),
      cmocka_unit_test(test_mpich),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
