/*
 * elastic_worker.c -- a worker for the elastic tests (tests/launcher and
 * tests/cluster test_elastic.py), run under hvdrun's elastic driver.
 *
 * It "trains" STEPS steps: params += allreduce-average of a gradient that
 * depends only on (step, rank, size), committing every COMMIT steps, with
 * hvd_elastic_run.  Every line it prints is for the test to parse:
 *
 *   job G size N rank R worker W step S            a job (generation) starts
 *   commit S digest D                              rank 0, at each commit
 *   recovered G step S digest D                    every rank, after a sync
 *   done steps S size N digest D                   every rank, at the end
 *   first step of job G at T                       rank 0, wall clock (bench/)
 *
 * D is FNV-1a of the parameters: equal on every rank of a job, bit for
 * bit.  The test checks that no committed step is lost (S after a
 * recovery is never below the last commit), and that the digests agree.
 *
 * Faults, by environment: ELASTIC_FAULTS="W:KIND:AT,..." makes the worker
 * with id W SIGKILL itself
 *   W:step:K     at step K
 *   W:commit:K   inside its K-th commit (the save hook)
 *   W:sync:G     inside the sync of job G (the sync hook)
 *   W:reset:G    inside the reset callback before job G
 * and ELASTIC_FAIL_HOST=NAME makes every worker of that host (its
 * HOROVOD_HOSTNAME) exit 3 before hvd_init: a host whose workers cannot
 * start.  ELASTIC_STEPS (200), ELASTIC_COMMIT (10), ELASTIC_STEP_MS (a
 * pause per step, 20), ELASTIC_STATE_MB (the state's size: NPARAMS doubles
 * that the steps change, and the rest that only travels; default none).
 */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

#define NPARAMS 1024

static struct {
  double *params;
  size_t nparams; /* NPARAMS and more, by ELASTIC_STATE_MB */
  long step, commits;
  int generation;
  char die_kind[16]; /* this worker's fault, "" for none */
  long die_at;
  long steps, commit_every;
  int step_ms;
} w;

static uint64_t digest(void) { return fnv(w.params, NPARAMS * sizeof *w.params); }

static double wall(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static void maybe_die(const char *kind, long at) {
  if (strcmp(w.die_kind, kind) != 0 || w.die_at != at) return;
  printf("dying at %s:%ld\n", kind, at);
  fflush(stdout);
  raise(SIGKILL);
}

static int save_hook(void *arg) {
  (void)arg;
  maybe_die("commit", ++w.commits);
  return 0;
}

static int sync_hook(void *arg) {
  (void)arg;
  maybe_die("sync", w.generation + 1); /* before train() counts the job */
  return 0;
}

static int on_reset(void *arg) {
  (void)arg;
  maybe_die("reset", w.generation + 1);
  return 0;
}

/* The gradient of a step: a function of (step, rank, size) only, so that
 * any job of any size reaches the same parameters from the same commit. */
static void gradient(double *g, long step, int rank) {
  for (int i = 0; i < NPARAMS; i++)
    g[i] = (double)((mix((uint64_t)step * 7919u + (uint64_t)rank * 104729u + (uint64_t)i) >> 11) %
                    1000) / 1000.0;
}

static int train(hvd_elastic_state *st, void *arg) {
  static double g[NPARAMS];
  (void)arg;
  int rank = hvd_rank(), size = hvd_size();
  w.generation++;
  printf("job %d size %d rank %d worker %s step %ld\n", w.generation, size, rank,
         getenv("HOROVOD_ELASTIC_WORKER_ID") ? getenv("HOROVOD_ELASTIC_WORKER_ID") : "-", w.step);
  if (w.generation > 1)
    printf("recovered %d step %ld digest %016llx\n", w.generation, w.step,
           (unsigned long long)digest());
  fflush(stdout);
  long first = w.step;
  while (w.step < w.steps) {
    maybe_die("step", w.step + 1);
    gradient(g, w.step, rank);
    int rc = hvd_allreduce(g, g, NPARAMS, HVD_FLOAT64, HVD_AVERAGE, "grad");
    if (rc < 0) return rc;
    for (int i = 0; i < NPARAMS; i++) w.params[i] -= 0.01 * g[i];
    w.step++;
    if (w.step == first + 1 && w.generation > 1 && rank == 0)
      printf("first step of job %d at %.3f\n", w.generation, wall()), fflush(stdout);
    if (w.step_ms) sleep_ms(w.step_ms);
    if (w.step % w.commit_every == 0) {
      rc = hvd_elastic_commit(st);
      if (rank == 0 && rc != HVD_E_PEER_LOST && rc != HVD_E_ABORTED) {
        printf("commit %ld digest %016llx\n", w.step, (unsigned long long)digest());
        fflush(stdout);
      }
      if (rc < 0) return rc;
    }
  }
  return 0;
}

static long env_long(const char *name, long def) {
  const char *v = getenv(name);
  return v && v[0] ? atol(v) : def;
}

/* This worker's entry of ELASTIC_FAULTS, if any. */
static void read_fault(const char *faults, long me) {
  const char *p = faults;
  while (p && *p) {
    long who, at;
    char kind[16];
    if (sscanf(p, "%ld:%15[a-z]:%ld", &who, kind, &at) == 3 && who == me) {
      snprintf(w.die_kind, sizeof w.die_kind, "%s", kind);
      w.die_at = at;
    }
    p = strchr(p, ',');
    if (p) p++;
  }
}

int main(void) {
  const char *fail_host = getenv("ELASTIC_FAIL_HOST"), *host = getenv("HOROVOD_HOSTNAME");
  w.steps = env_long("ELASTIC_STEPS", 200);
  w.commit_every = env_long("ELASTIC_COMMIT", 10);
  w.step_ms = (int)env_long("ELASTIC_STEP_MS", 20);
  read_fault(getenv("ELASTIC_FAULTS"), env_long("HOROVOD_ELASTIC_WORKER_ID", -1));
  w.nparams = NPARAMS + (size_t)env_long("ELASTIC_STATE_MB", 0) * (1 << 20) / sizeof(double);
  w.params = calloc(w.nparams, sizeof *w.params);
  if (!w.params) return 1;
  if (fail_host && host && strcmp(fail_host, host) == 0) return 3;
  if (hvd_init() != 0) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  hvd_elastic_state *st = hvd_elastic_state_new();
  hvd_elastic_hooks hooks = {save_hook, NULL, sync_hook};
  int rc = st ? 0 : HVD_E_NOMEM;
  if (rc == 0) rc = hvd_elastic_state_add(st, "params", w.params, w.nparams * sizeof *w.params);
  if (rc == 0) rc = hvd_elastic_state_add(st, "step", &w.step, sizeof w.step);
  if (rc == 0) rc = hvd_elastic_state_add_hooks(st, &hooks, NULL);
  if (rc == 0) rc = hvd_elastic_on_reset(st, on_reset, NULL);
  if (rc == 0) rc = hvd_elastic_run(st, train, NULL);
  if (rc < 0) {
    fprintf(stderr, "elastic_worker: %s: %s\n", hvd_err_name(rc), hvd_last_error());
  } else {
    printf("done steps %ld size %d digest %016llx\n", w.step, hvd_size(),
           (unsigned long long)digest());
  }
  hvd_elastic_state_free(st);
  free(w.params);
  hvd_shutdown();
  return rc < 0 ? 1 : 0;
}
