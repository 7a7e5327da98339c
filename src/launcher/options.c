/*
 * options.c -- parsing hvdrun's command line.
 *
 * One table lists every flag with its help line, so the parser and
 * --help cannot drift apart.  Most flags only set a HOROVOD_* variable for
 * the ranks (horovodrun's engine knobs): their row names the variable's
 * entry in env.h's table, whose kind and range say how to check the
 * value, and one generic path records the value in hvdrun_options for
 * rank_env.c to export.  A --no- twin sets the same variable to 0, so
 * the last of the two wins.  Every flag of horovodrun 0.28 has a row:
 * one that changes nothing here is accepted with a one-line warning, one
 * that cannot be honoured (jsrun, NCCL streams) refuses in one line that
 * says why, rather than as an unknown flag.  Options end at the first
 * argument that is not a flag (the program) or at "--".  Every number is
 * checked strictly: digits only, in range, nothing trailing.
 *
 * --config-file is read before the other flags, wherever it stands, so
 * the command line overrides the file: config_file.c turns it into rows
 * of flags, applied here as the command line's are.
 */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <net/if.h>

#include "check_build.h"
#include "common.h"
#include "config_file.h"
#include "env.h"
#include "launch_tree.h"
#include "wire/auth.h"

#define DIGITS "0123456789"

/* F_ENV: the flag sets the variable its row names; the rest are hvdrun's own. */
typedef enum {
  F_ENV,
  F_NP,
  F_HOSTS,
  F_HOSTFILE,
  F_SSH_PORT,
  F_SSH_IDENTITY,
  F_SSH_COMMAND,
  F_SSH_THIS_HOST,
  F_LAUNCH_FANOUT,
  F_OUTPUT,
  F_MIN_NP,
  F_MAX_NP,
  F_DISCOVERY,
  F_SLOTS_PER_HOST,
  F_ELASTIC_TIMEOUT,
  F_RESET_LIMIT,
  F_COOLDOWN,
  F_LAUNCHER,
  F_MPI,
  F_MPI_ARGS,
  F_GLOO,
  F_MAKE_SECRET,
  F_VERBOSE,
  F_CHECK_BUILD,
  F_VERSION,
  F_HELP,
  F_CONFIG_FILE,
  F_BINDING_ARGS,
  F_PREFIX_TIMESTAMP,
  F_NOTHING,   /* accepted; asks for what hvdrun does anyway (its help line says why) */
  F_WARN,      /* accepted with one warning line: it changes nothing here (its help line) */
  F_NO_MEANING /* refused in one line: its help line says why */
} flag_id;

/* What an F_ENV flag's value may be: its variable's kind in env.h's table. */
typedef enum {
  V_NONE,    /* not an F_ENV flag */
  V_INT,     /* a whole number in the variable's range (divided by the row's scale) */
  V_DECIMAL, /* digits with at most one '.', in the variable's range */
  V_PATH,    /* any non-empty text */
  V_LEVEL,   /* a log level name; the variable gets it upper-cased */
  V_IFACES,  /* interface names separated by commas (HOROVOD_GLOO_IFACE) */
  V_CORES,   /* CPU numbers separated by commas */
  V_SWITCH   /* no value; the variable gets the row's scale: 1, or 0 for a --no- twin */
} value_kind;

/* A row's variable: its id in env.h's table, and the scale (see flag). */
#define OWN -1, 0
#define ENV(id) HVD_P_##id, 1
#define ENV_OFF(id) HVD_P_##id, 0
#define ENV_SCALED(id, scale) HVD_P_##id, scale

typedef struct {
  flag_id id;
  const char *short_name; /* may be NULL */
  const char *long_name;
  const char *arg;  /* the value's name, NULL for a switch */
  int param;        /* F_ENV: the variable the flag sets (hvd_param_id), else -1 */
  long scale;       /* F_ENV: an INT variable gets the value times scale; a BOOL one
                             gets scale (1, or 0 for a --no- twin) */
  const char *help; /* F_ENV: --help adds the variable and the range */
} flag;

