/*
 * test_options.c -- hvdrun's command line (src/launcher/options.c) against
 * horovodrun 0.28's: every flag of horovodrun's parser (launch.py's
 * parse_args, written out here by hand) is accepted with its meaning --
 * the variable it sets for the ranks, or the option it sets in hvdrun --
 * accepted with one warning line that says it changes nothing here, or
 * refused in one line that says it has no meaning here; and
 * --config-file, horovodrun's YAML, with every key, overridden by the
 * command line, its mistakes named by file, line and key.  Nothing is
 * started: options_parse() alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "options.h"

/* What a flag's row checks: a HOROVOD_* (or other) variable's value, one
 * of hvdrun's own options (shown as text by option()), "refused" (exit 2
 * and "has no meaning here"), "warned" (runs, one line "changes nothing
 * here"), or "done" (printed something, exit 0). */
typedef struct {
  const char *args[6]; /* the flag and its value(s), then what it needs */
  const char *what;
  const char *want;
} flag_row;

/* horovodrun 0.28's flags, every name of each (launch.py's parse_args). */
static const flag_row rows[] = {
    {{"-v"}, "done", NULL},
    {{"--version"}, "done", NULL},
    {{"-np", "3"}, "np", "3"},
    {{"--num-proc", "3"}, "np", "3"},
    {{"-cb"}, "done", NULL},
    {{"--check-build"}, "done", NULL},
    {{"--disable-cache"}, "accepted", NULL},
    {{"--start-timeout", "7"}, "HOROVOD_START_TIMEOUT", "7"},
    {{"--network-interfaces", "lo,eth1"}, "HOROVOD_GLOO_IFACE", "lo,eth1"},
    {{"--network-interface", "lo", "--network-interface", "eth1"}, "HOROVOD_GLOO_IFACE", "lo,eth1"},
    {{"--network-interface", "lo"}, "nics", "lo"},
    {{"--network-interface", "lo", "--network-interfaces", "eth1,lo,eth2"}, "nics", "lo,eth1,eth2"},
    {{"--output-filename", "out"}, "output_dir", "out"},
    {{"--verbose"}, "verbose", "1"},
    {{"--config-file", "/dev/null"}, "accepted", NULL},
    {{"-p", "2222"}, "ssh_port", "2222"},
    {{"--ssh-port", "2222"}, "ssh_port", "2222"},
    {{"-i", "key"}, "ssh_identity", "key"},
    {{"--ssh-identity-file", "key"}, "ssh_identity", "key"},
    {{"--fusion-threshold-mb", "32"}, "HOROVOD_FUSION_THRESHOLD", "33554432"},
    {{"--cycle-time-ms", "2.5"}, "HOROVOD_CYCLE_TIME", "2.5"},
    {{"--cache-capacity", "64"}, "HOROVOD_CACHE_CAPACITY", "64"},
    {{"--hierarchical-allreduce"}, "HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
    {{"--no-hierarchical-allreduce"}, "HOROVOD_HIERARCHICAL_ALLREDUCE", "0"},
    {{"--hierarchical-allgather"}, "HOROVOD_HIERARCHICAL_ALLGATHER", "1"},
    {{"--no-hierarchical-allgather"}, "HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
    {{"--autotune"}, "HOROVOD_AUTOTUNE", "1"},
    {{"--no-autotune"}, "HOROVOD_AUTOTUNE", "0"},
    {{"--autotune-log-file", "t.csv"}, "HOROVOD_AUTOTUNE_LOG", "t.csv"},
    {{"--autotune-warmup-samples", "2"}, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "2"},
    {{"--autotune-steps-per-sample", "4"}, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "4"},
    {{"--autotune-bayes-opt-max-samples", "9"}, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "9"},
    {{"--autotune-gaussian-process-noise", "0.3"}, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
     "0.3"},
    {{"--min-np", "1"}, "min_np", "1"},
    {{"--min-num-proc", "1"}, "min_np", "1"},
    {{"--max-np", "5"}, "max_np", "5"},
    {{"--max-num-proc", "5"}, "max_np", "5"},
    {{"--slots-per-host", "4", "--min-np", "1"}, "slots_per_host", "4"},
    {{"--elastic-timeout", "60", "--min-np", "1"}, "elastic_timeout", "60"},
    {{"--reset-limit", "3", "--min-np", "1"}, "reset_limit", "3"},
    {{"--blacklist-cooldown-range", "10", "100", "--min-np", "1"}, "cooldown", "10 100"},
    {{"--timeline-filename", "t.json"}, "HOROVOD_TIMELINE", "t.json"},
    {{"--timeline-mark-cycles"}, "HOROVOD_TIMELINE_MARK_CYCLES", "1"},
    {{"--no-timeline-mark-cycles"}, "HOROVOD_TIMELINE_MARK_CYCLES", "0"},
    {{"--no-stall-check"}, "HOROVOD_STALL_CHECK_DISABLE", "1"},
    {{"--stall-check"}, "HOROVOD_STALL_CHECK_DISABLE", "0"},
    {{"--stall-check-warning-time-seconds", "9"}, "HOROVOD_STALL_CHECK_TIME_SECONDS", "9"},
    {{"--stall-check-shutdown-time-seconds", "99"}, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "99"},
    {{"--mpi-threads-disable"}, "warned", NULL},
    {{"--no-mpi-threads-disable"}, "accepted", NULL},
    {{"--mpi-args", "--mca x y", "--mpi"}, "mpi_args", "--mca x y"},
    {{"--tcp"}, "HOROVOD_SHM_DISABLE", "1"},
    {{"--launch-fanout", "0"}, "launch_fanout", "0"}, /* hvd's own from here */
    {{"--launch-fanout", "64"}, "launch_fanout", "64"},
    {{"-np", "2"}, "launch_fanout", "8"},
    {{"--binding-args", "--bind-to core", "--mpi"}, "binding_args", "--bind-to core"},
    {{"--num-nccl-streams", "2"}, "refused", NULL},
    {{"--thread-affinity", "1"}, "HOROVOD_THREAD_AFFINITY", "1"},
    {{"--thread-affinity", "3,0,2"}, "HOROVOD_THREAD_AFFINITY", "3,0,2"},
    {{"--gloo-timeout-seconds", "11"}, "HOROVOD_GLOO_TIMEOUT_SECONDS", "11"},
    {{"--log-level", "debug"}, "HOROVOD_LOG_LEVEL", "DEBUG"},
    {{"--log-with-timestamp"}, "HOROVOD_LOG_HIDE_TIME", "0"},
    {{"--log-without-timestamp"}, "HOROVOD_LOG_HIDE_TIME", "1"},
    {{"--log-hide-timestamp"}, "HOROVOD_LOG_HIDE_TIME", "1"},
    {{"--no-log-hide-timestamp"}, "HOROVOD_LOG_HIDE_TIME", "0"},
    {{"-prefix-timestamp"}, "prefix_timestamp", "1"},
    {{"--prefix-output-with-timestamp"}, "prefix_timestamp", "1"},
    {{"-H", "a:2,b:2"}, "hosts", "a:2,b:2"},
    {{"--hosts", "a:2,b:2"}, "hosts", "a:2,b:2"},
    {{"-hostfile", "hf"}, "hostfile", "hf"},
    {{"--hostfile", "hf"}, "hostfile", "hf"},
    {{"--host-discovery-script", "./d.sh"}, "discovery", "./d.sh"},
    {{"--gloo"}, "mpi", "0"},
    {{"--mpi"}, "mpi", "1"},
    {{"--jsrun"}, "refused", NULL},
    /* Horovod's torus allreduce (HOROVOD_TORUS_ALLREDUCE, NCCL only), as issue 29 lists it. */
    {{"--torus-allreduce"}, "refused", NULL},
    {{"--no-torus-allreduce"}, "accepted", NULL},
    {{"-h"}, "done", NULL},
    {{"--help"}, "done", NULL},
};

/* One of hvdrun's own options as text. */
static void option(const hvdrun_options *o, const char *name, char *buf, size_t cap) {
  const struct {
    const char *name;
    const char *s; /* a text option */
    long n;        /* a number, when s is NULL */
  } text[] = {
      {"hosts", o->hosts, 0},           {"hostfile", o->hostfile, 0},
      {"nics", o->nics, 0},             {"output_dir", o->output_dir, 0},
      {"ssh_identity", o->ssh_identity, 0}, {"discovery", o->discovery, 0},
      {"mpi_args", o->mpi_args, 0},     {"binding_args", o->binding_args, 0},
  }, num[] = {
      {"np", NULL, o->np},              {"verbose", NULL, o->verbose},
      {"ssh_port", NULL, o->ssh_port},  {"min_np", NULL, o->min_np},
      {"max_np", NULL, o->max_np},      {"slots_per_host", NULL, o->slots_per_host},
      {"elastic_timeout", NULL, o->elastic_timeout}, {"reset_limit", NULL, o->reset_limit},
      {"mpi", NULL, o->mpi},            {"prefix_timestamp", NULL, o->prefix_timestamp},
      {"launch_fanout", NULL, o->launch_fanout},
  };
  if (strcmp(name, "cooldown") == 0) {
    snprintf(buf, cap, "%d %d", o->cooldown_min, o->cooldown_max);
    return;
  }
  for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
    if (strcmp(text[i].name, name) != 0) continue;
    snprintf(buf, cap, "%s", text[i].s ? text[i].s : "(none)");
    return;
  }
  for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
    if (strcmp(num[i].name, name) != 0) continue;
    snprintf(buf, cap, "%ld", num[i].n);
    return;
  }
  fail_msg("no option %s", name);
}

