/*
 * mpirun.c -- hvdrun --mpi (mpirun.h): hvdrun's flags as mpirun's.
 *
 *   mpirun [--allow-run-as-root] --tag-output [--timestamp-output]
 *          {--bind-to none --map-by slot | --binding-args words} -np N [-H HOSTS | --hostfile FILE] [--oversubscribe]
 *          [--mca plm_rsh_agent "SSH -p P -i F"]
 *          [--mca btl_tcp_if_include NICS --mca oob_tcp_if_include NICS]
 *          [--output-filename DIR] -x VAR ... [--mpi-args words] prog args
 *
 * Open MPI refuses to run as root without --allow-run-as-root, and more
 * ranks than this machine has cores (no -H or hostfile) without
 * --oversubscribe; binding is left to the ranks (--bind-to none), which
 * run engine threads of their own.  hvdrun's environment goes to every
 * rank with -x, as horovodrun does (by name: values never on a command
 * line), less what belongs to this machine or login session (rank_env.h)
 * and Open MPI's own variables; with it the variables hvdrun's flags set,
 * and a fresh _HOROVOD_SECRET_KEY, which a build of hvd without MPI needs,
 * with HOROVOD_GLOO_RENDEZVOUS_ADDR naming rank 0's host (the first) when
 * the job spans several and it is not set.  hvdrun's own job variables
 * (HOROVOD_RANK, ...) are removed first: the ranks take who they are from
 * mpirun.
 */
#include "mpirun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "env.h"
#include "rank_env.h"
#include "wire/auth.h"

extern char **environ;

#define ARGV_FIXED 32 /* mpirun's arguments besides -x, --mpi-args and the program */

/* The variables that say who a rank is: mpirun's job, not hvdrun's. */
static const hvd_param_id job_vars[] = {HVD_P_RANK,       HVD_P_SIZE,       HVD_P_LOCAL_RANK,
                                        HVD_P_LOCAL_SIZE, HVD_P_CROSS_RANK, HVD_P_CROSS_SIZE,
                                        HVD_P_HOSTNAME};

/* Open MPI's and PMIx's own, which mpirun sets for each rank. */
static const char *const mpis[] = {"OMPI_", "PMIX_", "OPAL_", "ORTE_"};

typedef struct {
  char **argv;
  size_t n, cap;
  char agent[1024], nics[256];
} cmd;

static void add(cmd *c, const char *arg) {
  if (c->n + 1 < c->cap) c->argv[c->n++] = (char *)arg;
}

/* Sets hvdrun's job-wide variables where mpirun takes them from: its own
 * environment, passed on by -x. */
static int set_env(const hvdrun_options *o, const host_plan *hosts) {
  for (size_t i = 0; i < HVD__ARRAY_LEN(job_vars); i++) unsetenv(hvd__params[job_vars[i]].name);
  const char *addr = hvd__params[HVD_P_RDZV_ADDR].name;
  if (hosts->n > 1 && setenv(addr, hosts->hosts[0].name, 0) != 0) return -1;
  for (size_t i = 0; i < o->n_env; i++)
    if (setenv(o->env[i].name, o->env[i].value, 1) != 0) return -1;
  hvd_secret key;
  char text[HVD_SECRET_TEXT_MAX];
  if (hvd__secret_generate(&key) < 0 || hvd__secret_encode(&key, text, sizeof text) < 0)
    return -1;
  return setenv("_HOROVOD_SECRET_KEY", text, 1);
}

/* A name mpirun's -x takes as one: letters, digits and '_'. */
static int plain_name(const char *entry, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if (!(entry[i] == '_' || (entry[i] >= 'A' && entry[i] <= 'Z') ||
          (entry[i] >= 'a' && entry[i] <= 'z') || (entry[i] >= '0' && entry[i] <= '9')))
      return 0;
  return 1;
}

/* -x NAME for every variable the ranks take from here. */
static void export_vars(cmd *c) {
  for (char **e = environ; *e; e++) {
    size_t len = strcspn(*e, "=");
    int wanted = plain_name(*e, len) && !rank_env_machine_variable(*e);
    for (size_t i = 0; i < HVD__ARRAY_LEN(mpis); i++)
      wanted &= strncmp(*e, mpis[i], strlen(mpis[i])) != 0;
    if (!wanted) continue;
    char *name = strndup(*e, len); /* lives until exec */
    if (!name) continue;
    add(c, "-x");
    add(c, name);
  }
}