static const flag flags[] = {
    {F_NP, "-np", "--num-proc", "N", OWN, "number of processes (ranks) to start, 1..4096"},
    {F_HOSTS, "-H", "--hosts", "HOSTS", OWN,
     "host:slots,... ([v6addr]:slots); a host named twice is one host"},
    {F_HOSTFILE, NULL, "--hostfile", "FILE", OWN,
     "file with one 'host slots=N' (or 'host') per line, '#' comments"},
    {F_SSH_PORT, "-p", "--ssh-port", "PORT", OWN, "ssh port of the other hosts, 1..65535"},
    {F_SSH_IDENTITY, "-i", "--ssh-identity-file", "FILE", OWN,
     "the key ssh logs in to the other hosts with"},
    {F_SSH_COMMAND, NULL, "--ssh-command", "CMD", OWN,
     "ssh and its options, split at blanks (no quoting); default ssh"},
    {F_SSH_THIS_HOST, NULL, "--ssh-this-host", NULL, OWN,
     "start this machine's ranks through the ssh command too, not as hvdrun's children"},
    {F_LAUNCH_FANOUT, NULL, "--launch-fanout", "N", OWN,
     "beyond N hosts, hvdrun's agents start the other hosts' ssh sessions, N each, in a tree "
     "(every host must reach the others with the ssh command); 0: hvdrun starts them all; "
     "default 8"},
    {F_OUTPUT, NULL, "--output-filename", "DIR", OWN,
     "also write rank N's output to DIR/rank.N/stdout and stderr"},
    {F_CONFIG_FILE, NULL, "--config-file", "FILE", OWN,
     "horovodrun's YAML settings; the command line's flags override them"},
    {F_MIN_NP, NULL, "--min-np", "N", OWN, "elastic: fewest workers to train with (default -np)"},
    {F_MAX_NP, NULL, "--max-np", "N", OWN,
     "elastic: most workers to train with (default: no bound below 4096)"},
    {F_DISCOVERY, NULL, "--host-discovery-script", "SCRIPT", OWN,
     "elastic: run about once a second, prints 'host:slots' lines"},
    {F_SLOTS_PER_HOST, NULL, "--slots-per-host", "N", OWN,
     "elastic: slots of a host the script names without ':slots' (1)"},
    {F_ELASTIC_TIMEOUT, NULL, "--elastic-timeout", "SECONDS", OWN,
     "elastic: how long to wait for --min-np workers (HOROVOD_ELASTIC_TIMEOUT, 600)"},
    {F_RESET_LIMIT, NULL, "--reset-limit", "N", OWN,
     "elastic: end the job after N changes of its workers (no limit)"},
    {F_COOLDOWN, NULL, "--blacklist-cooldown-range", "MIN MAX", OWN,
     "elastic: a failed host returns after MIN s, doubling to MAX (never)"},
    {F_LAUNCHER, NULL, "--launcher", "KIND", OWN,
     "how other hosts' ranks start: srun, ssh or local (this machine only); default: srun "
     "inside a SLURM allocation, else ssh"},
    {F_MPI, NULL, "--mpi", NULL, OWN,
     "start the job through mpirun (Open MPI) instead of hvdrun's own launcher"},
    {F_MPI_ARGS, NULL, "--mpi-args", "ARGS", OWN,
     "more arguments for mpirun, split at blanks (no quoting); with --mpi"},
    {F_BINDING_ARGS, NULL, "--binding-args", "ARGS", OWN,
     "mpirun's process binding instead of '--bind-to none --map-by slot'; with --mpi"},
    {F_GLOO, NULL, "--gloo", NULL, OWN, "start the job with hvdrun's own launcher (the default)"},
    {F_NO_MEANING, NULL, "--jsrun", NULL, OWN,
     "hvd does not start jobs through LSF's jsrun (use --mpi, srun or ssh)"},
    {F_MAKE_SECRET, NULL, "--make-secret", NULL, OWN,
     "print a fresh secret for _HOROVOD_SECRET_KEY (jobs started by srun) and exit"},
    {F_ENV, NULL, "--network-interface", "NIC[,NIC...]", ENV(GLOO_IFACE),
     "NICs of the ranks and the rendezvous: the first that exists; repeatable"},
    {F_ENV, NULL, "--start-timeout", "SECONDS", ENV(START_TIMEOUT),
     "how long hvd_init() waits for all ranks, default 30"},
    {F_ENV, NULL, "--gloo-timeout-seconds", "SECONDS", ENV(GLOO_TIMEOUT_SECONDS),
     "how long a collective waits for a silent peer"},
    {F_ENV, NULL, "--log-level", "LEVEL", ENV(LOG_LEVEL),
     "TRACE, DEBUG, INFO, WARNING, ERROR or FATAL"},
    {F_ENV, NULL, "--log-without-timestamp", NULL, ENV(LOG_HIDE_TIME),
     "leave timestamps out of hvd's log lines"},
    {F_ENV, NULL, "--log-hide-timestamp", NULL, ENV(LOG_HIDE_TIME),
     "the old name of --log-without-timestamp"},
    {F_ENV, NULL, "--log-with-timestamp", NULL, ENV_OFF(LOG_HIDE_TIME),
     "timestamps in hvd's log lines (the default)"},
    {F_ENV, NULL, "--no-log-hide-timestamp", NULL, ENV_OFF(LOG_HIDE_TIME),
     "the old name of --log-with-timestamp"},
    {F_PREFIX_TIMESTAMP, NULL, "--prefix-output-with-timestamp", NULL, OWN,
     "start each forwarded output line with its time, as 'Fri Nov 27 02:05:43 2026[0]<stdout>:'"},
    {F_ENV, NULL, "--fusion-threshold-mb", "MB", ENV_SCALED(FUSION_THRESHOLD, 1048576),
     "fuse allreduces of up to MB megabytes; 0: no fusion"},
    {F_ENV, NULL, "--cycle-time-ms", "MS", ENV(CYCLE_TIME),
     "pause between negotiation cycles, like 2.5"},
    {F_ENV, NULL, "--hierarchical-allreduce", NULL, ENV(HIERARCHICAL_ALLREDUCE),
     "allreduce within each host, across hosts, then within again"},
    {F_ENV, NULL, "--no-hierarchical-allreduce", NULL, ENV_OFF(HIERARCHICAL_ALLREDUCE),
     "one flat allreduce (the default), which autotune then leaves alone"},
    {F_ENV, NULL, "--hierarchical-allgather", NULL, ENV(HIERARCHICAL_ALLGATHER),
     "allgather within each host, across hosts, then a broadcast within each host"},
    {F_ENV, NULL, "--no-hierarchical-allgather", NULL, ENV_OFF(HIERARCHICAL_ALLGATHER),
     "one flat allgather (the default)"},
    {F_NO_MEANING, NULL, "--torus-allreduce", NULL, OWN,
     "torus allreduce is an NCCL (GPU) algorithm of Horovod's; hvd's NCCL path runs NCCL's "
     "own allreduce, or the hierarchical one (--hierarchical-allreduce)"},
    {F_NOTHING, NULL, "--no-torus-allreduce", NULL, OWN,
     "accepted: hvd never runs a torus allreduce"},
    {F_ENV, NULL, "--cache-capacity", "N", ENV(CACHE_CAPACITY),
     "response cache entries; 0: no cache"},
    {F_ENV, NULL, "--autotune", NULL, ENV(AUTOTUNE),
     "tune fusion, cycle time, cache and hierarchical allreduce while the job runs"},
    {F_ENV, NULL, "--no-autotune", NULL, ENV_OFF(AUTOTUNE), "no autotuning (the default)"},
    {F_ENV, NULL, "--autotune-log-file", "PATH", ENV(AUTOTUNE_LOG),
     "rank 0 writes every autotune sample and its score there (CSV)"},
    {F_ENV, NULL, "--autotune-warmup-samples", "N", ENV(AUTOTUNE_WARMUP_SAMPLES),
     "autotune samples discarded at the start"},
    {F_ENV, NULL, "--autotune-steps-per-sample", "N", ENV(AUTOTUNE_STEPS_PER_SAMPLE),
     "training steps in one autotune sample"},
    {F_ENV, NULL, "--autotune-bayes-opt-max-samples", "N", ENV(AUTOTUNE_BAYES_OPT_MAX_SAMPLES),
     "samples of the Bayesian optimisation"},
    {F_ENV, NULL, "--autotune-gaussian-process-noise", "X", ENV(AUTOTUNE_GAUSSIAN_PROCESS_NOISE),
     "noise of the autotuner's Gaussian process"},
    {F_ENV, NULL, "--autotune-retune-drop", "X", ENV(AUTOTUNE_RETUNE_DROP),
     "tune again when throughput falls this share below the settled one"},
    {F_ENV, NULL, "--timeline-filename", "PATH", ENV(TIMELINE),
     "Chrome-trace timeline: rank 0 to PATH; %r in PATH or a directory: every rank"},
    {F_ENV, NULL, "--timeline-mark-cycles", NULL, ENV(TIMELINE_MARK_CYCLES),
     "mark every negotiation cycle in the timeline"},
    {F_ENV, NULL, "--no-timeline-mark-cycles", NULL, ENV_OFF(TIMELINE_MARK_CYCLES),
     "no cycle marks in the timeline (the default)"},
    {F_ENV, NULL, "--no-stall-check", NULL, ENV(STALL_CHECK_DISABLE),
     "turn off the stall inspector"},
    {F_ENV, NULL, "--stall-check", NULL, ENV_OFF(STALL_CHECK_DISABLE),
     "keep the stall inspector on (the default)"},
    {F_ENV, NULL, "--stall-check-warning-time-seconds", "SECONDS", ENV(STALL_CHECK_TIME_SECONDS),
     "warn of ranks a tensor waits this long for"},
    {F_ENV, NULL, "--stall-check-shutdown-time-seconds", "SECONDS",
     ENV(STALL_SHUTDOWN_TIME_SECONDS), "fail after a stall this long; 0: never"},
    {F_ENV, NULL, "--tcp", NULL, ENV(SHM_DISABLE),
     "only TCP between the ranks, also between those of one host (no shared memory)"},
    {F_WARN, NULL, "--mpi-threads-disable", NULL, OWN,
     "hvd initialises MPI with threads (it needs them only for HOROVOD_CPU_OPERATIONS=mpi); a "
     "program that wants MPI without threads calls MPI_Init itself, and hvd then leaves MPI "
     "alone after hvd_init"},
    {F_NOTHING, NULL, "--no-mpi-threads-disable", NULL, OWN,
     "accepted: hvd initialises MPI with threads (MPI_THREAD_MULTIPLE)"},
    {F_NO_MEANING, NULL, "--num-nccl-streams", "N", OWN,
     "hvd's NCCL path runs its collectives in order on one CUDA stream"},
    {F_ENV, NULL, "--thread-affinity", "CPU[,CPU...]", ENV(THREAD_AFFINITY),
     "pin local rank i's engine thread to the i-th CPU (one per rank of a host)"},
    {F_NOTHING, NULL, "--disable-cache", NULL, OWN,
     "accepted: hvdrun keeps no cache of its checks of the hosts"},
    {F_VERBOSE, NULL, "--verbose", NULL, OWN,
     "say what hvdrun does: rendezvous address, each start and exit"},
    {F_CHECK_BUILD, "-cb", "--check-build", NULL, OWN,
     "print the frameworks, controllers and tensor operations this build has, and exit"},
    {F_VERSION, "-v", "--version", NULL, OWN, "print hvdrun's version and exit"},
    {F_HELP, "-h", "--help", NULL, OWN, "print this help and exit"},
};