/* options_parse() of "hvdrun ARGS" with its stdout and stderr caught:
 * what it printed on stderr goes to err. */
static options_result parse(char **argv, hvdrun_options *o, char *err, size_t cap) {
  int argc = 0;
  while (argv[argc]) argc++;
  fflush(stdout);
  fflush(stderr);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved_err = dup(2), saved_out = dup(1), null = open("/dev/null", O_WRONLY);
  dup2(fileno(tmp), 2);
  dup2(null, 1);
  options_result r = options_parse(argc, argv, o);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_err, 2);
  dup2(saved_out, 1);
  close(saved_err);
  close(saved_out);
  close(null);
  rewind(tmp);
  size_t n = fread(err, 1, cap - 1, tmp);
  err[n] = '\0';
  fclose(tmp);
  return r;
}

/* "hvdrun -np 2 ROW'S ARGS prog" into argv (the options point into it). */
static options_result parse_row(const flag_row *row, char *argv[16], hvdrun_options *o,
                                char *err, size_t cap) {
  int n = 0;
  const char *head[] = {"hvdrun", "-np", "2"};
  for (int i = 0; i < 3; i++) argv[n++] = (char *)head[i];
  for (int i = 0; i < 6 && row->args[i]; i++) argv[n++] = (char *)row->args[i];
  argv[n++] = "prog";
  argv[n] = NULL;
  return parse(argv, o, err, cap);
}

