/*
 * env.c -- reading and validating the variables of env.h's table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "env.h"

const hvd_param hvd__params[HVD_P__COUNT] = {
#define HVD__PARAM_ROW(id, name, kind, def, min, max, doc) \
  [HVD_P_##id] = {name, HVD_PK_##kind, def, min, max, doc},
    HVD_PARAMS(HVD__PARAM_ROW)
#undef HVD__PARAM_ROW
};

static const char *const level_names[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR",
                                          "FATAL"};

const char *hvd__param_raw(hvd_param_id id) {
  const char *v = getenv(hvd__params[id].name);
  return (v && v[0]) ? v : NULL;
}

const char *hvd__level_name(int level) {
  if (level < 0 || level >= (int)HVD__ARRAY_LEN(level_names)) return "?";
  return level_names[level];
}

int hvd__parse_long(const char *name, const char *text, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
    return hvd__err(HVD_E_ENV, "%s='%s': expected an integer from %ld to %ld", name, text, min,
                    max);
  *out = v;
  return 0;
}

int hvd__param_int(hvd_param_id id, long *out) {
  const hvd_param *p = &hvd__params[id];
  const char *v = hvd__param_raw(id);
  return hvd__parse_long(p->name, v ? v : p->def, p->min, p->max, out);
}

int hvd__param_double(hvd_param_id id, double *out) {
  const hvd_param *p = &hvd__params[id];
  const char *v = hvd__param_raw(id);
  const char *text = v ? v : p->def;
  char *end;
  errno = 0;
  double x = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(x >= (double)p->min) ||
      !(x <= (double)p->max))
    return hvd__err(HVD_E_ENV, "%s='%s': expected a number from %ld to %ld", p->name, text,
                    p->min, p->max);
  *out = x;
  return 0;
}

int hvd__param_bool(hvd_param_id id, int *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  const hvd_param *p = &hvd__params[id];
  const char *v = hvd__param_raw(id);
  if (!v) v = p->def;
  for (size_t i = 0; i < HVD__ARRAY_LEN(yes); i++) {
    if (strcasecmp(v, yes[i]) == 0) return *out = 1, 0;
    if (strcasecmp(v, no[i]) == 0) return *out = 0, 0;
  }
  return hvd__err(HVD_E_ENV, "%s='%s': expected 0 or 1 (or true/false, yes/no, on/off)",
                  p->name, v);
}

int hvd__param_level(hvd_param_id id, int *out) {
  const hvd_param *p = &hvd__params[id];
  const char *v = hvd__param_raw(id);
  if (!v) v = p->def;
  for (size_t i = 0; i < HVD__ARRAY_LEN(level_names); i++)
    if (strcasecmp(v, level_names[i]) == 0) return *out = (int)i, 0;
  return hvd__err(HVD_E_ENV, "%s='%s': expected TRACE, DEBUG, INFO, WARNING, ERROR or FATAL",
                  p->name, v);
}

int hvd__parse_cores(hvd_param_id id, const char *text, int index, int *core, int *count) {
  const hvd_param *p = &hvd__params[id];
  *core = -1;
  *count = 0;
  for (const char *at = text; *at;) {
    char *end = (char *)at;
    long v = -1;
    errno = 0;
    if (*at >= '0' && *at <= '9') v = strtol(at, &end, 10);
    if (v < p->min || v > p->max || errno != 0 || (*end != ',' && *end != '\0') ||
        (*end == ',' && end[1] == '\0'))
      return hvd__err(HVD_E_ENV, "%s='%s': expected CPU numbers from %ld to %ld separated by "
                      "commas", p->name, text, p->min, p->max);
    if (*count == index) *core = (int)v;
    (*count)++;
    at = *end ? end + 1 : end;
  }
  return 0;
}

int hvd__param_cores(hvd_param_id id, int index, int *core, int *count) {
  const char *v = hvd__param_raw(id);
  return hvd__parse_cores(id, v ? v : hvd__params[id].def, index, core, count);
}
