/*
 * rank_env.c -- building the ranks' environment (rank_env.h).
 *
 * The parent's environment is copied minus every variable hvdrun sets,
 * so a stale HOROVOD_RANK from an enclosing job can never leak through.
 * The per-rank variables (HOROVOD_RANK, the place's four, and the host's
 * name and rendezvous address, which differ between hosts) sit in
 * reserved slots at the end that rank_env_for() rewrites before each
 * fork, or that hvdrun sends to its agent with each rank.
 */
#include "rank_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

extern char **environ;

/* Variables that describe this machine or this login session rather
 * than the job: a rank on another host gets its own there (sshd sets
 * them) or none.  Horovod's ssh launcher leaves out the same kind. */
static const struct {
  const char *name;
  int prefix; /* 1: every variable whose name starts so */
} not_for_other_hosts[] = {
    /* This machine's name and this shell's own state. */
    {"HOSTNAME", 0}, {"HOST", 0}, {"PWD", 0}, {"OLDPWD", 0}, {"SHLVL", 0}, {"_", 0},
    /* The ssh session hvdrun runs in (its agent socket, its client's
     * address): the session to the other host has its own. */
    {"SSH_", 1},
    /* The terminal and the display: the ranks there have neither. */
    {"DISPLAY", 0}, {"XAUTHORITY", 0}, {"TERM", 0}, {"TERMCAP", 0}, {"COLORTERM", 0},
    {"COLUMNS", 0}, {"LINES", 0}, {"WINDOWID", 0}, {"TMUX", 0}, {"TMUX_PANE", 0}, {"STY", 0},
    /* The desktop session's directories and message bus. */
    {"XDG_", 1}, {"DBUS_SESSION_BUS_ADDRESS", 0},
    /* The user as the other host knows them: sshd sets these from its
     * passwd entry (the home directory may differ between hosts). */
    {"HOME", 0}, {"USER", 0}, {"LOGNAME", 0}, {"MAIL", 0}, {"SHELL", 0},
    /* bash's exported functions: code for this machine's shell. */
    {"BASH_FUNC_", 1},
};

/* The length of the name in "NAME=value". */
static size_t name_len(const char *entry) {
  const char *eq = strchr(entry, '=');
  return eq ? (size_t)(eq - entry) : strlen(entry);
}

int rank_env_machine_variable(const char *entry) {
  size_t n = name_len(entry);
  for (size_t i = 0; i < sizeof not_for_other_hosts / sizeof not_for_other_hosts[0]; i++) {
    const char *name = not_for_other_hosts[i].name;
    size_t len = strlen(name);
    if (not_for_other_hosts[i].prefix ? n >= len && strncmp(entry, name, len) == 0
                                      : n == len && strncmp(entry, name, n) == 0)
      return 1;
  }
  return 0;
}

/* 1 if "NAME=..." names a variable that over[0..n) sets. */
static int overridden(const char *entry, char *const *over, size_t n) {
  size_t len = name_len(entry);
  for (size_t i = 0; i < n; i++)
    if (strncmp(over[i], entry, len) == 0 && over[i][len] == '=') return 1;
  return 0;
}

char **rank_env_merge(char *const *base, char *const *over, size_t n, int remote) {
  size_t count = 0, k = 0;
  while (base[count]) count++;
  char **vars = calloc(count + n + 1, sizeof *vars);
  if (!vars) return NULL;
  for (size_t i = 0; i < count; i++)
    if (!overridden(base[i], over, n) && !(remote && rank_env_machine_variable(base[i])))
      vars[k++] = base[i];
  for (size_t i = 0; i < n; i++) vars[k++] = over[i];
  return vars;
}

/* ---- hvdrun's side ---- */

/* The per-rank variables, in the order of their slots.  An elastic
 * job's workers get their worker id in the first and no local or cross
 * values (hvdrun gives them per job, at the rendezvous). */
static const char *const per_rank[RANK_ENV_PER_RANK] = {
    "HOROVOD_RANK",     "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT"};
#define WORKER_ID "HOROVOD_ELASTIC_WORKER_ID"

static const char *slot_name(const rank_env *e, int i) {
  return i == 0 && e->elastic ? WORKER_ID : per_rank[i];
}

static void add(rank_env *e, int *failed, const char *name, const char *value) {
  char *s = NULL;
  if (e->nset >= sizeof e->set / sizeof e->set[0] || asprintf(&s, "%s=%s", name, value) < 0) {
    *failed = 1;
    return;
  }
  e->set[e->nset++] = s;
}

/* Everything hvdrun sets for the whole job but the per-rank variables. */
static int job_vars(rank_env *e, const rank_env_job *job) {
  const hvdrun_options *o = job->opt;
  char size[16];
  int failed = 0;
  snprintf(size, sizeof size, "%d", o->np);
  if (o->elastic)
    add(e, &failed, "HOROVOD_ELASTIC", "1"); /* the size changes: hvdrun says it per job */
  else
    add(e, &failed, "HOROVOD_SIZE", size);
  add(e, &failed, "_HOROVOD_SECRET_KEY", job->secret);
  /* What the flags say wins over the user's environment. */
  for (size_t i = 0; i < o->n_env; i++) add(e, &failed, o->env[i].name, o->env[i].value);
  /* Horovod's default, unless the flag or the user's environment says. */
  const hvd_param *t = &hvd__params[HVD_P_START_TIMEOUT];
  if (!options_env(o, t->name) && !getenv(t->name)) add(e, &failed, t->name, t->def);
  return failed ? -1 : 0;
}

int rank_env_init(rank_env *e, const rank_env_job *job, int remote) {
  char *over[sizeof e->set / sizeof e->set[0] + RANK_ENV_PER_RANK];
  memset(e, 0, sizeof *e);
  e->elastic = job->opt->elastic;
  if (job_vars(e, job) == 0) {
    /* The slots last, holding only their names for now: enough to leave
     * the inherited ones out. */
    memcpy(over, e->set, e->nset * sizeof *over);
    for (int i = 0; i < RANK_ENV_PER_RANK; i++) {
      snprintf(e->var[i], sizeof e->var[i], "%s=", slot_name(e, i));
      over[e->nset + (size_t)i] = e->var[i];
    }
    e->vars = rank_env_merge(environ, over, e->nset + RANK_ENV_PER_RANK, remote);
  }
  if (!e->vars) {
    rank_env_free(e);
    return -1;
  }
  size_t n = 0;
  while (e->vars[n]) n++;
  e->common = n - RANK_ENV_PER_RANK;
  return 0;
}

char **rank_env_for(rank_env *e, const rank_env_rank *r) {
  const rank_place *p = r->place;
  int value[] = {r->rank, p->local_rank, p->local_size, p->cross_rank, p->cross_size};
  int i = 0;
  for (; i < 5; i++) {
    if (e->elastic && i > 0) /* not known before the rendezvous places the worker */
      snprintf(e->var[i], sizeof e->var[i], "%s=", per_rank[i]);
    else
      snprintf(e->var[i], sizeof e->var[i], "%s=%d", slot_name(e, i), value[i]);
  }
  snprintf(e->var[i], sizeof e->var[i], "%s=%s", per_rank[i], r->hostname);
  i++;
  snprintf(e->var[i], sizeof e->var[i], "%s=%s", per_rank[i], r->rdzv_addr);
  i++;
  snprintf(e->var[i], sizeof e->var[i], "%s=%d", per_rank[i], r->rdzv_port);
  return e->vars;
}

void rank_env_free(rank_env *e) {
  for (size_t i = 0; i < e->nset; i++) free(e->set[i]);
  free(e->vars);
  memset(e, 0, sizeof *e);
}
