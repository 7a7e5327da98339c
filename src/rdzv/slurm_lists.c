/*
 * slurm_lists.c -- expanding SLURM's compressed host lists and counts
 * (slurm_lists.h).
 *
 * A host list is items separated by commas outside brackets; an item is
 * text with bracket groups, each a comma-separated list of numbers and
 * ranges.  Expansion is recursive on the first group of an item, so the
 * names come out in SLURM's order.
 */
#include "slurm_lists.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rdzv.h"

#define NUMBER_DIGITS 18 /* fits a long */

typedef struct {
  const char *var, *text; /* for messages */
  hvd_hostlist *out;
  int cap;
} expansion;

static int bad_list(const expansion *x, const char *why) {
  return hvd__err(HVD_E_ENV, "%s='%s': %s", x->var, x->text, why);
}

static int add_name(expansion *x, const char *name) {
  if (!name[0]) return bad_list(x, "an empty host name");
  if (strlen(name) >= HVD_HOSTNAME_MAX) return bad_list(x, "a host name is too long");
  if (x->out->n == HVD_SLURM_LIST_MAX) return bad_list(x, "more than 65536 hosts");
  if (x->out->n == x->cap) {
    int grown = x->cap ? 2 * x->cap : 16;
    char **names = realloc(x->out->names, (size_t)grown * sizeof *names);
    if (!names) return hvd__err(HVD_E_NOMEM, "expanding %s", x->var);
    x->out->names = names;
    x->cap = grown;
  }
  if (!(x->out->names[x->out->n] = strdup(name)))
    return hvd__err(HVD_E_NOMEM, "expanding %s", x->var);
  x->out->n++;
  return 0;
}

/* A number of 1..NUMBER_DIGITS digits at *p; advances past it. */
static int number(const expansion *x, const char **p, long *value, int *width) {
  size_t n = strspn(*p, "0123456789");
  if (n == 0 || n > NUMBER_DIGITS) return bad_list(x, "a range needs numbers like 0-3 or 01-10");
  *value = strtol(*p, NULL, 10);
  *width = (int)n;
  *p += n;
  return 0;
}

static int expand(expansion *x, const char *item);

/* item is prefix[group]rest: every number of the group in turn. */
static int expand_group(expansion *x, const char *item, const char *open, const char *close) {
  size_t plen = (size_t)(open - item), rlen = strlen(close + 1);
  char *name = malloc(plen + NUMBER_DIGITS + rlen + 1);
  if (!name) return hvd__err(HVD_E_NOMEM, "expanding %s", x->var);
  memcpy(name, item, plen);
  int rc = 0;
  const char *p = open + 1;
  while (rc == 0 && p < close) {
    long lo = 0, hi;
    int width = 0, hi_width;
    rc = number(x, &p, &lo, &width);
    hi = lo;
    if (rc == 0 && *p == '-') {
      p++;
      rc = number(x, &p, &hi, &hi_width);
      if (rc == 0 && hi < lo) rc = bad_list(x, "a range goes down");
      if (rc == 0 && hi - lo >= HVD_SLURM_LIST_MAX) rc = bad_list(x, "more than 65536 hosts");
    }
    if (rc == 0 && *p != ',' && p != close) rc = bad_list(x, "a range needs numbers like 0-3");
    if (rc == 0 && *p == ',' && p + 1 == close) rc = bad_list(x, "an empty range");
    if (*p == ',') p++;
    for (long v = lo; rc == 0 && v <= hi; v++) {
      int len = snprintf(name + plen, NUMBER_DIGITS + 1, "%0*ld", width, v);
      memcpy(name + plen + len, close + 1, rlen + 1);
      rc = expand(x, name);
    }
  }
  free(name);
  return rc;
}

/* One item of the list, brackets and all. */
static int expand(expansion *x, const char *item) {
  const char *open = strchr(item, '['), *close = open ? strchr(open, ']') : NULL;
  if (!open) return strchr(item, ']') ? bad_list(x, "a ']' without '['") : add_name(x, item);
  if (!close) return bad_list(x, "a '[' without ']'");
  if (memchr(open + 1, '[', (size_t)(close - open - 1))) return bad_list(x, "nested brackets");
  if (close == open + 1) return bad_list(x, "empty brackets");
  return expand_group(x, item, open, close);
}

int hvd__slurm_hostlist(const char *var, const char *text, hvd_hostlist *out) {
  expansion x = {var, text, out, 0};
  memset(out, 0, sizeof *out);
  char *copy = strdup(text);
  if (!copy) return hvd__err(HVD_E_NOMEM, "expanding %s", var);
  int rc = 0, depth = 0;
  char *item = copy;
  for (char *p = copy; rc == 0; p++) { /* split at commas outside brackets */
    if (*p == '[') depth++;
    if (*p == ']') depth--;
    if ((*p == ',' && depth == 0) || *p == '\0') {
      int end = *p == '\0';
      *p = '\0';
      rc = expand(&x, item);
      item = p + 1;
      if (end) break;
    }
  }
  free(copy);
  if (rc == 0) {
    for (int i = 0; rc == 0 && i < out->n; i++)
      for (const char *c = out->names[i]; rc == 0 && *c; c++)
        if (!isgraph((unsigned char)*c)) rc = bad_list(&x, "a host name holds a blank");
  }
  if (rc < 0) hvd__slurm_hostlist_free(out);
  return rc;
}

void hvd__slurm_hostlist_free(hvd_hostlist *l) {
  for (int i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  memset(l, 0, sizeof *l);
}

/* A whole number in [min, max] at *p, advancing past it; -1 if none. */
static long count_at(const char **p, long min, long max) {
  if (!isdigit((unsigned char)**p)) return -1;
  errno = 0;
  char *end;
  long v = strtol(*p, &end, 10);
  if (errno || v < min || v > max) return -1;
  *p = end;
  return v;
}

int hvd__slurm_counts(const char *var, const char *text, int **counts, int *n) {
  int cap = 0, rc = 0;
  *counts = NULL;
  *n = 0;
  for (const char *p = text; rc == 0;) {
    long v = count_at(&p, 1, HVD_SLURM_COUNT_MAX), times = 1;
    if (v > 0 && strncmp(p, "(x", 2) == 0) {
      p += 2;
      times = count_at(&p, 1, HVD_SLURM_LIST_MAX);
      if (times < 0 || *p++ != ')') v = -1;
    }
    if (v < 0 || (*p != ',' && *p != '\0') || (*p == ',' && p[1] == '\0'))
      rc = hvd__err(HVD_E_ENV, "%s='%s': expected counts like 2(x3),1, each 1..%d", var, text,
                    HVD_SLURM_COUNT_MAX);
    else if (*n + times > HVD_SLURM_LIST_MAX)
      rc = hvd__err(HVD_E_ENV, "%s='%s': more than %d entries", var, text, HVD_SLURM_LIST_MAX);
    if (rc == 0 && *n + times > cap) {
      cap = (int)(*n + times) * 2;
      int *grown = realloc(*counts, (size_t)cap * sizeof *grown);
      if (!grown) rc = hvd__err(HVD_E_NOMEM, "expanding %s", var);
      else *counts = grown;
    }
    for (long k = 0; rc == 0 && k < times; k++) (*counts)[(*n)++] = (int)v;
    if (rc < 0 || *p++ == '\0') break;
  }
  if (rc < 0) {
    free(*counts);
    *counts = NULL;
    *n = 0;
  }
  return rc;
}