static void test_every_horovodrun_flag(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const flag_row *row = &rows[i];
    hvdrun_options o;
    char err[1024], got[256], *argv[16];
    options_result r = parse_row(row, argv, &o, err, sizeof err);
    print_message("%-40s -> %d %s\n", row->args[0], r, err);
    if (strcmp(row->what, "refused") == 0) {
      assert_int_equal(r, OPTIONS_USAGE);
      char want[128];
      snprintf(want, sizeof want, "hvdrun: %s has no meaning here: ", row->args[0]);
      assert_memory_equal(err, want, strlen(want));
      assert_non_null(strchr(err, '\n'));
      assert_string_equal(strchr(err, '\n'), "\n"); /* one line */
    } else if (strcmp(row->what, "warned") == 0) {
      assert_int_equal(r, OPTIONS_RUN);
      char want[128];
      snprintf(want, sizeof want, "hvdrun: warning: %s changes nothing here: ", row->args[0]);
      assert_memory_equal(err, want, strlen(want));
      assert_string_equal(strchr(err, '\n'), "\n"); /* one line */
    } else if (strcmp(row->what, "done") == 0) {
      assert_int_equal(r, OPTIONS_DONE);
    } else {
      assert_int_equal(r, OPTIONS_RUN);
      assert_string_equal(err, "");
      assert_string_equal(o.argv[0], "prog");
      if (strncmp(row->what, "HOROVOD_", 8) == 0) {
        assert_non_null(options_env(&o, row->what));
        assert_string_equal(options_env(&o, row->what), row->want);
      } else if (strcmp(row->what, "accepted") != 0) {
        option(&o, row->what, got, sizeof got);
        assert_string_equal(got, row->want);
      }
    }
    options_free(&o);
  }
}

