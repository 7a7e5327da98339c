/*
 * config_file.c -- reading horovodrun's YAML --config-file (config_file.h).
 *
 * libyaml loads the whole document (a file of settings is small); each
 * section's keys become rows naming the flags they stand for.  This file
 * checks only what is YAML's (a mapping, one value, a boolean); the
 * values themselves are checked by options.c as the flags', so a value
 * in the file passes the same checks with the same messages as on the
 * command line, prefixed with the file, line and key.
 */
#include "config_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "common.h"

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
  const char *path;
  yaml_document_t *doc;
  config_rows *out;
} reader;

static int fail(const reader *r, const yaml_node_t *at, const char *fmt, ...) HVD__PRINTF(3, 4);
static int fail(const reader *r, const yaml_node_t *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hvdrun: %s: line %lu: ", r->path, (unsigned long)at->start_mark.line + 1);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return -1;
}

/* horovodrun ignores what it does not know; a misspelling should not
 * pass unseen, so hvdrun says what it leaves alone. */
static void ignore(const reader *r, const yaml_node_t *at, const char *what, const char *name) {
  fprintf(stderr, "hvdrun: warning: %s: line %lu: unknown %s '%s' ignored\n", r->path,
          (unsigned long)at->start_mark.line + 1, what, name);
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
  for (size_t i = 0; i < HVD__ARRAY_LEN(keys); i++)
    if (strcmp(keys[i].section, section) == 0 && (!key || strcmp(keys[i].key, key) == 0))
      return &keys[i];
  return NULL;
}

/* A row for flag: value (copied; NULL for a switch), where "FILE: line
 * N: name". */
static int add_row(const reader *r, const yaml_node_t *at, const char *name, const char *flag,
                   const char *value) {
  config_rows *out = r->out;
  if (out->n == out->cap) {
    size_t cap = out->cap ? 2 * out->cap : 16;
    config_row *rows = realloc(out->rows, cap * sizeof *rows);
    if (!rows) return fail(r, at, "%s: out of memory", name);
    out->rows = rows;
    out->cap = cap;
  }
  config_row *row = &out->rows[out->n];
  row->flag = flag;
  row->value = value ? strdup(value) : NULL;
  if (asprintf(&row->where, "%s: line %lu: %s", r->path, (unsigned long)at->start_mark.line + 1,
               name) < 0)
    row->where = NULL;
  if (!row->where || (value && !row->value)) {
    free(row->value);
    free(row->where);
    return fail(r, at, "%s: out of memory", name);
  }
  out->n++;
  return 0;
}

static int read_key(const reader *r, const char *section, const yaml_node_t *k,
                    const yaml_node_t *v) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", section, scalar(k) ? scalar(k) : "?");
  const config_key *c = scalar(k) ? find_key(section, scalar(k)) : NULL;
  if (!c) return ignore(r, k, "key", name), 0;
  if (is_null(v)) return 0;
  if (!scalar(v)) return fail(r, v, "%s needs one value", name);
  if (!c->off) return add_row(r, v, name, c->flag, scalar(v));
  int b = boolean(scalar(v));
  if (b < 0) return fail(r, v, "%s needs true or false, not '%s'", name, scalar(v));
  return add_row(r, v, name, b ? c->flag : c->off, NULL);
}

static int read_section(const reader *r, const yaml_node_t *k, const yaml_node_t *v) {
  const char *section = scalar(k);
  if (!section || !find_key(section, NULL))
    return ignore(r, k, "section", section ? section : "?"), 0;
  if (is_null(v)) return 0;
  if (v->type != YAML_MAPPING_NODE) return fail(r, v, "%s needs keys under it", section);
  for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++)
    if (read_key(r, section, yaml_document_get_node(r->doc, p->key),
                 yaml_document_get_node(r->doc, p->value)) < 0)
      return -1;
  return 0;
}

/* controller: gloo or mpi, as --gloo or --mpi. */
static int read_controller(const reader *r, const yaml_node_t *v) {
  const char *s = scalar(v);
  if (is_null(v)) return 0;
  if (!s || (strcasecmp(s, "gloo") != 0 && strcasecmp(s, "mpi") != 0))
    return fail(r, v, "controller must be gloo or mpi, not '%s'", s ? s : "?");
  return add_row(r, v, "controller", strcasecmp(s, "mpi") == 0 ? "--mpi" : "--gloo", NULL);
}

static int read_document(const reader *r) {
  yaml_node_t *root = yaml_document_get_root_node(r->doc);
  if (!root || is_null(root)) return 0; /* an empty file */
  if (root->type != YAML_MAPPING_NODE)
    return fail(r, root, "%s", "not horovodrun's settings (controller:, params:, ...)");
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
    const char *name = scalar(k);
    int rc = name && strcmp(name, "controller") == 0 ? read_controller(r, v)
                                                     : read_section(r, k, v);
    if (rc < 0) return -1;
  }
  return 0;
}

int config_file_read(const char *path, config_rows *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "hvdrun: --config-file %s: %s\n", path, strerror(errno));
    return -1;
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  int rc = -1;
  if (!yaml_parser_initialize(&parser)) {
    fprintf(stderr, "hvdrun: --config-file %s: out of memory\n", path);
    goto out_file;
  }
  yaml_parser_set_input_file(&parser, f);
  if (!yaml_parser_load(&parser, &doc)) {
    fprintf(stderr, "hvdrun: %s: line %lu: %s\n", path,
            (unsigned long)parser.problem_mark.line + 1,
            parser.problem ? parser.problem : "not YAML");
    goto out_parser;
  }
  reader r = {path, &doc, out};
  rc = read_document(&r);
  yaml_document_delete(&doc);
out_parser:
  yaml_parser_delete(&parser);
out_file:
  fclose(f);
  return rc;
}

void config_rows_free(config_rows *rows) {
  for (size_t i = 0; i < rows->n; i++) {
    free(rows->rows[i].value);
    free(rows->rows[i].where);
  }
  free(rows->rows);
  memset(rows, 0, sizeof *rows);
}
