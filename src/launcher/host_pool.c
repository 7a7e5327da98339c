/*
 * host_pool.c -- the hosts of an elastic job (host_pool.h).
 */
#include "host_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "hosts.h"
#include "options.h"

#define SLOTS_MAX 1000000L
#define LINE_MAX_BYTES 1024

void host_pool_init(host_pool *p, int slots_per_host, long cool_min_s, long cool_max_s) {
  memset(p, 0, sizeof *p);
  p->slots_per_host = slots_per_host > 0 ? slots_per_host : 1;
  p->cool_min_ms = cool_min_s * 1000;
  p->cool_max_ms = cool_max_s * 1000;
  p->rand_state = (unsigned)hvd__now_ms() ^ 0x9e3779b9u;
}

void host_pool_free(host_pool *p) {
  for (int i = 0; i < p->n; i++) free(p->hosts[i].name);
  free(p->hosts);
  memset(p, 0, sizeof *p);
}

int host_pool_find(const host_pool *p, const char *name) {
  for (int i = 0; i < p->n; i++)
    if (strcasecmp(p->hosts[i].name, name) == 0) return i;
  return -1;
}

int host_pool_usable(const host_pool *p, int i, uint64_t now) {
  const pool_host *h = &p->hosts[i];
  return h->listed && h->slots > 0 && now >= h->cool_until;
}

long host_pool_slots(const host_pool *p, uint64_t now) {
  long total = 0;
  for (int i = 0; i < p->n; i++)
    if (host_pool_usable(p, i, now)) total += p->hosts[i].slots;
  return total;
}

uint64_t host_pool_next_return(const host_pool *p, uint64_t now) {
  uint64_t next = HVD__NEVER;
  for (int i = 0; i < p->n; i++) {
    const pool_host *h = &p->hosts[i];
    if (h->listed && h->cool_until > now && h->cool_until < next) next = h->cool_until;
  }
  return next;
}

/* ---- a listing ---- */

typedef struct {
  char *name;
  int slots;
} listed_host;

typedef struct {
  listed_host *hosts;
  int n, cap;
} listing;

static void listing_free(listing *l) {
  for (int i = 0; i < l->n; i++) free(l->hosts[i].name);
  free(l->hosts);
}

/* Adds a host, or its slots to the same name listed before. */
static int listing_add(listing *l, const char *name, int slots, char *why, size_t cap) {
  for (int i = 0; i < l->n; i++) {
    if (strcasecmp(l->hosts[i].name, name) != 0) continue;
    l->hosts[i].slots = (int)(l->hosts[i].slots + slots > SLOTS_MAX ? SLOTS_MAX
                                                                     : l->hosts[i].slots + slots);
    return 0;
  }
  if (l->n == l->cap) {
    int grown = l->cap ? 2 * l->cap : 8;
    listed_host *h = realloc(l->hosts, (size_t)grown * sizeof *h);
    if (!h) return snprintf(why, cap, "out of memory"), -1;
    l->hosts = h;
    l->cap = grown;
  }
  if (!(l->hosts[l->n].name = strdup(name))) return snprintf(why, cap, "out of memory"), -1;
  l->hosts[l->n++].slots = slots;
  return 0;
}

/* One line of output: "host", "host:N", "[v6]:N"; blank and '#' lines
 * add nothing. */
static int parse_line(char *line, int default_slots, listing *l, char *why, size_t cap) {
  char *hash = strchr(line, '#'), *host, *slots;
  if (hash) *hash = '\0';
  char *start = line + strspn(line, " \t\r");
  char *end = start + strlen(start);
  while (end > start && strchr(" \t\r", end[-1])) *--end = '\0';
  if (!*start) return 0;
  if (strpbrk(start, " \t")) return snprintf(why, cap, "expected 'host:slots', got '%s'", start), -1;
  if (hosts_split_item(start, &host, &slots) < 0 || !hosts_name_ok(host))
    return snprintf(why, cap, "bad host '%.256s'", start), -1;
  long n = default_slots;
  if (slots && options_parse_int(slots, 1, SLOTS_MAX, &n) < 0)
    return snprintf(why, cap, "host '%.256s' has slots '%.32s': expected 1..%ld", host, slots,
                    SLOTS_MAX), -1;
  return listing_add(l, host, (int)n, why, cap);
}