/* horovodrun's other names of some flags: the same flag here. */
static const struct {
  const char *alias, *name;
} aliases[] = {
    {"--min-num-proc", "--min-np"},
    {"--max-num-proc", "--max-np"},
    {"-hostfile", "--hostfile"},
    {"--network-interfaces", "--network-interface"},
    {"-prefix-timestamp", "--prefix-output-with-timestamp"},
};

/* Every flag may set a variable, so hvdrun_options.env never fills up. */
_Static_assert(HVD__ARRAY_LEN(flags) <= HVDRUN_ENV_MAX, "HVDRUN_ENV_MAX is too small");

static const char usage_line[] = "usage: hvdrun -np N [-H host:slots,...] [options] prog [args...]";

static const hvd_param *param_of(const flag *f) { return &hvd__params[f->param]; }

static value_kind kind_of(const flag *f) {
  if (f->id != F_ENV) return V_NONE;
  switch (param_of(f)->kind) {
    case HVD_PK_INT: return V_INT;
    case HVD_PK_FLOAT: return V_DECIMAL;
    case HVD_PK_BOOL: return V_SWITCH;
    case HVD_PK_LEVEL: return V_LEVEL;
    case HVD_PK_CORES: return V_CORES;
    default: return f->param == HVD_P_GLOO_IFACE ? V_IFACES : V_PATH;
  }
}

