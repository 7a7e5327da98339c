/*
 * options.h -- hvdrun's command line (horovodrun's flag names) and the
 * host list that goes with it.
 */
#ifndef HVDRUN_OPTIONS_H
#define HVDRUN_OPTIONS_H

#include <stddef.h>

#include "config_file.h"
#include "place.h"

#define HVDRUN_MAX_NP 4096

/* Exit status for a usage error (bad flag, bad value, unusable hosts). */
#define HVDRUN_EXIT_USAGE 2

/* Exit status when a host could not be reached, its agent failed, or
 * hvdrun lost contact with it. */
#define HVDRUN_EXIT_HOST 255

/* Room for one variable per flag (options.c checks that the table fits),
 * so recording a flag's variable cannot fail. */
#define HVDRUN_ENV_MAX 80

/* A HOROVOD_* variable a flag sets for every rank. */
typedef struct {
  const char *name;
  const char *value; /* into argv, a constant, or buf (so never copy the options) */
  char buf[24];      /* a value hvdrun computed, such as MB in bytes */
} hvdrun_env;

/* --launcher: how ranks on other hosts start.  AUTO is srun inside a SLURM
 * allocation (SLURM_JOB_ID and SLURM_JOB_NODELIST set), else ssh; hosts.c
 * resolves it. */
typedef enum { LAUNCHER_AUTO, LAUNCHER_SSH, LAUNCHER_SRUN, LAUNCHER_LOCAL } launcher_kind;

typedef struct {
  int np;                   /* -np: ranks to start */
  const char *hosts;        /* -H value, or NULL */
  const char *hostfile;     /* --hostfile value, or NULL */
  int verbose;              /* --verbose */
  int ssh_port;             /* -p: 0 for ssh's own choice */
  const char *ssh_identity; /* -i, or NULL */
  const char *ssh_command;  /* --ssh-command: words split on blanks, "ssh" by default */
  int ssh_this_host;        /* --ssh-this-host: this machine's ranks through it too */
  int launch_fanout;        /* --launch-fanout: sessions one process starts (launch_tree.h);
                               0: hvdrun starts every host's */
  const char *output_dir;   /* --output-filename, or NULL */
  const char *nics;         /* --network-interface(s), every one given, or NULL */
  int start_timeout;        /* seconds: --start-timeout, HOROVOD_START_TIMEOUT or 30 */
  int agent_timeout;        /* seconds: HOROVOD_AGENT_TIMEOUT_SECONDS or 4 */
  launcher_kind launcher;   /* --launcher */
  int mpi;                  /* --mpi: start the job through mpirun (--gloo: not) */
  const char *mpi_args;     /* --mpi-args: words for mpirun, split on blanks, or NULL */
  const char *binding_args; /* --binding-args: mpirun's binding instead of hvdrun's, or NULL */
  int prefix_timestamp;     /* --prefix-output-with-timestamp */
  /* Elastic training: any of --min-np, --max-np, --host-discovery-script. */
  int elastic;
  int min_np, max_np;    /* default -np and 4096 */
  const char *discovery; /* --host-discovery-script, or NULL: -H/--hostfile (or this machine) */
  int slots_per_host;    /* --slots-per-host: for bare host names (1) */
  int elastic_timeout;   /* seconds: --elastic-timeout, HOROVOD_ELASTIC_TIMEOUT or 600 */
  int reset_limit;       /* --reset-limit, or -1: none */
  int cooldown_min, cooldown_max; /* --blacklist-cooldown-range, seconds; 0 0: for good */
  char **argv;                    /* the program and its arguments (NULL-terminated) */
  hvdrun_env env[HVDRUN_ENV_MAX]; /* the variables the flags set, validated */
  size_t n_env;
  char *nics_buf;     /* owned: the names of repeated --network-interface flags */
  config_rows config; /* owned: the --config-file's settings, which env[] points into */
} hvdrun_options;

typedef enum {
  OPTIONS_RUN,  /* start the job */
  OPTIONS_DONE, /* --help or --version was printed: exit 0 */
  OPTIONS_USAGE /* an error was printed: exit HVDRUN_EXIT_USAGE */
} options_result;

/* Parses argv into *o, printing help, version or a "hvdrun: ..." usage
 * error itself.  With --config-file, the file's settings come first and
 * the command line's flags override them, wherever they stand.  Free the
 * result with options_free() (also after OPTIONS_DONE or OPTIONS_USAGE). */
options_result options_parse(int argc, char **argv, hvdrun_options *o);
void options_free(hvdrun_options *o);

/* A decimal integer in [min, max]: digits only (no sign, no spaces),
 * nothing trailing.  0 on success, -1 otherwise. */
int options_parse_int(const char *s, long min, long max, long *out);

/* The value a flag gave variable `name`, or NULL. */
const char *options_env(const hvdrun_options *o, const char *name);

#endif /* HVDRUN_OPTIONS_H */
