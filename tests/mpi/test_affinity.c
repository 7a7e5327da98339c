/*
 * test_affinity.c -- HOROVOD_THREAD_AFFINITY (hvdrun --thread-affinity):
 * the CPU the engine thread runs on, read back from /proc.
 *
 * tests.cmake runs it in three modes (argv[1]):
 *
 *   pinned LIST  the job was started with --thread-affinity LIST: local
 *                rank i's engine thread (named "hvd engine") may run on
 *                the i-th CPU of LIST alone, where this process may run
 *                on that CPU (else, as in Horovod, it is left unpinned);
 *                the calling thread keeps the process's CPUs; an
 *                allreduce still gives the exact sum.
 *   unpinned     fewer CPUs than ranks on the host: no engine thread is
 *                pinned (Horovod's reading: one CPU per local rank).
 *   bad          HOROVOD_THREAD_AFFINITY is not a list of CPUs: hvd_init
 *                fails with HVD_E_ENV naming the variable and its value.
 */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"

static int rank, size, checks, failures;

/* The CPUs a thread of this process may run on, from its status file. */
static int allowed_of(const char *task, cpu_set_t *set) {
  char path[300], line[4096];
  snprintf(path, sizeof path, "/proc/self/task/%.31s/status", task);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int found = -1;
  CPU_ZERO(set);
  while (found < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, "Cpus_allowed_list:", 18) != 0) continue;
    found = 0;
    for (char *p = line + 18; *p && *p != '\n';) { /* "0-3,5" */
      long a = strtol(p, &p, 10), b = a;
      if (*p == '-') b = strtol(p + 1, &p, 10);
      for (long c = a; c <= b && c < CPU_SETSIZE; c++) CPU_SET((size_t)c, set);
      if (*p == ',') p++;
      while (*p == ' ' || *p == '\t') p++;
    }
  }
  fclose(f);
  return found;
}

/* The engine thread's task id (its name is "hvd engine"), or NULL. */
static const char *engine_task(char *buf, size_t cap) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  const char *found = NULL;
  while (d && !found && (e = readdir(d))) {
    char path[300], name[32] = "";
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(name, sizeof name, f) && strcmp(name, "hvd engine\n") == 0) {
      snprintf(buf, cap, "%.31s", e->d_name);
      found = buf;
    }
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return found;
}

static void sum_is_exact(void) {
  int64_t x = rank + 1;
  CALL(hvd_allreduce(&x, &x, 1, HVD_INT64, HVD_SUM, "sum"));
  CHECK(x == (int64_t)size * (size + 1) / 2, "allreduce gave %lld", (long long)x);
}

/* "0 1 3": the CPUs of a set, for the messages. */
static const char *cpus(const cpu_set_t *set, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE && len + 8 < cap; c++)
    if (CPU_ISSET((size_t)c, set)) len += (size_t)snprintf(buf + len, cap - len, " %d", c);
  return buf;
}

/* The engine thread's CPUs against `want` (NULL: the process's own). */
static void expect_engine_on(const cpu_set_t *want, const char *what) {
  char task[32], got[256];
  cpu_set_t process, engine;
  CHECK(sched_getaffinity(0, sizeof process, &process) == 0, "sched_getaffinity failed");
  CHECK(engine_task(task, sizeof task) != NULL, "no thread named 'hvd engine'");
  if (failures) return;
  CHECK(allowed_of(task, &engine) == 0, "no Cpus_allowed_list for task %s", task);
  CHECK(CPU_EQUAL(&engine, want ? want : &process),
        "the engine thread may run on CPUs%s, expected %s", cpus(&engine, got, sizeof got),
        what);
}

/* The local_rank-th number of "3,0,2", or -1. */
static int nth_cpu(const char *list, int n) {
  for (int i = 0; list && *list; i++) {
    char *end;
    long v = strtol(list, &end, 10);
    if (i == n) return (int)v;
    list = *end ? end + 1 : end;
  }
  return -1;
}

static int run_pinned(const char *list) {
  cpu_set_t process, want;
  CHECK(sched_getaffinity(0, sizeof process, &process) == 0, "sched_getaffinity failed");
  CALL(hvd_init());
  int cpu = nth_cpu(list, hvd_local_rank());
  CHECK(cpu >= 0, "'%s' has no CPU for local rank %d", list, hvd_local_rank());
  CPU_ZERO(&want);
  if (cpu >= 0) CPU_SET((size_t)cpu, &want);
  /* A CPU the process may not use cannot be pinned to: Horovod warns and
   * goes on, and so does hvd. */
  int can = cpu >= 0 && CPU_ISSET((size_t)cpu, &process);
  char what[64];
  snprintf(what, sizeof what, can ? "CPU %d alone" : "the process's (CPU %d is not its)", cpu);
  expect_engine_on(can ? &want : NULL, what);
  cpu_set_t mine;
  CHECK(pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0 &&
            CPU_EQUAL(&mine, &process),
        "the calling thread was pinned too");
  sum_is_exact();
  CALL(hvd_shutdown());
  return report_checks("test_affinity (pinned)", rank, size, checks, failures);
}

static int run_unpinned(void) {
  CALL(hvd_init());
  CHECK(hvd_local_size() > 1, "a host of %d ranks: the list is not short", hvd_local_size());
  expect_engine_on(NULL, "the process's CPUs (too few CPUs in the list)");
  sum_is_exact();
  CALL(hvd_shutdown());
  return report_checks("test_affinity (unpinned)", rank, size, checks, failures);
}

static int run_bad(void) {
  setenv("HOROVOD_THREAD_AFFINITY", "1,x", 1);
  int rc = hvd_init();
  const char *want = "HOROVOD_THREAD_AFFINITY='1,x': expected CPU numbers from 0 to 1023 "
                     "separated by commas";
  CHECK(rc == HVD_E_ENV, "hvd_init returned %s, not HVD_E_ENV", hvd_err_name(rc));
  CHECK(strstr(hvd_last_error(), want) != NULL, "hvd_init's error '%s' does not say '%s'",
        hvd_last_error(), want);
  return report_checks("test_affinity (bad)", rank, size, checks, failures);
}

int main(int argc, char **argv) {
  limit_stalls();
  const char *r = getenv("HOROVOD_RANK"), *s = getenv("HOROVOD_SIZE");
  rank = r ? atoi(r) : 0;
  size = s ? atoi(s) : 1;
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "pinned") == 0 && argc > 2) return run_pinned(argv[2]);
  if (strcmp(mode, "unpinned") == 0) return run_unpinned();
  if (strcmp(mode, "bad") == 0) return run_bad();
  fprintf(stderr, "usage: test_affinity pinned LIST | unpinned | bad\n");
  return 2;
}