/* The flag's range in its own unit: the variable's, divided by the scale
 * of an INT (MB for bytes). */
static void range_of(const flag *f, long *min, long *max) {
  const hvd_param *p = param_of(f);
  long scale = kind_of(f) == V_INT ? f->scale : 1;
  *min = p->min / scale;
  *max = p->max / scale;
}

static const char *alias_of(const flag *f) {
  for (size_t i = 0; i < HVD__ARRAY_LEN(aliases); i++)
    if (strcmp(aliases[i].name, f->long_name) == 0) return aliases[i].alias;
  return NULL;
}

static int flag_names(const flag *f, char *buf, size_t size) {
  const char *alias = alias_of(f);
  return snprintf(buf, size, "%s%s%s%s%s%s%s", f->short_name ? f->short_name : "",
                  f->short_name ? ", " : "", f->long_name, alias ? ", " : "", alias ? alias : "",
                  f->arg ? " " : "", f->arg ? f->arg : "");
}

/* The end of an F_ENV flag's help line, from its row: the variable, and
 * what the value may be. */
static void print_env_help(const flag *f) {
  value_kind k = kind_of(f);
  long min, max;
  printf(" (%s", param_of(f)->name);
  if (k == V_SWITCH) printf("=%ld", f->scale);
  if (k == V_INT && f->scale > 1) printf(" = %s * %ld", f->arg, f->scale);
  range_of(f, &min, &max);
  if (k == V_INT || k == V_DECIMAL) printf(", %ld..%ld", min, max);
  printf(")");
}

static void print_help(void) {
  char names[80];
  int width = 0;
  for (size_t i = 0; i < HVD__ARRAY_LEN(flags); i++) {
    int n = flag_names(&flags[i], names, sizeof names);
    if (n > width) width = n;
  }
  printf("%s\n\nStarts N copies of prog as the ranks of one hvd job and forwards their\n"
         "output, prefixed [rank]<stdout>: or [rank]<stderr>:.  A flag that names a\n"
         "HOROVOD_* variable sets it for every rank, over hvdrun's own environment;\n"
         "without the flag, the environment's value passes through.  Ranks on other\n"
         "hosts are started over ssh (inside a SLURM allocation: srun, on the\n"
         "allocation's nodes), one session per host, by hvdrun installed at the same\n"
         "path there.  With --mpi, mpirun starts the job instead.\n\noptions:\n",
         usage_line);
  for (size_t i = 0; i < HVD__ARRAY_LEN(flags); i++) {
    const flag *f = &flags[i];
    flag_names(f, names, sizeof names);
    printf("  %-*s %s%s", width, names,
           f->id == F_NO_MEANING ? "refused: "
           : f->id == F_WARN     ? "accepted, with a warning: "
                                 : "",
           f->help);
    if (f->id == F_ENV) print_env_help(f);
    printf("\n");
  }
}

/* Where the setting being applied comes from, when not the command line:
 * "FILE: section.key" of a --config-file. */
static const char *error_where;

static options_result usage_error(const char *fmt, ...) HVD__PRINTF(1, 2);
static options_result usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hvdrun: %s%s", error_where ? error_where : "", error_where ? ": " : "");
  vfprintf(stderr, fmt, ap);
  if (error_where) /* the file's mistake: the usage would not help */
    fprintf(stderr, "\n");
  else
    fprintf(stderr, "\n%s\nTry 'hvdrun --help' for more information.\n", usage_line);
  va_end(ap);
  return OPTIONS_USAGE;
}

/* 1 if arg is the long name `name`, alone or with its value after '='
 * ("--num-proc=4"): *inline_value then points at the value. */
static int long_match(const char *arg, const char *name, const char **inline_value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || (arg[n] != '\0' && arg[n] != '=')) return 0;
  *inline_value = arg[n] == '=' ? arg + n + 1 : NULL;
  return 1;
}

