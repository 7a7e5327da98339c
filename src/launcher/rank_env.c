/*
 * rank_env.c -- building the ranks' environment (rank_env.h).
 *
 * The parent's environment is copied minus every variable hvdrun sets,
 * so a stale HOROVOD_RANK from an enclosing job can never leak through.
 * HOROVOD_RANK and the four variables of the rank's place (local and
 * cross rank and size, which differ between hosts) sit in reserved slots
 * that rank_env_for() rewrites before each fork.
 */
#include "rank_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* The variables hvdrun sets: the job's 10 below, HOROVOD_START_TIMEOUT's
 * default, and the flags'. */
#define VARS_MAX (11 + HVDRUN_ENV_MAX)

typedef struct {
  char *set[VARS_MAX]; /* "NAME=value", owned */
  size_t n;
  int failed;
} var_list;

static void add(var_list *l, const char *name, const char *value) {
  char *s = NULL;
  if (l->n >= VARS_MAX || asprintf(&s, "%s=%s", name, value) < 0) {
    l->failed = 1;
    return;
  }
  l->set[l->n++] = s;
}

static void add_int(var_list *l, const char *name, int value) {
  char text[16];
  snprintf(text, sizeof text, "%d", value);
  add(l, name, text);
}

/* The per-rank variables, in the order of their slots. */
static const char *const per_rank[RANK_ENV_PER_RANK] = {
    "HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE"};

/* Everything hvdrun sets, the per-rank variables first with placeholders. */
static void job_vars(var_list *l, const rank_env_job *job) {
  const hvdrun_options *o = job->opt;
  for (int i = 0; i < RANK_ENV_PER_RANK; i++) add(l, per_rank[i], "0");
  add_int(l, "HOROVOD_SIZE", o->np);
  add(l, "HOROVOD_HOSTNAME", job->hostname);
  add(l, "HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1");
  add_int(l, "HOROVOD_GLOO_RENDEZVOUS_PORT", job->port);
  add(l, "_HOROVOD_SECRET_KEY", job->secret);
  /* What the flags say wins over the user's environment (see overridden()). */
  for (size_t i = 0; i < o->n_env; i++) add(l, o->env[i].name, o->env[i].value);
  /* Horovod's default, unless the flag or the user's environment says. */
  if (!options_env(o, "HOROVOD_START_TIMEOUT") && !getenv("HOROVOD_START_TIMEOUT"))
    add(l, "HOROVOD_START_TIMEOUT", "30");
}

/* 1 if environ's "NAME=..." entry names a variable in l. */
static int overridden(const var_list *l, const char *entry) {
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  for (size_t i = 0; i < l->n; i++)
    if (strncmp(l->set[i], entry, n) == 0 && l->set[i][n] == '=') return 1;
  return 0;
}

int rank_env_init(rank_env *e, const rank_env_job *job) {
  var_list l = {{0}, 0, 0};
  size_t inherited = 0;
  memset(e, 0, sizeof *e);
  job_vars(&l, job);
  for (char **v = environ; *v; v++) inherited++;
  e->vars = calloc(inherited + l.n + 1, sizeof *e->vars);
  if (l.failed || !e->vars) goto free_vars;
  for (char **v = environ; *v; v++) {
    if (overridden(&l, *v)) continue;
    if (!(e->vars[e->n] = strdup(*v))) goto free_vars;
    e->n++;
  }
  e->places = job->places;
  for (int i = 0; i < RANK_ENV_PER_RANK; i++) e->slot[i] = e->n + (size_t)i;
  for (size_t i = 0; i < l.n; i++) e->vars[e->n++] = l.set[i];
  /* The first l.set entries only held the per-rank names' places (and kept
   * them out of the inherited copy); rank_env_for() fills the slots. */
  for (int i = 0; i < RANK_ENV_PER_RANK; i++) free(l.set[i]);
  rank_env_for(e, 0);
  return 0;
free_vars:
  for (size_t i = 0; i < l.n; i++) free(l.set[i]);
  rank_env_free(e);
  return -1;
}

char **rank_env_for(rank_env *e, int rank) {
  const rank_place *p = &e->places[rank];
  int value[RANK_ENV_PER_RANK] = {rank, p->local_rank, p->local_size, p->cross_rank,
                                  p->cross_size};
  for (int i = 0; i < RANK_ENV_PER_RANK; i++) {
    snprintf(e->var[i], sizeof e->var[i], "%s=%d", per_rank[i], value[i]);
    e->vars[e->slot[i]] = e->var[i];
  }
  return e->vars;
}

static int is_per_rank(const rank_env *e, const char *s) {
  for (int i = 0; i < RANK_ENV_PER_RANK; i++)
    if (s == e->var[i]) return 1;
  return 0;
}

void rank_env_free(rank_env *e) {
  if (!e->vars) return;
  for (size_t i = 0; i < e->n; i++)
    if (!is_per_rank(e, e->vars[i])) free(e->vars[i]);
  free(e->vars);
  memset(e, 0, sizeof *e);
}

