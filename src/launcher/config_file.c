/*
 * config_file.c -- reading horovodrun's YAML --config-file (config_file.h).
 *
 * libyaml loads the whole document (a file of settings is small); each
 * section's keys are then applied through options_apply_flag() as the
 * flags they stand for, so a value in the file passes the same checks
 * with the same messages as on the command line, prefixed with the file,
 * line and key.
 */
#include "config_file.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "common.h"

/* A value of the file that a flag kept (the options point into it). */
struct config_value {
  struct config_value *next;
  char text[];
};

/* One key of a section and the flag it stands for; a true/false key has
 * the switch in `flag` and its --no- twin in `off`. */
typedef struct {
  const char *section, *key, *flag, *off;
} config_key;

/* Horovod 0.28's keys (config_parser.py), in its order. */
static const config_key keys[] = {
    {"params", "fusion_threshold_mb", "--fusion-threshold-mb", NULL},
    {"params", "cycle_time_ms", "--cycle-time-ms", NULL},
    {"params", "cache_capacity", "--cache-capacity", NULL},
    {"params", "hierarchical_allreduce", "--hierarchical-allreduce", "--no-hierarchical-allreduce"},
    {"params", "hierarchical_allgather", "--hierarchical-allgather", "--no-hierarchical-allgather"},
    {"autotune", "enabled", "--autotune", "--no-autotune"},
    {"autotune", "log_file", "--autotune-log-file", NULL},
    {"autotune", "warmup_samples", "--autotune-warmup-samples", NULL},
    {"autotune", "steps_per_sample", "--autotune-steps-per-sample", NULL},
    {"autotune", "bayes_opt_max_samples", "--autotune-bayes-opt-max-samples", NULL},
    {"autotune", "gaussian_process_noise", "--autotune-gaussian-process-noise", NULL},
    {"timeline", "filename", "--timeline-filename", NULL},
    {"timeline", "mark_cycles", "--timeline-mark-cycles", "--no-timeline-mark-cycles"},
    {"stall_check", "enabled", "--stall-check", "--no-stall-check"},
    {"stall_check", "warning_time_seconds", "--stall-check-warning-time-seconds", NULL},
    {"stall_check", "shutdown_time_seconds", "--stall-check-shutdown-time-seconds", NULL},
    {"library_options", "mpi_threads_disable", "--mpi-threads-disable", "--no-mpi-threads-disable"},
    {"library_options", "num_nccl_streams", "--num-nccl-streams", NULL},
    {"library_options", "thread_affinity", "--thread-affinity", NULL},
    {"library_options", "gloo_timeout_seconds", "--gloo-timeout-seconds", NULL},
    {"logging", "level", "--log-level", NULL},
    {"logging", "with_timestamp", "--log-with-timestamp", "--log-without-timestamp"},
};

/* What is being read, for the messages. */
typedef struct {
  hvdrun_options *o;
  const char *path;
  yaml_document_t *doc;
} reader;

static options_result fail(const reader *r, const yaml_node_t *at, const char *fmt, ...)
    HVD__PRINTF(3, 4);
static options_result fail(const reader *r, const yaml_node_t *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hvdrun: %s: line %lu: ", r->path, (unsigned long)at->start_mark.line + 1);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return OPTIONS_USAGE;
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* YAML's null (an empty value, ~ or null): horovodrun skips such keys. */
static int is_null(const yaml_node_t *n) {
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
  const char *s = scalar(n);
  return !s[0] || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
}

/* YAML 1.1's booleans: 1, 0, or -1 when s is none. */
static int boolean(const char *s) {
  static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
  for (size_t i = 0; i < 3; i++) {
    if (strcasecmp(s, yes[i]) == 0) return 1;
    if (strcasecmp(s, no[i]) == 0) return 0;
  }
  return -1;
}

static const config_key *find_key(const char *section, const char *key) {
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(keys[i].section, section) == 0 && (!key || strcmp(keys[i].key, key) == 0))
      return &keys[i];
  return NULL;
}

/* A copy of s that lives as long as the options. */
static const char *keep(hvdrun_options *o, const char *s) {
  size_t n = strlen(s) + 1;
  struct config_value *v = malloc(sizeof *v + n);
  if (!v) return NULL;
  memcpy(v->text, s, n);
  v->next = o->config;
  o->config = v;
  return v->text;
}