/* Finds the flag `arg` names, by any of its names. */
static const flag *flag_find(const char *arg, const char **inline_value) {
  const char *alias = NULL;
  *inline_value = NULL;
  for (size_t i = 0; i < HVD__ARRAY_LEN(flags); i++) {
    const flag *f = &flags[i];
    if ((f->short_name && strcmp(arg, f->short_name) == 0) ||
        long_match(arg, f->long_name, inline_value) ||
        ((alias = alias_of(f)) != NULL && long_match(arg, alias, inline_value)))
      return f;
  }
  return NULL;
}

int options_parse_int(const char *s, long min, long max, long *out) {
  char *end;
  if (!isdigit((unsigned char)s[0])) return -1;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* Where o->env holds `name`: an index < n_env, or n_env when not there. */
static size_t env_index(const hvdrun_options *o, const char *name) {
  size_t i = 0;
  while (i < o->n_env && strcmp(o->env[i].name, name) != 0) i++;
  return i;
}

const char *options_env(const hvdrun_options *o, const char *name) {
  size_t i = env_index(o, name);
  return i < o->n_env ? o->env[i].value : NULL;
}

/* The entry for f's variable: a flag given twice overwrites its first value. */
static hvdrun_env *env_entry(hvdrun_options *o, const flag *f) {
  size_t i = env_index(o, param_of(f)->name);
  if (i == o->n_env) o->env[o->n_env++].name = param_of(f)->name;
  return &o->env[i];
}

static options_result set_int(const flag *f, const char *value, hvdrun_env *e) {
  long v, min, max;
  range_of(f, &min, &max);
  if (options_parse_int(value, min, max, &v) < 0)
    return usage_error("%s needs a whole number%s in %ld..%ld, not '%s'", f->long_name,
                       strcmp(f->arg, "SECONDS") == 0 ? " of seconds" : "", min, max, value);
  snprintf(e->buf, sizeof e->buf, "%ld", v * f->scale);
  e->value = e->buf;
  return OPTIONS_RUN;
}

/* Digits with at most one '.' (and at least one digit) in [min, max]: a
 * plain "2.5", without the sign, exponent, hex or "inf" that strtod()
 * takes too.  0 on success, -1 otherwise. */
static int check_decimal(const char *s, long min, long max) {
  const char *p = s + strspn(s, DIGITS);
  if (*p == '.') p += 1 + strspn(p + 1, DIGITS);
  if (*p != '\0' || !strpbrk(s, DIGITS)) return -1;
  double x = strtod(s, NULL);
  return x >= (double)min && x <= (double)max ? 0 : -1;
}

static options_result set_decimal(const flag *f, const char *value, hvdrun_env *e) {
  long min, max;
  range_of(f, &min, &max);
  if (check_decimal(value, min, max) < 0)
    return usage_error("%s needs a number like 2.5 in %ld..%ld, not '%s'", f->long_name, min, max,
                       value);
  e->value = value;
  return OPTIONS_RUN;
}

static options_result set_path(const flag *f, const char *value, hvdrun_env *e) {
  if (!value[0]) return usage_error("%s needs a path, not ''", f->long_name);
  e->value = value;
  return OPTIONS_RUN;
}

static options_result set_level(const char *value, hvdrun_env *e) {
  for (int i = HVD_LOG_TRACE; i <= HVD_LOG_FATAL; i++) {
    if (strcasecmp(value, hvd__level_name(i)) == 0) {
      e->value = hvd__level_name(i);
      return OPTIONS_RUN;
    }
  }
  return usage_error("--log-level must be TRACE, DEBUG, INFO, WARNING, ERROR or FATAL, not '%s'",
                     value);
}

/* CPU numbers as the library reads them (env.c), so that a list hvdrun
 * passes is one hvd_init takes. */
static options_result set_cores(const flag *f, const char *value, hvdrun_env *e) {
  int core, count;
  long min, max;
  range_of(f, &min, &max);
  if (!value[0] || hvd__parse_cores((hvd_param_id)f->param, value, 0, &core, &count) < 0)
    return usage_error("%s needs CPU numbers in %ld..%ld separated by commas (one per rank "
                       "of a host), not '%s'",
                       f->long_name, min, max, value);
  e->value = value;
  return OPTIONS_RUN;
}

/* 1 if the comma-separated list has the name p[0..n). */
static int has_iface(const char *list, const char *p, size_t n) {
  for (;;) {
    size_t len = strcspn(list, ",");
    if (len == n && strncmp(list, p, n) == 0) return 1;
    if (list[len] == '\0') return 0;
    list += len + 1;
  }
}

/* Adds the names of value that o->nics lacks (horovodrun unites them):
 * o->nics_buf then holds them all.  0, or -1 when out of memory. */
static int add_ifaces(hvdrun_options *o, const char *value) {
  size_t len = strlen(o->nics);
  char *all = malloc(len + strlen(value) + 2);
  if (!all) return -1;
  memcpy(all, o->nics, len + 1);
  for (const char *p = value;; p++) {
    size_t n = strcspn(p, ",");
    if (!has_iface(all, p, n)) len += (size_t)sprintf(all + len, ",%.*s", (int)n, p);
    p += n;
    if (*p == '\0') break;
  }
  free(o->nics_buf);
  o->nics_buf = all;
  return 0;
}

/* Names of network interfaces, comma-separated: each 1..IF_NAMESIZE-1
 * bytes of what an interface name may hold.  Given again, the flag adds
 * its names to the first's, as horovodrun's does. */
static options_result set_ifaces(hvdrun_options *o, const char *value, hvdrun_env *e) {
  const char *p = value;
  for (;;) {
    size_t n = strcspn(p, ",");
    int ok = n > 0 && n < IF_NAMESIZE;
    for (size_t i = 0; ok && i < n; i++) ok = isgraph((unsigned char)p[i]) && p[i] != '/';
    if (!ok)
      return usage_error("--network-interface needs interface names separated by commas, "
                         "not '%s'",
                         value);
    if (p[n] == '\0') break;
    p += n + 1;
  }
  if (o->nics && add_ifaces(o, value) < 0)
    return usage_error("%s", "--network-interface: out of memory");
  o->nics = e->value = o->nics_buf ? o->nics_buf : value;
  return OPTIONS_RUN;
}

/* Checks an F_ENV flag's value as its row says and records what the
 * variable gets. */
static options_result set_env(hvdrun_options *o, const flag *f, const char *value) {
  hvdrun_env *e = env_entry(o, f);
  switch (kind_of(f)) {
    case V_INT: return set_int(f, value, e);
    case V_DECIMAL: return set_decimal(f, value, e);
    case V_PATH: return set_path(f, value, e);
    case V_LEVEL: return set_level(value, e);
    case V_IFACES: return set_ifaces(o, value, e);
    case V_CORES: return set_cores(f, value, e);
    case V_SWITCH: e->value = f->scale ? "1" : "0"; return OPTIONS_RUN;
    case V_NONE: break;
  }
  return OPTIONS_USAGE;
}

static options_result set_np(hvdrun_options *o, const char *value) {
  long v;
  if (options_parse_int(value, 1, HVDRUN_MAX_NP, &v) < 0)
    return usage_error("-np needs a number of processes in 1..4096, not '%s'", value);
  o->np = (int)v;
  return OPTIONS_RUN;
}

static options_result set_port(hvdrun_options *o, const char *value) {
  long v;
  if (options_parse_int(value, 1, 65535, &v) < 0)
    return usage_error("--ssh-port needs a port number in 1..65535, not '%s'", value);
  o->ssh_port = (int)v;
  return OPTIONS_RUN;
}

/* A whole number in [min, max] for one of hvdrun's own flags. */
static options_result set_count(const flag *f, const char *value, long min, long max, int *out) {
  long v;
  if (options_parse_int(value, min, max, &v) < 0)
    return usage_error("%s needs a whole number in %ld..%ld, not '%s'", f->long_name, min, max,
                       value);
  *out = (int)v;
  return OPTIONS_RUN;
}

/* One of hvdrun's own flags that stands for a variable of env.h's table
 * (hvdrun reads it itself): in the variable's range. */
static options_result set_param_int(const flag *f, const char *value, hvd_param_id id, int *out) {
  return set_count(f, value, hvd__params[id].min, hvd__params[id].max, out);
}

/* What hvdrun itself reads of an INT variable: the flag's value, else
 * the environment's, else the table's default. */
static options_result param_seconds(const hvdrun_options *o, hvd_param_id id, int *out) {
  const hvd_param *p = &hvd__params[id];
  const char *t = options_env(o, p->name);
  long v;
  if (!t) t = hvd__param_raw(id);
  if (!t) t = p->def;
  if (options_parse_int(t, p->min, p->max, &v) < 0)
    return usage_error("%s must be a whole number of seconds in %ld..%ld, not '%s'", p->name,
                       p->min, p->max, t);
  *out = (int)v;
  return OPTIONS_RUN;
}

static options_result set_launcher(hvdrun_options *o, const char *value) {
  static const char *const names[] = {"auto", "ssh", "srun", "local"};
  for (size_t i = 0; i < HVD__ARRAY_LEN(names); i++) {
    if (strcmp(value, names[i]) != 0) continue;
    o->launcher = (launcher_kind)i;
    return OPTIONS_RUN;
  }
  return usage_error("--launcher must be srun, ssh or local, not '%s'", value);
}

/* --make-secret: one line of base64, as _HOROVOD_SECRET_KEY takes it. */
static options_result make_secret(void) {
  hvd_secret key;
  char text[HVD_SECRET_TEXT_MAX];
  if (hvd__secret_generate(&key) < 0 || hvd__secret_encode(&key, text, sizeof text) < 0) {
    fprintf(stderr, "hvdrun: --make-secret: %s\n", hvd_last_error());
    return OPTIONS_USAGE;
  }
  printf("%s\n", text);
  return OPTIONS_DONE;
}

static options_result set_nonempty(const flag *f, const char *value, const char **out) {
  if (!value[0] || !value[strspn(value, " \t")])
    return usage_error("%s needs a value, not '%s'", f->long_name, value);
  *out = value;
  return OPTIONS_RUN;
}

/* --launch-fanout: 0, or 2 and more (one session each would make a chain). */
static options_result set_fanout(hvdrun_options *o, const char *value) {
  long n;
  if (options_parse_int(value, 0, HVDRUN_MAX_NP, &n) < 0 || n == 1)
    return usage_error("--launch-fanout needs 0 (hvdrun starts every session) or a number of "
                       "sessions in 2..%d, not '%s'",
                       HVDRUN_MAX_NP, value);
  o->launch_fanout = (int)n;
  return OPTIONS_RUN;
}

/* A flag of horovodrun's that means nothing here: one line, no usage. */
static options_result refuse(const flag *f) {
  fprintf(stderr, "hvdrun: %s%s%s has no meaning here: %s\n", error_where ? error_where : "",
          error_where ? ": " : "", f->long_name, f->help);
  return OPTIONS_USAGE;
}

/* A flag of horovodrun's that changes nothing here: one warning line. */
static options_result warn(const flag *f) {
  fprintf(stderr, "hvdrun: warning: %s%s%s changes nothing here: %s\n",
          error_where ? error_where : "", error_where ? ": " : "", f->long_name, f->help);
  return OPTIONS_RUN;
}

/* Applies one flag; value is NULL for switches. */
static options_result apply(hvdrun_options *o, const flag *f, const char *value) {
  switch (f->id) {
    case F_ENV: return set_env(o, f, value);
    case F_NP: return set_np(o, value);
    case F_HOSTS: o->hosts = value; return OPTIONS_RUN;
    case F_HOSTFILE: o->hostfile = value; return OPTIONS_RUN;
    case F_SSH_PORT: return set_port(o, value);
    case F_SSH_IDENTITY: return set_nonempty(f, value, &o->ssh_identity);
    case F_SSH_COMMAND: return set_nonempty(f, value, &o->ssh_command);
    case F_SSH_THIS_HOST: o->ssh_this_host = 1; return OPTIONS_RUN;
    case F_LAUNCH_FANOUT: return set_fanout(o, value);
    case F_OUTPUT: return set_nonempty(f, value, &o->output_dir);
    case F_MIN_NP: o->elastic = 1; return set_count(f, value, 1, HVDRUN_MAX_NP, &o->min_np);
    case F_MAX_NP: o->elastic = 1; return set_count(f, value, 1, HVDRUN_MAX_NP, &o->max_np);
    case F_DISCOVERY: o->elastic = 1; return set_nonempty(f, value, &o->discovery);
    case F_SLOTS_PER_HOST: return set_count(f, value, 1, 1000000, &o->slots_per_host);
    case F_ELASTIC_TIMEOUT:
      return set_param_int(f, value, HVD_P_ELASTIC_TIMEOUT, &o->elastic_timeout);
    case F_RESET_LIMIT: return set_count(f, value, 0, 1000000, &o->reset_limit);
    case F_COOLDOWN: return OPTIONS_USAGE; /* two values: options_parse() reads them */
    case F_LAUNCHER: return set_launcher(o, value);
    case F_MPI: o->mpi = 1; return OPTIONS_RUN;
    case F_MPI_ARGS: return set_nonempty(f, value, &o->mpi_args);
    case F_GLOO: o->mpi = 0; return OPTIONS_RUN;
    case F_MAKE_SECRET: return make_secret();
    case F_VERBOSE: o->verbose = 1; return OPTIONS_RUN;
    case F_CHECK_BUILD: check_build_print(stdout); return OPTIONS_DONE;
    case F_VERSION: printf("hvdrun (hvd) %s\n", HVD_VERSION_STRING); return OPTIONS_DONE;
    case F_HELP: print_help(); return OPTIONS_DONE;
    case F_CONFIG_FILE: return OPTIONS_RUN; /* read before the other flags */
    case F_BINDING_ARGS: return set_nonempty(f, value, &o->binding_args);
    case F_PREFIX_TIMESTAMP: o->prefix_timestamp = 1; return OPTIONS_RUN;
    case F_NOTHING: return OPTIONS_RUN;
    case F_WARN: return warn(f);
    case F_NO_MEANING: return refuse(f);
  }
  return OPTIONS_USAGE;
}

/* The elastic flags, once all are read: defaults and how they fit. */
static options_result finish_elastic(hvdrun_options *o) {
  if (!o->elastic) {
    if (o->slots_per_host || o->elastic_timeout >= 0 || o->reset_limit >= 0 || o->cooldown_max > 0)
      return usage_error("%s",
                         "--slots-per-host, --elastic-timeout, --reset-limit and "
                         "--blacklist-cooldown-range are for elastic jobs (--min-np, --max-np, "
                         "--host-discovery-script)");
    return OPTIONS_RUN;
  }
  if (o->discovery && (o->hosts || o->hostfile))
    return usage_error("%s", "--host-discovery-script and -H/--hostfile exclude each other");
  if (!o->min_np) o->min_np = o->np;
  if (!o->max_np) o->max_np = HVDRUN_MAX_NP;
  if (o->min_np > o->np || o->np > o->max_np)
    return usage_error("elastic jobs need --min-np <= -np <= --max-np, not %d <= %d <= %d",
                       o->min_np, o->np, o->max_np);
  if (!o->slots_per_host) o->slots_per_host = 1;
  if (o->elastic_timeout < 0) return param_seconds(o, HVD_P_ELASTIC_TIMEOUT, &o->elastic_timeout);
  return OPTIONS_RUN;
}

/* --blacklist-cooldown-range MIN MAX: the flag's two values. */
static options_result set_cooldown(hvdrun_options *o, const char *min, const char *max) {
  long a, b;
  if (!min || !max || options_parse_int(min, 0, 86400, &a) < 0 ||
      options_parse_int(max, 0, 86400, &b) < 0 || a > b)
    return usage_error("--blacklist-cooldown-range needs two numbers of seconds MIN <= MAX "
                       "in 0..86400, not '%s %s'",
                       min ? min : "", max ? max : "");
  o->cooldown_min = (int)a;
  o->cooldown_max = (int)b;
  return OPTIONS_RUN;
}

/* What is left once the flags are read: the program, and the checks
 * that need every flag. */
static options_result finish(hvdrun_options *o, char **rest) {
  if (!rest[0]) return usage_error("%s", "no program to run");
  if (o->np == 0) return usage_error("%s", "-np N is required");
  if (o->hosts && o->hostfile) return usage_error("%s", "-H and --hostfile exclude each other");
  if (o->mpi_args && !o->mpi) return usage_error("%s", "--mpi-args needs --mpi");
  if (o->binding_args && !o->mpi) return usage_error("%s", "--binding-args needs --mpi");
  /* hvdrun waits as long as the ranks do: for ssh to connect, for an agent to answer. */
  if (param_seconds(o, HVD_P_START_TIMEOUT, &o->start_timeout) != OPTIONS_RUN) return OPTIONS_USAGE;
  if (param_seconds(o, HVD_P_AGENT_TIMEOUT_SECONDS, &o->agent_timeout) != OPTIONS_RUN)
    return OPTIONS_USAGE;
  if (!o->ssh_command) o->ssh_command = "ssh";
  o->argv = rest;
  return finish_elastic(o);
}

/* Walks the flags of a command line one by one. */
typedef struct {
  int argc, i;
  char **argv;
  int quiet; /* the first pass: find --config-file, leave errors to the second */
} cursor;

/* The next flag and its value(s), or *f NULL at the program or "--". */
static options_result next_flag(cursor *c, const flag **f, const char **value,
                                const char **value2) {
  *f = NULL;
  *value2 = NULL;
  if (c->i >= c->argc || c->argv[c->i][0] != '-') return OPTIONS_RUN;
  const char *arg = c->argv[c->i++];
  if (strcmp(arg, "--") == 0) return OPTIONS_RUN;
  const flag *found = flag_find(arg, value);
  if (!found) return c->quiet ? OPTIONS_USAGE : usage_error("unknown flag '%s'", arg);
  if (found->arg && !*value && found->id != F_NO_MEANING) {
    if (c->i >= c->argc) return c->quiet ? OPTIONS_USAGE : usage_error("%s needs a value", arg);
    *value = c->argv[c->i++];
  } else if (!found->arg && *value) {
    return c->quiet ? OPTIONS_USAGE : usage_error("%s takes no value", found->long_name);
  }
  if (found->id == F_COOLDOWN && c->i < c->argc) *value2 = c->argv[c->i++];
  *f = found;
  return OPTIONS_RUN;
}

/* The last --config-file of the command line, or NULL. */
static const char *find_config(int argc, char **argv) {
  cursor c = {argc, 1, argv, 1};
  const flag *f;
  const char *value, *value2, *path = NULL;
  while (next_flag(&c, &f, &value, &value2) == OPTIONS_RUN && f)
    if (f->id == F_CONFIG_FILE) path = value;
  return path;
}

/* The --config-file's settings, as the flags they stand for; a bad
 * value's message names the file, line and key (error_where). */
static options_result apply_config(hvdrun_options *o, const char *path) {
  if (config_file_read(path, &o->config) < 0) return OPTIONS_USAGE;
  for (size_t i = 0; i < o->config.n; i++) {
    const config_row *row = &o->config.rows[i];
    const char *inline_value;
    const flag *f = flag_find(row->flag, &inline_value);
    if (!f) { /* config_file.c's table names a flag this one lacks */
      fprintf(stderr, "hvdrun: %s: no flag %s\n", row->where, row->flag);
      return OPTIONS_USAGE;
    }
    error_where = row->where;
    options_result r = apply(o, f, row->value);
    error_where = NULL;
    if (r != OPTIONS_RUN) return r;
  }
  return OPTIONS_RUN;
}

void options_free(hvdrun_options *o) {
  free(o->nics_buf);
  o->nics_buf = NULL;
  config_rows_free(&o->config);
}

options_result options_parse(int argc, char **argv, hvdrun_options *o) {
  memset(o, 0, sizeof *o);
  o->elastic_timeout = o->reset_limit = -1;
  o->launch_fanout = LAUNCH_FANOUT_DEFAULT;
  const char *config = find_config(argc, argv);
  if (config && apply_config(o, config) != OPTIONS_RUN) return OPTIONS_USAGE;
  cursor c = {argc, 1, argv, 0};
  for (;;) {
    const flag *f;
    const char *value, *value2;
    options_result r = next_flag(&c, &f, &value, &value2);
    if (r != OPTIONS_RUN) return r;
    if (!f) break;
    r = f->id == F_COOLDOWN ? set_cooldown(o, value, value2) : apply(o, f, value);
    if (r != OPTIONS_RUN) return r;
  }
  return finish(o, argv + c.i);
}
