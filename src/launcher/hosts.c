/*
 * hosts.c -- which machines the job runs on.
 *
 * hvdrun starts every rank on this machine for now.  -H and --hostfile
 * are accepted in horovodrun's syntax so job scripts keep working, and a
 * host that is not this machine is refused plainly rather than silently
 * run here instead.  Each entry is a host of its own, even when two name
 * this machine ("localhost:2,127.0.0.1:2" is two hosts of two ranks), so
 * that a job can emulate several hosts: the ranks' HOROVOD_LOCAL_* and
 * HOROVOD_CROSS_* values follow the list (place.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "options.h"
#include "place.h"

#define SLOTS_MAX 1000000L

/* The hosts' slots, in the order given. */
typedef struct {
  long *slots;
  int n, cap;
  long total;
} host_list;

static int host_is_local(const char *name) {
  char self[256];
  if (strcasecmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 ||
      strcmp(name, "::1") == 0)
    return 1;
  if (gethostname(self, sizeof self) != 0) return 0;
  self[sizeof self - 1] = '\0';
  return strcasecmp(name, self) == 0;
}

static int append(host_list *l, long n) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    long *p = realloc(l->slots, (size_t)cap * sizeof *p);
    if (!p) {
      fprintf(stderr, "hvdrun: out of memory\n");
      return -1;
    }
    l->slots = p, l->cap = cap;
  }
  l->slots[l->n++] = n;
  l->total += n;
  return 0;
}

/* Adds a host with its slots (NULL: one).  `where` names the source in
 * messages ("-H", "hosts.txt:3"). */
static int add_host(const char *host, const char *slots, const char *where, host_list *l) {
  long n = 1;
  if (host[0] == '\0') {
    fprintf(stderr, "hvdrun: %s: empty host name\n", where);
    return -1;
  }
  if (!host_is_local(host)) {
    fprintf(stderr,
            "hvdrun: host '%s' is not this machine: launching on other hosts (ssh) is not "
            "supported yet\n",
            host);
    return -1;
  }
  if (slots && options_parse_int(slots, 1, SLOTS_MAX, &n) < 0) {
    fprintf(stderr, "hvdrun: %s: host '%s' has slots '%s': expected a number in 1..%ld\n",
            where, host, slots, SLOTS_MAX);
    return -1;
  }
  return append(l, n);
}

/* One -H item: "host", "host:N", "[v6addr]:N", or a bare "::1". */
static int add_item(char *item, host_list *l) {
  char *host = item, *slots = NULL;
  if (item[0] == '[') {
    char *close = strchr(item, ']');
    if (!close || (close[1] != '\0' && close[1] != ':')) {
      fprintf(stderr, "hvdrun: -H: malformed host '%s'\n", item);
      return -1;
    }
    *close = '\0';
    host = item + 1;
    if (close[1] == ':') slots = close + 2;
  } else if (!host_is_local(item)) { /* "::1" whole, else split at the last ':' */
    char *colon = strrchr(item, ':');
    if (colon) {
      *colon = '\0';
      slots = colon + 1;
    }
  }
  return add_host(host, slots, "-H", l);
}

static int parse_list(const char *list, host_list *l) {
  char *copy = strdup(list), *save = NULL;
  if (!copy) {
    fprintf(stderr, "hvdrun: out of memory\n");
    return -1;
  }
  int rc = 0;
  if (list[0] == '\0' || list[strlen(list) - 1] == ',' || strstr(list, ",,")) {
    fprintf(stderr, "hvdrun: -H: empty host in '%s'\n", list);
    rc = -1;
  }
  for (char *item = strtok_r(copy, ",", &save); rc == 0 && item; item = strtok_r(NULL, ",", &save))
    rc = add_item(item, l);
  free(copy);
  return rc;
}

/* One hostfile line: "host" or "host slots=N"; '#' starts a comment. */
static int parse_line(char *line, const char *where, host_list *l) {
  char *save = NULL, *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  char *host = strtok_r(line, " \t\r\n", &save);
  if (!host) return 0;
  char *slots = strtok_r(NULL, " \t\r\n", &save);
  if ((slots && strncmp(slots, "slots=", 6) != 0) || strtok_r(NULL, " \t\r\n", &save)) {
    fprintf(stderr, "hvdrun: %s: expected 'host slots=N'\n", where);
    return -1;
  }
  return add_host(host, slots ? slots + 6 : NULL, where, l);
}

static int parse_file(const char *path, host_list *l) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "hvdrun: cannot open hostfile '%s': %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL, where[512];
  size_t cap = 0;
  int rc = 0;
  for (long no = 1; rc == 0 && getline(&line, &cap, f) >= 0; no++) {
    snprintf(where, sizeof where, "%s:%ld", path, no);
    rc = parse_line(line, where, l);
  }
  free(line);
  fclose(f);
  return rc;
}

/* The hosts -H or --hostfile name; neither is one host with np slots. */
static int load(const hvdrun_options *o, host_list *l) {
  if (!o->hosts && !o->hostfile) return append(l, o->np);
  if (o->hosts ? parse_list(o->hosts, l) : parse_file(o->hostfile, l)) return -1;
  if (l->total < o->np) {
    fprintf(stderr, "hvdrun: -np %d needs %d slots, but %s gives only %ld\n", o->np, o->np,
            o->hosts ? "-H" : o->hostfile, l->total);
    return -1;
  }
  return 0;
}

int hosts_place(const hvdrun_options *o, rank_place **places) {
  host_list l = {NULL, 0, 0, 0};
  *places = calloc((size_t)o->np, sizeof **places);
  int rc = *places ? load(o, &l) : -1;
  if (rc == 0 && place_ranks(l.slots, l.n, o->np, *places) < 0) {
    fprintf(stderr, "hvdrun: out of memory placing %d ranks\n", o->np);
    rc = -1;
  }
  if (!*places) fprintf(stderr, "hvdrun: out of memory\n");
  free(l.slots);
  if (rc < 0) {
    free(*places);
    *places = NULL;
  }
  return rc;
}
