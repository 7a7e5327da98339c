/*
 * elastic.h -- the decisions of hvdrun's elastic driver.
 *
 * An elastic job (hvdrun --min-np, --max-np, --host-discovery-script or a
 * fixed host list) runs workers that come and go.  This module decides
 * what happens; the event loop (job.c) tells it what happened and carries
 * out what it asks through the callbacks below.  It does no I/O and keeps
 * no time of its own, so every rule is testable alone (test_elastic.c).
 *
 * Workers have ids, never reused, and live through these states:
 *
 *   STARTING  started on a host; not yet at the rendezvous
 *   WAITING   at the rendezvous, not in a job yet
 *   ACTIVE    a member of the current job (generation)
 *   LEAVING   its host is gone or it is being stopped: not wanted any more
 *   DONE      exited with 0 (its training finished, or it never used hvd)
 *   GONE      exited otherwise, or stopped
 *
 * A job (generation) is formed from the workers at the rendezvous: the
 * first from all that were started, each next one from the members of the
 * last that are still alive (they come back after a failure or at the
 * commit after a host update) plus the new workers that arrived by then.
 * New workers that arrive while a job runs are announced to its members
 * (an update they see at their next commit), which then come back and
 * form a job with them.  So a lost worker never waits for new ones to
 * start, and new ones join at the others' next commit.
 *
 * Rules:
 *   - workers fill the usable hosts' slots in the pool's order, up to -np
 *     at first and up to --max-np after the first change of hosts or the
 *     first failure;
 *   - a worker that fails blacklists its host (host_pool.h); the host's
 *     other workers leave;
 *   - a job needs --min-np workers: with fewer, the driver waits for hosts
 *     for --elastic-timeout, then ends the job;
 *   - a member that does not come back within the start timeout while the
 *     others wait is stopped and the job formed without it;
 *   - more than --reset-limit new jobs after the first end it;
 *   - a worker that fails before the first job formed, leaving hosts too
 *     few for --min-np, ends it with its exit code (no waiting for more);
 *   - a worker that exits with 0 is done, also one that never joined a job
 *     (a program that does not use hvd); every worker done ends the job
 *     successfully.
 */
#ifndef HVDRUN_ELASTIC_H
#define HVDRUN_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "host_pool.h"

typedef enum { W_STARTING, W_WAITING, W_ACTIVE, W_LEAVING, W_DONE, W_GONE } worker_state;

typedef struct {
  uint32_t id;
  int host;       /* index in the pool */
  worker_state state;
  int back;       /* ACTIVE: came back to the rendezvous for the next job */
  uint64_t since; /* when it entered its state */
  int stopped;    /* asked to stop already */
} elastic_worker;

/* A member of a newly formed job, in rank order. */
typedef struct {
  uint32_t id;
  int host;
  int rank, local_rank, local_size, cross_rank, cross_size;
} elastic_member;

typedef struct {
  void *ctx;
  /* Start n workers with these ids on pool host `host`. */
  void (*start)(void *ctx, int host, const uint32_t *ids, int n);
  /* Stop a worker (SIGTERM, and the loop's usual escalation). */
  void (*stop)(void *ctx, uint32_t id);
  /* Tell the members of the current job that hosts changed. */
  void (*announce)(void *ctx, uint64_t stamp, int added, int removed);
  /* A job is formed: hand each member its place (n members, rank order). */
  void (*form)(void *ctx, int generation, const elastic_member *members, int n);
  /* A worker at the rendezvous is not wanted: refuse it, saying why. */
  void (*refuse)(void *ctx, uint32_t id, const char *why);
  /* The job is over: hvdrun exits with code (0: success), why said when
   * not 0. */
  void (*end)(void *ctx, int code, const char *why);
} elastic_actions;

typedef struct {
  int np, min_np, max_np;
  int max_workers;         /* workers a job may start over its life (ids 0..max-1) */
  long elastic_timeout_ms; /* --elastic-timeout */
  long start_timeout_ms;   /* how long members may take to come back */
  int reset_limit;         /* -1: none */
} elastic_config;

typedef struct {
  elastic_config cfg;
  elastic_actions act;
  host_pool *pool;         /* not owned */
  elastic_worker *w;
  int nw, capw;
  uint32_t next_id;
  int target;              /* workers wanted: np, then max_np */
  int generation;          /* jobs formed so far */
  uint64_t forming_since;  /* a member came back: waiting for the rest (0: not) */
  uint64_t short_since;    /* fewer than min_np usable since then (0: enough) */
  uint64_t stamp;          /* announcements made */
  long slots_seen;         /* usable slots at the last rebalance: a cooldown's end changes them */
  uint64_t last_tick;
  int started;             /* the first workers were started */
  int ended;
} elastic;

void elastic_init(elastic *e, const elastic_config *cfg, const elastic_actions *act,
                  host_pool *pool);
void elastic_free(elastic *e);

/* Discovery gave a (new) listing; changed as host_pool_update() said. */
void elastic_hosts_changed(elastic *e, int changed, uint64_t now);
/* A worker reached the rendezvous (authenticated as id). */
void elastic_registered(elastic *e, uint32_t id, uint64_t now);
/* A worker's connection to the rendezvous went before it was placed: it
 * is no longer there (if it lives, it comes back). */
void elastic_left(elastic *e, uint32_t id, uint64_t now);
/* A worker exited with code (as hvdrun passes it on: 128+signal, ...;
 * 0: success). */
void elastic_exited(elastic *e, uint32_t id, int code, uint64_t now);
/* Ends the job now (a misconfiguration found outside): stops every
 * worker, says end(code, why). */
void elastic_end(elastic *e, int code, const char *why);
/* Time passed: deadlines that fell due. */
void elastic_tick(elastic *e, uint64_t now);
/* When elastic_tick() has something to do next (HVD__NEVER: nothing). */
uint64_t elastic_deadline(const elastic *e);

/* The worker with this id, or NULL. */
elastic_worker *elastic_worker_of(elastic *e, uint32_t id);
/* Workers in a state. */
int elastic_count(const elastic *e, worker_state s);

#endif /* HVDRUN_ELASTIC_H */