static options_result apply_key(const reader *r, const char *section, const yaml_node_t *k,
                                const yaml_node_t *v) {
  char name[128], where[PATH_MAX + 160];
  snprintf(name, sizeof name, "%s.%s", section, scalar(k) ? scalar(k) : "?");
  const config_key *c = scalar(k) ? find_key(section, scalar(k)) : NULL;
  if (!c) return fail(r, k, "unknown key '%s'", name);
  if (is_null(v)) return OPTIONS_RUN;
  if (!scalar(v)) return fail(r, v, "%s needs one value", name);
  snprintf(where, sizeof where, "%s: line %lu: %s", r->path, (unsigned long)v->start_mark.line + 1,
           name);
  if (c->off) {
    int b = boolean(scalar(v));
    if (b < 0) return fail(r, v, "%s needs true or false, not '%s'", name, scalar(v));
    return options_apply_flag(r->o, b ? c->flag : c->off, NULL, where);
  }
  const char *value = keep(r->o, scalar(v));
  if (!value) return fail(r, v, "%s: out of memory", name);
  return options_apply_flag(r->o, c->flag, value, where);
}

static options_result apply_section(const reader *r, const yaml_node_t *k, const yaml_node_t *v) {
  const char *section = scalar(k);
  if (!section || !find_key(section, NULL))
    return fail(r, k, "unknown section '%s'", section ? section : "?");
  if (is_null(v)) return OPTIONS_RUN;
  if (v->type != YAML_MAPPING_NODE) return fail(r, v, "%s needs keys under it", section);
  for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
    options_result res = apply_key(r, section, yaml_document_get_node(r->doc, p->key),
                                   yaml_document_get_node(r->doc, p->value));
    if (res != OPTIONS_RUN) return res;
  }
  return OPTIONS_RUN;
}

/* controller: gloo or mpi, as --gloo or --mpi. */
static options_result apply_controller(const reader *r, const yaml_node_t *v) {
  char where[PATH_MAX + 64];
  const char *s = scalar(v);
  if (is_null(v)) return OPTIONS_RUN;
  if (!s || (strcasecmp(s, "gloo") != 0 && strcasecmp(s, "mpi") != 0))
    return fail(r, v, "controller must be gloo or mpi, not '%s'", s ? s : "?");
  snprintf(where, sizeof where, "%s: line %lu: controller", r->path,
           (unsigned long)v->start_mark.line + 1);
  return options_apply_flag(r->o, strcasecmp(s, "mpi") == 0 ? "--mpi" : "--gloo", NULL, where);
}

static options_result apply_document(const reader *r) {
  yaml_node_t *root = yaml_document_get_root_node(r->doc);
  if (!root || is_null(root)) return OPTIONS_RUN; /* an empty file */
  if (root->type != YAML_MAPPING_NODE)
    return fail(r, root, "%s", "not horovodrun's settings (controller:, params:, ...)");
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
    const char *name = scalar(k);
    options_result res = name && strcmp(name, "controller") == 0 ? apply_controller(r, v)
                                                                  : apply_section(r, k, v);
    if (res != OPTIONS_RUN) return res;
  }
  return OPTIONS_RUN;
}

options_result config_file_read(hvdrun_options *o, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "hvdrun: --config-file %s: %s\n", path, strerror(errno));
    return OPTIONS_USAGE;
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  options_result res = OPTIONS_USAGE;
  if (!yaml_parser_initialize(&parser)) {
    fprintf(stderr, "hvdrun: --config-file %s: out of memory\n", path);
    fclose(f);
    return res;
  }
  yaml_parser_set_input_file(&parser, f);
  if (!yaml_parser_load(&parser, &doc)) {
    fprintf(stderr, "hvdrun: %s: line %lu: %s\n", path,
            (unsigned long)parser.problem_mark.line + 1,
            parser.problem ? parser.problem : "not YAML");
  } else {
    reader r = {o, path, &doc};
    res = apply_document(&r);
    yaml_document_delete(&doc);
  }
  yaml_parser_delete(&parser);
  fclose(f);
  return res;
}

void config_file_free(struct config_value *values) {
  while (values) {
    struct config_value *next = values->next;
    free(values);
    values = next;
  }
}
