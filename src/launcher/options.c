/*
 * options.c -- parsing hvdrun's command line.
 *
 * One table lists every flag with its help line, so the parser and
 * --help cannot drift apart.  Options end at the first argument that is
 * not a flag (the program) or at "--".  Every number is checked strictly:
 * digits only, in range, nothing trailing.
 */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

typedef enum {
  F_NP, F_HOSTS, F_HOSTFILE, F_START_TIMEOUT, F_GLOO_TIMEOUT, F_LOG_LEVEL,
  F_HIDE_TIMESTAMP, F_VERBOSE, F_VERSION, F_HELP
} flag_id;

typedef struct {
  flag_id id;
  const char *short_name; /* may be NULL */
  const char *long_name;
  const char *arg;        /* the value's name, NULL for a switch */
  const char *help;
} flag;

static const flag flags[] = {
    {F_NP, "-np", "--num-proc", "N", "number of processes (ranks) to start, 1..4096"},
    {F_HOSTS, "-H", "--hosts", "HOSTS",
     "comma-separated host:slots list; only this machine for now"},
    {F_HOSTFILE, NULL, "--hostfile", "FILE", "file with one 'host slots=N' per line"},
    {F_START_TIMEOUT, NULL, "--start-timeout", "SECONDS",
     "how long hvd_init() waits for all ranks (HOROVOD_START_TIMEOUT, default 30)"},
    {F_GLOO_TIMEOUT, NULL, "--gloo-timeout-seconds", "SECONDS",
     "how long a collective waits for a silent peer (HOROVOD_GLOO_TIMEOUT_SECONDS)"},
    {F_LOG_LEVEL, NULL, "--log-level", "LEVEL",
     "TRACE, DEBUG, INFO, WARNING, ERROR or FATAL (HOROVOD_LOG_LEVEL)"},
    {F_HIDE_TIMESTAMP, NULL, "--log-hide-timestamp", NULL,
     "leave timestamps out of hvd's log lines (HOROVOD_LOG_HIDE_TIME=1)"},
    {F_VERBOSE, NULL, "--verbose", NULL,
     "say what hvdrun does: rendezvous address, each start and exit"},
    {F_VERSION, "-v", "--version", NULL, "print hvdrun's version and exit"},
    {F_HELP, "-h", "--help", NULL, "print this help and exit"},
};

static const char usage_line[] = "usage: hvdrun -np N [-H localhost:N] [options] prog [args...]";

static void print_help(void) {
  printf("%s\n\nStarts N copies of prog as the ranks of one hvd job and forwards their\n"
         "output, prefixed [rank]<stdout>: or [rank]<stderr>:.\n\noptions:\n",
         usage_line);
  for (size_t i = 0; i < HVD__ARRAY_LEN(flags); i++) {
    const flag *f = &flags[i];
    char names[64];
    snprintf(names, sizeof names, "%s%s%s%s%s", f->short_name ? f->short_name : "",
             f->short_name ? ", " : "", f->long_name, f->arg ? " " : "", f->arg ? f->arg : "");
    printf("  %-32s %s\n", names, f->help);
  }
}

static options_result usage_error(const char *fmt, const char *what) {
  fprintf(stderr, "hvdrun: ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n%s\nTry 'hvdrun --help' for more information.\n", usage_line);
  return OPTIONS_USAGE;
}

/* Finds the flag `arg` names.  A long flag may carry its value after
 * '=' ("--num-proc=4"): *inline_value then points at it. */
static const flag *flag_find(const char *arg, const char **inline_value) {
  *inline_value = NULL;
  for (size_t i = 0; i < HVD__ARRAY_LEN(flags); i++) {
    const flag *f = &flags[i];
    size_t n = strlen(f->long_name);
    if ((f->short_name && strcmp(arg, f->short_name) == 0) || strcmp(arg, f->long_name) == 0)
      return f;
    if (strncmp(arg, f->long_name, n) == 0 && arg[n] == '=') {
      *inline_value = arg + n + 1;
      return f;
    }
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

static options_result set_seconds(const flag *f, const char *value, const char **out) {
  long v;
  if (options_parse_int(value, 1, 86400, &v) < 0)
    return usage_error("%s needs a whole number of seconds in 1..86400", f->long_name);
  *out = value;
  return OPTIONS_RUN;
}

static options_result set_level(hvdrun_options *o, const char *value) {
  static const char *const levels[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"};
  for (size_t i = 0; i < HVD__ARRAY_LEN(levels); i++) {
    if (strcasecmp(value, levels[i]) == 0) {
      snprintf(o->level_buf, sizeof o->level_buf, "%s", levels[i]);
      o->log_level = o->level_buf;
      return OPTIONS_RUN;
    }
  }
  return usage_error("--log-level must be TRACE, DEBUG, INFO, WARNING, ERROR or FATAL, not '%s'",
                     value);
}

static options_result set_np(hvdrun_options *o, const char *value) {
  long v;
  if (options_parse_int(value, 1, HVDRUN_MAX_NP, &v) < 0)
    return usage_error("-np needs a number of processes in 1..4096, not '%s'", value);
  o->np = (int)v;
  return OPTIONS_RUN;
}

/* Applies one flag; value is NULL for switches. */
static options_result apply(hvdrun_options *o, const flag *f, const char *value) {
  switch (f->id) {
    case F_NP: return set_np(o, value);
    case F_HOSTS: o->hosts = value; return OPTIONS_RUN;
    case F_HOSTFILE: o->hostfile = value; return OPTIONS_RUN;
    case F_START_TIMEOUT: return set_seconds(f, value, &o->start_timeout);
    case F_GLOO_TIMEOUT: return set_seconds(f, value, &o->gloo_timeout);
    case F_LOG_LEVEL: return set_level(o, value);
    case F_HIDE_TIMESTAMP: o->hide_timestamp = 1; return OPTIONS_RUN;
    case F_VERBOSE: o->verbose = 1; return OPTIONS_RUN;
    case F_VERSION: printf("hvdrun (hvd) %s\n", HVD_VERSION_STRING); return OPTIONS_DONE;
    case F_HELP: print_help(); return OPTIONS_DONE;
  }
  return OPTIONS_USAGE;
}

/* What is left once the flags are read: the program, and the checks
 * that need every flag. */
static options_result finish(hvdrun_options *o, char **rest) {
  if (!rest[0]) return usage_error("%s", "no program to run");
  if (o->np == 0) return usage_error("%s", "-np N is required");
  if (o->hosts && o->hostfile) return usage_error("%s", "-H and --hostfile exclude each other");
  o->argv = rest;
  return OPTIONS_RUN;
}

options_result options_parse(int argc, char **argv, hvdrun_options *o) {
  memset(o, 0, sizeof *o);
  int i = 1;
  while (i < argc && argv[i][0] == '-') {
    const char *arg = argv[i++], *value;
    if (strcmp(arg, "--") == 0) break;
    const flag *f = flag_find(arg, &value);
    if (!f) return usage_error("unknown flag '%s'", arg);
    if (f->arg && !value) {
      if (i >= argc) return usage_error("%s needs a value", arg);
      value = argv[i++];
    } else if (!f->arg && value) {
      return usage_error("%s takes no value", f->long_name);
    }
    options_result r = apply(o, f, value);
    if (r != OPTIONS_RUN) return r;
  }
  return finish(o, argv + i);
}