/* The last of a switch and its --no- twin wins; values may follow '='. */
static void test_twins_and_inline_values(void **state) {
  (void)state;
  hvdrun_options o;
  char err[512];
  char *argv[] = {"hvdrun", "--num-proc=2", "--autotune", "--no-autotune", "--min-num-proc=1",
                  "-hostfile", "hf", "--network-interfaces=lo", "prog", NULL};
  assert_int_equal(parse(argv, &o, err, sizeof err), OPTIONS_RUN);
  assert_string_equal(options_env(&o, "HOROVOD_AUTOTUNE"), "0");
  assert_int_equal(o.min_np, 1);
  assert_string_equal(o.hostfile, "hf");
  assert_string_equal(o.nics, "lo");
  options_free(&o);
  char *bad[] = {"hvdrun", "-np", "1", "--binding-args", "x", "prog", NULL};
  assert_int_equal(parse(bad, &o, err, sizeof err), OPTIONS_USAGE);
  assert_non_null(strstr(err, "hvdrun: --binding-args needs --mpi\n"));
  options_free(&o);
}

/* ---- --config-file ---- */

static char config_path[64];

static void write_config(const char *text) {
  snprintf(config_path, sizeof config_path, "/tmp/hvd_test_options_%d.yaml", (int)getpid());
  FILE *f = fopen(config_path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* "hvdrun -np 2 --config-file FILE prog" with FILE holding text (removed
 * again once read). */
static options_result parse_file(const char *text, hvdrun_options *o, char *err, size_t cap) {
  char *argv[] = {"hvdrun", "-np", "2", "--config-file", config_path, "prog", NULL};
  write_config(text);
  options_result r = parse(argv, o, err, cap);
  unlink(config_path);
  return r;
}

/* Every key of horovodrun 0.28's config_parser.py, with what it sets. */
static const char every_key[] =
    "controller: gloo\n"
    "params:\n"
    "  fusion_threshold_mb: 32\n"
    "  cycle_time_ms: 2.5\n"
    "  cache_capacity: 512\n"
    "  hierarchical_allreduce: true\n"
    "  hierarchical_allgather: false\n"
    "autotune:\n"
    "  enabled: true\n"
    "  log_file: tune.csv\n"
    "  warmup_samples: 2\n"
    "  steps_per_sample: 5\n"
    "  bayes_opt_max_samples: 12\n"
    "  gaussian_process_noise: 0.5\n"
    "timeline:\n"
    "  filename: tl.json\n"
    "  mark_cycles: yes\n"
    "stall_check:\n"
    "  enabled: false\n"
    "  warning_time_seconds: 30\n"
    "  shutdown_time_seconds: 120\n"
    "library_options:\n"
    "  mpi_threads_disable: false\n"
    "  num_nccl_streams: ~\n"
    "  thread_affinity:\n"
    "  gloo_timeout_seconds: 45\n"
    "logging:\n"
    "  level: info\n"
    "  with_timestamp: false\n";

static const char *const every_key_env[][2] = {
    {"HOROVOD_FUSION_THRESHOLD", "33554432"},
    {"HOROVOD_CYCLE_TIME", "2.5"},
    {"HOROVOD_CACHE_CAPACITY", "512"},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
    {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
    {"HOROVOD_AUTOTUNE", "1"},
    {"HOROVOD_AUTOTUNE_LOG", "tune.csv"},
    {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "2"},
    {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "5"},
    {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "12"},
    {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.5"},
    {"HOROVOD_TIMELINE", "tl.json"},
    {"HOROVOD_TIMELINE_MARK_CYCLES", "1"},
    {"HOROVOD_STALL_CHECK_DISABLE", "1"},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "30"},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "120"},
    {"HOROVOD_GLOO_TIMEOUT_SECONDS", "45"},
    {"HOROVOD_LOG_LEVEL", "INFO"},
    {"HOROVOD_LOG_HIDE_TIME", "1"},
};

static void test_config_every_key(void **state) {
  (void)state;
  hvdrun_options o;
  char err[512];
  assert_int_equal(parse_file(every_key, &o, err, sizeof err), OPTIONS_RUN);
  assert_string_equal(err, "");
  for (size_t i = 0; i < sizeof every_key_env / sizeof every_key_env[0]; i++) {
    print_message("%s\n", every_key_env[i][0]);
    assert_non_null(options_env(&o, every_key_env[i][0]));
    assert_string_equal(options_env(&o, every_key_env[i][0]), every_key_env[i][1]);
  }
  assert_int_equal(o.n_env, sizeof every_key_env / sizeof every_key_env[0]);
  assert_int_equal(o.mpi, 0);
  options_free(&o);
}

/* The command line wins, whether its flags stand before or after the file. */
static void test_config_command_line_overrides(void **state) {
  (void)state;
  hvdrun_options o;
  char err[512];
  write_config("controller: mpi\nparams: {fusion_threshold_mb: 32, cycle_time_ms: 3}\n"
               "autotune:\n  enabled: true\nlogging: {level: error}\n");
  char *argv[] = {"hvdrun", "--fusion-threshold-mb", "1", "-np", "2", "--config-file",
                  config_path, "--no-autotune", "--gloo", "prog", NULL};
  assert_int_equal(parse(argv, &o, err, sizeof err), OPTIONS_RUN);
  assert_string_equal(options_env(&o, "HOROVOD_FUSION_THRESHOLD"), "1048576");
  assert_string_equal(options_env(&o, "HOROVOD_CYCLE_TIME"), "3");
  assert_string_equal(options_env(&o, "HOROVOD_AUTOTUNE"), "0");
  assert_string_equal(options_env(&o, "HOROVOD_LOG_LEVEL"), "ERROR");
  assert_int_equal(o.mpi, 0);
  options_free(&o);
  unlink(config_path);
}

/* Each mistake in the file: named by file, line and key, exit 2. */
static void test_config_mistakes(void **state) {
  (void)state;
  const char *cases[][2] = {
      {"params:\n  cycle_time_ms: 3\n  cache_capacity: -1\n",
       ": line 3: params.cache_capacity: --cache-capacity needs a whole number in 0..1048576, "
       "not '-1'\n"},
      {"library_options:\n  thread_affinity: 1,x\n",
       ": line 2: library_options.thread_affinity: --thread-affinity needs CPU numbers in "
       "0..1023 separated by commas (one per rank of a host), not '1,x'\n"},
      {"params:\n  cycle_time_ms: fast\n",
       ": line 2: params.cycle_time_ms: --cycle-time-ms needs a number like 2.5 in 0..10000, "
       "not 'fast'\n"},
      {"timeline:\n  mark_cycles: maybe\n",
       ": line 2: timeline.mark_cycles needs true or false, not 'maybe'\n"},
      {"library_options:\n  num_nccl_streams: 2\n",
       ": line 2: library_options.num_nccl_streams: --num-nccl-streams has no meaning here: "},
      {"controller: jsrun\n", ": line 1: controller must be gloo or mpi, not 'jsrun'\n"},
      {"params: [1, 2]\n", ": line 1: params needs keys under it\n"},
      {"params:\n  cache_capacity: [1]\n", ": line 2: params.cache_capacity needs one value\n"},
      {"params:\n  a: b\n c\n", ": line 3: "},
      {"- a list\n", ": line 1: not horovodrun's settings (controller:, params:, ...)\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hvdrun_options o;
    char err[1024], want[512];
    assert_int_equal(parse_file(cases[i][0], &o, err, sizeof err), OPTIONS_USAGE);
    snprintf(want, sizeof want, "hvdrun: %s%s", config_path, cases[i][1]);
    print_message("%s", err);
    assert_memory_equal(err, want, strlen(want));
    assert_null(strstr(err, "usage:")); /* the file's mistake, not the command line's */
    options_free(&o);
  }
  hvdrun_options o;
  char err[512];
  char *argv[] = {"hvdrun", "-np", "2", "--config-file", "/nonexistent.yaml", "prog", NULL};
  assert_int_equal(parse(argv, &o, err, sizeof err), OPTIONS_USAGE);
  assert_string_equal(err, "hvdrun: --config-file /nonexistent.yaml: No such file or directory\n");
  options_free(&o);
}

/* The values of the flags that set variables hvd_init() checks again:
 * the flag's own range (env.h's), the same message form. */
static void test_bad_values_of_table_flags(void **state) {
  (void)state;
  const char *cases[][3] = {
      {"--thread-affinity", "1,,2", "hvdrun: --thread-affinity needs CPU numbers in 0..1023 "
                                    "separated by commas (one per rank of a host), not '1,,2'\n"},
      {"--thread-affinity", "1024", "hvdrun: --thread-affinity needs CPU numbers in 0..1023 "
                                    "separated by commas (one per rank of a host), not '1024'\n"},
      {"--thread-affinity", "2,", "hvdrun: --thread-affinity needs CPU numbers in 0..1023 "
                                  "separated by commas (one per rank of a host), not '2,'\n"},
      {"--fusion-threshold-mb", "1048577", "hvdrun: --fusion-threshold-mb needs a whole number "
                                           "in 0..1048576, not '1048577'\n"},
      {"--start-timeout", "0", "hvdrun: --start-timeout needs a whole number of seconds in "
                               "1..86400, not '0'\n"},
      {"--cycle-time-ms", "10001", "hvdrun: --cycle-time-ms needs a number like 2.5 in "
                                   "0..10000, not '10001'\n"},
      {"--launch-fanout", "1", "hvdrun: --launch-fanout needs 0 (hvdrun starts every session) "
                               "or a number of sessions in 2..4096, not '1'\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hvdrun_options o;
    char err[1024];
    char *argv[] = {"hvdrun", "-np", "2", (char *)cases[i][0], (char *)cases[i][1], "prog", NULL};
    assert_int_equal(parse(argv, &o, err, sizeof err), OPTIONS_USAGE);
    print_message("%s", err);
    assert_memory_equal(err, cases[i][2], strlen(cases[i][2]));
    options_free(&o);
  }
}

/* horovodrun ignores keys and sections it does not know: so does hvdrun,
 * with a warning naming the file, line and key, and the rest applies. */
static void test_config_unknown_keys_warn(void **state) {
  (void)state;
  hvdrun_options o;
  char err[1024], want[1024];
  assert_int_equal(parse_file("params:\n  fusion_treshold_mb: 3\n  cycle_time_ms: 4\n"
                              "parms:\n  x: 1\nautotune: {enabled: true, speed: 11}\n",
                              &o, err, sizeof err),
                   OPTIONS_RUN);
  snprintf(want, sizeof want,
           "hvdrun: warning: %s: line 2: unknown key 'params.fusion_treshold_mb' ignored\n"
           "hvdrun: warning: %s: line 4: unknown section 'parms' ignored\n"
           "hvdrun: warning: %s: line 6: unknown key 'autotune.speed' ignored\n",
           config_path, config_path, config_path);
  assert_string_equal(err, want);
  assert_string_equal(options_env(&o, "HOROVOD_CYCLE_TIME"), "4");
  assert_string_equal(options_env(&o, "HOROVOD_AUTOTUNE"), "1");
  assert_int_equal(o.n_env, 2);
  options_free(&o);
}

/* The keys of the three flags that were refused before: two set their
 * variables, one warns (naming where it stands) and runs. */
static void test_config_library_options(void **state) {
  (void)state;
  hvdrun_options o;
  char err[1024], want[512];
  assert_int_equal(parse_file("params:\n  hierarchical_allgather: true\nlibrary_options:\n"
                              "  thread_affinity: 1\n  mpi_threads_disable: true\n",
                              &o, err, sizeof err),
                   OPTIONS_RUN);
  snprintf(want, sizeof want,
           "hvdrun: warning: %s: line 5: library_options.mpi_threads_disable: "
           "--mpi-threads-disable changes nothing here: ", config_path);
  assert_memory_equal(err, want, strlen(want));
  assert_string_equal(strchr(err, '\n'), "\n"); /* one line */
  assert_string_equal(options_env(&o, "HOROVOD_HIERARCHICAL_ALLGATHER"), "1");
  assert_string_equal(options_env(&o, "HOROVOD_THREAD_AFFINITY"), "1");
  options_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_horovodrun_flag),
      cmocka_unit_test(test_twins_and_inline_values),
      cmocka_unit_test(test_config_every_key),
      cmocka_unit_test(test_config_command_line_overrides),
      cmocka_unit_test(test_config_mistakes),
      cmocka_unit_test(test_bad_values_of_table_flags),
      cmocka_unit_test(test_config_unknown_keys_warn),
      cmocka_unit_test(test_config_library_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