/* --ssh-command, -p and -i as mpirun's remote shell. */
static void remote_shell(const hvdrun_options *o, cmd *c) {
  if (!o->ssh_port && !o->ssh_identity && strcmp(o->ssh_command, "ssh") == 0) return;
  int len = snprintf(c->agent, sizeof c->agent, "%s", o->ssh_command);
  if (o->ssh_port) len += snprintf(c->agent + len, sizeof c->agent - (size_t)len, " -p %d",
                                   o->ssh_port);
  if (o->ssh_identity)
    snprintf(c->agent + len, sizeof c->agent - (size_t)len, " -i %s", o->ssh_identity);
  add(c, "--mca");
  add(c, "plm_rsh_agent");
  add(c, c->agent);
}

static void placement(const hvdrun_options *o, cmd *c, char *np) {
  snprintf(np, 16, "%d", o->np);
  add(c, "-np");
  add(c, np);
  if (o->hosts) {
    add(c, "-H");
    add(c, o->hosts);
  } else if (o->hostfile) {
    add(c, "--hostfile");
    add(c, o->hostfile);
  } else if (o->np > sysconf(_SC_NPROCESSORS_ONLN)) {
    add(c, "--oversubscribe");
  }
  if (o->nics) {
    snprintf(c->nics, sizeof c->nics, "%s", o->nics);
    const char *mca[] = {"--mca", "btl_tcp_if_include", c->nics, "--mca", "oob_tcp_if_include",
                         c->nics};
    for (size_t i = 0; i < HVD__ARRAY_LEN(mca); i++) add(c, mca[i]);
  }
}

/* --mpi-args or --binding-args, split at blanks (no quoting, as
 * --ssh-command); the words live until exec. */
static void words(const char *text, cmd *c) {
  char *save = NULL, *copy = text ? strdup(text) : NULL;
  for (char *w = copy ? strtok_r(copy, " \t", &save) : NULL; w; w = strtok_r(NULL, " \t", &save))
    add(c, w);
}

/* Where mpirun puts the ranks: --binding-args, or spread over the slots
 * and left unbound (the ranks' threads share the host's cores). */
static void binding(const hvdrun_options *o, cmd *c) {
  const char *fixed[] = {"--bind-to", "none", "--map-by", "slot"};
  if (o->binding_args) {
    words(o->binding_args, c);
    return;
  }
  for (size_t i = 0; i < HVD__ARRAY_LEN(fixed); i++) add(c, fixed[i]);
}

static void say_cmd(const cmd *c) {
  fprintf(stderr, "hvdrun: --mpi: running");
  for (size_t i = 0; i < c->n; i++) fprintf(stderr, " %s", c->argv[i]);
  fprintf(stderr, "\n");
}

int mpirun_exec(const hvdrun_options *o, const host_plan *hosts) {
  size_t nenv = 0, argc = 0;
  char np[16];
  while (environ[nenv]) nenv++;
  while (o->argv[argc]) argc++;
  cmd c = {NULL, 0, ARGV_FIXED + 2 * nenv + 2 * o->n_env + argc + 1, "", ""};
  if (o->mpi_args) c.cap += strlen(o->mpi_args) / 2 + 1;
  if (o->binding_args) c.cap += strlen(o->binding_args) / 2 + 1;
  c.argv = calloc(c.cap, sizeof *c.argv);
  if (!c.argv || set_env(o, hosts) < 0) {
    fprintf(stderr, "hvdrun: --mpi: %s\n", c.argv ? hvd_last_error() : "out of memory");
    return 1;
  }
  add(&c, "mpirun");
  if (geteuid() == 0) add(&c, "--allow-run-as-root");
  add(&c, "--tag-output");
  if (o->prefix_timestamp) add(&c, "--timestamp-output");
  binding(o, &c);
  placement(o, &c, np);
  remote_shell(o, &c);
  if (o->output_dir) {
    add(&c, "--output-filename");
    add(&c, o->output_dir);
  }
  export_vars(&c);
  words(o->mpi_args, &c);
  for (size_t i = 0; i < argc; i++) add(&c, o->argv[i]);
  if (o->verbose) say_cmd(&c);
  fflush(NULL);
  execvp("mpirun", c.argv);
  fprintf(stderr, "hvdrun: --mpi: cannot run mpirun: %s (apt-get install openmpi-bin)\n",
          strerror(errno));
  return 127;
}
