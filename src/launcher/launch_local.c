/*
 * launch_local.c -- the backend that forks a host's ranks on this
 * machine (launch.h): each rank a child of hvdrun (procs.h), with all of
 * hvdrun's environment and the job's variables (rank_env.h), its pipes
 * read into the rank's streams.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "launch.h"
#include "rank_env.h"

typedef struct {
  proc *procs;    /* one per rank of the host */
  size_t *polled; /* how many slots each proc had in the last prepare() */
} local_host;

static size_t local_poll_max(int n) { return 3 * (size_t)n; }

/* Starts rank i of the host; on failure, it and the host's later ranks
 * never run. */
static int start_rank(launch_host *h, rank_env *env, int i) {
  local_host *l = h->impl;
  launch_rank *r = &h->ranks[i];
  rank_env_rank where = {r->rank, &h->ctx->places[r->rank], h->spec->name, h->rdzv_addr,
                         h->rdzv_port};
  if (proc_spawn(&l->procs[i], h->ctx->opt->argv, rank_env_for(env, &where), 0) == 0) {
    launch_started(r, l->procs[i].pid);
    return 0;
  }
  int err = errno;
  for (int k = i; k < h->spec->nranks; k++)
    launch_exited(&h->ranks[k], (proc_exit){PROC_NO_START, err});
  return -1;
}

static int local_start(launch_host *h) {
  local_host *l = calloc(1, sizeof *l);
  rank_env env;
  rank_env_job job = {h->ctx->opt, h->ctx->secret};
  int n = h->spec->nranks;
  if (l) {
    l->procs = calloc((size_t)n, sizeof *l->procs);
    l->polled = calloc((size_t)n, sizeof *l->polled);
  }
  h->impl = l;
  if (!l || !l->procs || !l->polled || rank_env_init(&env, &job, 0) < 0) {
    launch_say(h, 1, "out of memory starting %d ranks", n);
    return -1;
  }
  for (int i = 0; i < n && start_rank(h, &env, i) == 0; i++) continue;
  rank_env_free(&env);
  return 0;
}

static void local_signal(launch_host *h, int sig) {
  local_host *l = h->impl;
  for (int i = 0; l && l->procs && i < h->spec->nranks; i++) proc_signal_group(&l->procs[i], sig);
}

static size_t local_prepare(launch_host *h, struct pollfd *fds, uint64_t now) {
  local_host *l = h->impl;
  int streams = launch_output_room(h);
  size_t n = 0;
  (void)now;
  for (int i = 0; i < h->spec->nranks; i++) {
    l->polled[i] = proc_poll_add(&l->procs[i], streams, fds + n);
    n += l->polled[i];
  }
  return n;
}

static void local_dispatch(launch_host *h, const struct pollfd *fds, size_t n) {
  local_host *l = h->impl;
  size_t at = 0;
  for (int i = 0; i < h->spec->nranks && at < n; i++) {
    proc_poll_dispatch(&l->procs[i], fds + at, l->polled[i], launch_feed, &h->ranks[i]);
    at += l->polled[i];
  }
}

static uint64_t local_deadline(const launch_host *h) {
  (void)h;
  return HVD__NEVER;
}

static void local_expire(launch_host *h, uint64_t now) {
  (void)h;
  (void)now;
}

static int local_reaped(launch_host *h, pid_t pid, int status) {
  local_host *l = h->impl;
  for (int i = 0; i < h->spec->nranks; i++) {
    proc *p = &l->procs[i];
    if (p->pid != pid || p->reaped) continue;
    proc_reaped(p, status);
    /* Its last words before the report of its exit. */
    proc_drain(p, launch_output_room(h), launch_feed, &h->ranks[i]);
    launch_exited(&h->ranks[i], proc_exit_of(p));
    return 1;
  }
  return 0;
}

static int local_busy(const launch_host *h) {
  (void)h;
  return 0;
}

static void local_close(launch_host *h) { (void)h; }

static void local_stop(launch_host *h) {
  local_host *l = h->impl;
  if (!l) return;
  for (int i = 0; l->procs && i < h->spec->nranks; i++)
    proc_close(&l->procs[i], launch_feed, &h->ranks[i]);
  free(l->procs);
  free(l->polled);
  free(l);
  h->impl = NULL;
}

const launch_backend launch_local = {
    "local",      local_poll_max, local_start,  local_signal, local_prepare, local_dispatch,
    local_deadline, local_expire, local_reaped, local_busy,  local_close,   local_stop,
};
