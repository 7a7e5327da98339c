/*
 * host_pool.h -- the hosts an elastic job may use, as they come and go.
 *
 * hvdrun's elastic driver learns its hosts from --host-discovery-script,
 * run about once a second and at once after every failure, or from a
 * fixed -H / --hostfile list whose hosts can only be lost.  The script
 * prints one host per line: "host:slots", "[v6addr]:slots", or a bare
 * "host" that gets --slots-per-host slots (1 without it); blank lines
 * and '#' comments are skipped.
 *
 * A host whose workers keep failing -- HOST_POOL_FAILURES of them since it
 * was last blacklisted -- is blacklisted: for the rest of the job, or with
 * --blacklist-cooldown-range MIN MAX for MIN seconds the first time, twice
 * as long each further time, at most MAX (plus up to a tenth at random, so
 * that hosts that failed together come back one by one).  A blacklisted
 * host is usable again once its cooldown is over and discovery still
 * lists it.  One failure alone (a worker killed) leaves the host in use:
 * the driver starts a new worker there.
 *
 * The pool keeps every host it has seen, in the order first seen: ranks
 * are assigned host by host in that order, so the workers that survive a
 * change keep their order (Horovod's contract) and new hosts come last.
 */
#ifndef HVDRUN_HOST_POOL_H
#define HVDRUN_HOST_POOL_H

#include <stddef.h>
#include <stdint.h>

#define HOST_POOL_FAILURES 2

typedef struct {
  char *name;
  int slots;           /* as last listed */
  int listed;          /* in the latest listing */
  int failures;        /* workers of this host that failed since it was last blacklisted */
  int blacklistings;   /* times it was blacklisted */
  uint64_t cool_until; /* ms clock: blacklisted until then; 0 never was, HVD__NEVER for good */
} pool_host;

typedef struct {
  pool_host *hosts; /* in the order first seen */
  int n, cap;
  int slots_per_host;         /* for bare host names */
  long cool_min_ms, cool_max_ms; /* both 0: a blacklisted host never returns */
  unsigned rand_state;
} host_pool;

void host_pool_init(host_pool *p, int slots_per_host, long cool_min_s, long cool_max_s);
void host_pool_free(host_pool *p);

/* Replaces the listing with a discovery script's output (len bytes of
 * text).  Returns 1 when the usable hosts or their slots changed, 0 when
 * not, or -1 with why ("line 3: ...") when the output is malformed: the
 * listing is then kept as it was. */
int host_pool_update(host_pool *p, const char *text, size_t len, uint64_t now, char *why,
                     size_t cap);

/* A worker of host `name` failed at `now`: 1 if that blacklisted the
 * host (see above), else 0. */
int host_pool_failed(host_pool *p, const char *name, uint64_t now);

/* 1 if host i is listed and not blacklisted at `now`. */
int host_pool_usable(const host_pool *p, int i, uint64_t now);

/* The host named `name` (case-insensitive), or -1. */
int host_pool_find(const host_pool *p, const char *name);

/* Usable slots at `now`, over all hosts. */
long host_pool_slots(const host_pool *p, uint64_t now);

/* When the next blacklisted-but-listed host's cooldown ends, or
 * HVD__NEVER. */
uint64_t host_pool_next_return(const host_pool *p, uint64_t now);

#endif /* HVDRUN_HOST_POOL_H */