static int parse(const char *text, size_t len, int default_slots, listing *l, char *why,
                 size_t cap) {
  char line[LINE_MAX_BYTES + 1];
  size_t at = 0;
  for (int no = 1; at < len; no++) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = (nl ? (size_t)(nl - text) : len) - at;
    char inner[512] = "";
    if (n > LINE_MAX_BYTES) return snprintf(why, cap, "line %d: longer than %d bytes", no,
                                            LINE_MAX_BYTES), -1;
    if (memchr(text + at, '\0', n)) return snprintf(why, cap, "line %d: a NUL byte", no), -1;
    memcpy(line, text + at, n);
    line[n] = '\0';
    if (parse_line(line, default_slots, l, inner, sizeof inner) < 0)
      return snprintf(why, cap, "line %d: %s", no, inner), -1;
    at += n + (nl != NULL);
  }
  return 0;
}

/* ---- applying it ---- */

static int add_host(host_pool *p, const char *name) {
  if (p->n == p->cap) {
    int grown = p->cap ? 2 * p->cap : 8;
    pool_host *h = realloc(p->hosts, (size_t)grown * sizeof *h);
    if (!h) return -1;
    p->hosts = h;
    p->cap = grown;
  }
  pool_host *h = &p->hosts[p->n];
  memset(h, 0, sizeof *h);
  if (!(h->name = strdup(name))) return -1;
  return p->n++;
}

/* What a host offers right now, for telling whether an update changed it. */
static int offer(const host_pool *p, int i, uint64_t now) {
  return host_pool_usable(p, i, now) ? p->hosts[i].slots : 0;
}

int host_pool_update(host_pool *p, const char *text, size_t len, uint64_t now, char *why,
                     size_t cap) {
  listing l = {NULL, 0, 0};
  int changed = 0;
  if (parse(text, len, p->slots_per_host, &l, why, cap) < 0) {
    listing_free(&l);
    return -1;
  }
  int before = p->n, *was = calloc((size_t)(p->n ? p->n : 1), sizeof *was);
  if (!was) {
    listing_free(&l);
    return snprintf(why, cap, "out of memory"), -1;
  }
  for (int i = 0; i < p->n; i++) {
    was[i] = offer(p, i, now);
    p->hosts[i].listed = 0;
  }
  for (int k = 0; k < l.n; k++) {
    int i = host_pool_find(p, l.hosts[k].name);
    if (i < 0 && (i = add_host(p, l.hosts[k].name)) < 0) {
      snprintf(why, cap, "out of memory");
      changed = -1;
      break;
    }
    p->hosts[i].listed = 1;
    p->hosts[i].slots = l.hosts[k].slots;
  }
  for (int i = 0; changed >= 0 && i < p->n; i++)
    if (offer(p, i, now) != (i < before ? was[i] : 0)) changed = 1;
  free(was);
  listing_free(&l);
  return changed;
}

int host_pool_failed(host_pool *p, const char *name, uint64_t now) {
  int i = host_pool_find(p, name);
  if (i < 0) return 0;
  pool_host *h = &p->hosts[i];
  if (++h->failures < HOST_POOL_FAILURES) return 0;
  h->failures = 0;
  h->blacklistings++;
  if (p->cool_min_ms <= 0 && p->cool_max_ms <= 0) {
    h->cool_until = HVD__NEVER;
    return 1;
  }
  long ms = p->cool_min_ms;
  for (int k = 1; k < h->blacklistings && ms < p->cool_max_ms; k++) ms *= 2;
  if (ms > p->cool_max_ms) ms = p->cool_max_ms;
  p->rand_state = p->rand_state * 1103515245u + 12345u;
  ms += (long)((p->rand_state >> 16) % (unsigned)(ms / 10 + 1));
  h->cool_until = now + (uint64_t)ms;
  return 1;
}
