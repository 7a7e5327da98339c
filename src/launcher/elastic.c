/*
 * elastic.c -- the decisions of hvdrun's elastic driver (elastic.h).
 */
#include "elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "place.h"

typedef elastic_worker worker;

static worker *workers(const elastic *e) { return e->w; }

void elastic_init(elastic *e, const elastic_config *cfg, const elastic_actions *act,
                  host_pool *pool) {
  memset(e, 0, sizeof *e);
  e->cfg = *cfg;
  e->act = *act;
  e->pool = pool;
  e->next_id = 0;
  e->target = cfg->np;
}

void elastic_free(elastic *e) {
  free(e->w);
  e->w = NULL;
  e->nw = e->capw = 0;
}

elastic_worker *elastic_worker_of(elastic *e, uint32_t id) {
  for (int i = 0; i < e->nw; i++)
    if (e->w[i].id == id) return &e->w[i];
  return NULL;
}

static worker *find(elastic *e, uint32_t id) { return elastic_worker_of(e, id); }

int elastic_count(const elastic *e, worker_state s) {
  int n = 0;
  for (int i = 0; i < e->nw; i++) n += workers(e)[i].state == s;
  return n;
}

static int alive(const worker *w) {
  return w->state == W_STARTING || w->state == W_WAITING || w->state == W_ACTIVE;
}

static int alive_count(const elastic *e) {
  int n = 0;
  for (int i = 0; i < e->nw; i++) n += alive(&workers(e)[i]);
  return n;
}

static void set_state(worker *w, worker_state s, uint64_t now) {
  w->state = s;
  w->back = 0;
  w->since = now;
}

static void stop(elastic *e, worker *w) {
  if (w->stopped) return;
  w->stopped = 1;
  e->act.stop(e->act.ctx, w->id);
}

static void end(elastic *e, int code, const char *why) {
  if (e->ended) return;
  e->ended = 1;
  /* Nothing of the job may be left running. */
  for (int i = 0; i < e->nw; i++) {
    worker *w = &workers(e)[i];
    if (alive(w) || w->state == W_LEAVING) stop(e, w);
  }
  e->act.end(e->act.ctx, code, why);
}

void elastic_end(elastic *e, int code, const char *why) { end(e, code, why); }

/* ---- starting and stopping workers ---- */

static worker *add_worker(elastic *e, int host, uint64_t now) {
  if (e->nw == e->capw) {
    int grown = e->capw ? 2 * e->capw : 16;
    worker *w = realloc(e->w, (size_t)grown * sizeof *w);
    if (!w) return NULL;
    e->w = w;
    e->capw = grown;
  }
  worker *w = &workers(e)[e->nw++];
  memset(w, 0, sizeof *w);
  w->id = e->next_id++;
  w->host = host;
  set_state(w, W_STARTING, now);
  return w;
}

static int alive_on(const elastic *e, int host) {
  int n = 0;
  for (int i = 0; i < e->nw; i++)
    n += alive(&workers(e)[i]) && workers(e)[i].host == host;
  return n;
}

/* Workers of hosts no longer usable leave: members at their next commit
 * (announced), the others at once.  Returns 1 if members were told. */
static int leave_unusable(elastic *e, uint64_t now) {
  int members = 0;
  for (int i = 0; i < e->nw; i++) {
    worker *w = &workers(e)[i];
    if (!alive(w) || host_pool_usable(e->pool, w->host, now)) continue;
    if (w->state == W_ACTIVE && !w->back) {
      members = 1; /* it takes part until the others come back */
    } else {
      if (w->state == W_WAITING || w->back)
        e->act.refuse(e->act.ctx, w->id, "its host was removed from the job");
      stop(e, w);
    }
    set_state(w, W_LEAVING, now);
  }
  return members;
}

/* Starts workers on usable hosts, in the pool's order, up to the target. */
static void fill(elastic *e, uint64_t now) {
  int total = alive_count(e);
  uint32_t *ids = malloc((size_t)(e->target > 0 ? e->target : 1) * sizeof *ids);
  if (!ids) return;
  for (int h = 0; h < e->pool->n && total < e->target; h++) {
    if (!host_pool_usable(e->pool, h, now)) continue;
    int room = e->pool->hosts[h].slots - alive_on(e, h), n = 0;
    for (; n < room && total < e->target && e->next_id < (uint32_t)e->cfg.max_workers;
         n++, total++) {
      worker *w = add_worker(e, h, now);
      if (!w) break;
      ids[n] = w->id;
    }
    if (n) e->act.start(e->act.ctx, h, ids, n);
  }
  free(ids);
}

static void announce(elastic *e, int added, int removed) {
  if (e->generation == 0) return; /* nobody to tell yet */
  e->act.announce(e->act.ctx, ++e->stamp, added, removed);
}

/* The hosts or the workers changed: fill again, tell the members. */
static void rebalance(elastic *e, uint64_t now) {
  e->slots_seen = host_pool_slots(e->pool, now);
  if (leave_unusable(e, now)) announce(e, 0, 1);
  fill(e, now);
}

/* ---- forming a job ---- */

static int by_place(const void *a, const void *b) {
  const elastic_member *x = a, *y = b;
  if (x->host != y->host) return x->host < y->host ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Ranks host by host in the pool's order; local and cross values as
 * place.c computes them for that many ranks per host. */
static int assign(elastic_member *m, int n) {
  qsort(m, (size_t)n, sizeof *m, by_place);
  long *slots = calloc((size_t)n, sizeof *slots);
  rank_place *places = calloc((size_t)n, sizeof *places);
  int hosts = 0, rc = slots && places ? 0 : -1;
  for (int i = 0; rc == 0 && i < n; i++) {
    if (i == 0 || m[i].host != m[i - 1].host) hosts++;
    slots[hosts - 1]++;
  }
  if (rc == 0) rc = place_ranks(slots, hosts, n, places);
  for (int i = 0; rc == 0 && i < n; i++)
    m[i] = (elastic_member){m[i].id, m[i].host, i, places[i].local_rank, places[i].local_size,
                            places[i].cross_rank, places[i].cross_size};
  free(slots);
  free(places);
  return rc;
}

/* Who would be in the next job, and whether anyone is still awaited. */
static int next_members(const elastic *e, elastic_member *m, int *awaited) {
  int n = 0;
  *awaited = 0;
  for (int i = 0; i < e->nw; i++) {
    const worker *w = &workers(e)[i];
    int present = w->state == W_WAITING || (w->state == W_ACTIVE && w->back);
    if (present && m) m[n] = (elastic_member){.id = w->id, .host = w->host};
    n += present;
    *awaited += (w->state == W_ACTIVE && !w->back) ||
                (e->generation == 0 && w->state == W_STARTING);
  }
  return n;
}

static void form(elastic *e, uint64_t now) {
  int awaited, n = next_members(e, NULL, &awaited);
  elastic_member *m = calloc((size_t)(n ? n : 1), sizeof *m);
  if (!m || next_members(e, m, &awaited) != n || assign(m, n) < 0) {
    free(m);
    end(e, 1, "out of memory forming the job");
    return;
  }
  e->generation++;
  for (int i = 0; i < n; i++) set_state(find(e, m[i].id), W_ACTIVE, now);
  /* Members of hosts that left and never came back: stopped now. */
  for (int i = 0; i < e->nw; i++)
    if (workers(e)[i].state == W_LEAVING) stop(e, &workers(e)[i]);
  e->forming_since = 0;
  e->act.form(e->act.ctx, e->generation, m, n);
  free(m);
}

/* Forms the next job when everyone awaited is there. */
static void try_form(elastic *e, uint64_t now) {
  int awaited, n = next_members(e, NULL, &awaited);
  if (e->ended || awaited || n == 0) return;
  if (e->generation > 0 && !e->forming_since) return; /* newcomers wait for a commit */
  if (n < e->cfg.min_np) return;                       /* tick() watches the timeout */
  if (e->generation > 0 && e->cfg.reset_limit >= 0 && e->generation > e->cfg.reset_limit) {
    char why[160];
    snprintf(why, sizeof why, "the job was re-formed %d times; --reset-limit is %d",
             e->generation, e->cfg.reset_limit);
    end(e, 1, why);
    return;
  }
  form(e, now);
}

/* ---- events ---- */

void elastic_hosts_changed(elastic *e, int changed, uint64_t now) {
  if (e->ended) return;
  if (!e->started) {
    if (host_pool_slots(e->pool, now) < e->cfg.min_np) return; /* tick() times out */
    e->started = 1;
    e->slots_seen = host_pool_slots(e->pool, now);
    fill(e, now);
    return;
  }
  if (!changed) return;
  e->target = e->cfg.max_np;
  rebalance(e, now);
  try_form(e, now);
}

void elastic_registered(elastic *e, uint32_t id, uint64_t now) {
  worker *w = find(e, id);
  if (e->ended) {
    e->act.refuse(e->act.ctx, id, "the job is over");
    return;
  }
  if (!w || !alive(w)) {
    e->act.refuse(e->act.ctx, id, !w ? "unknown worker"
                                     : w->state == W_LEAVING ? "its host was removed from the job"
                                                             : "it is no longer part of the job");
    if (w && w->state == W_LEAVING) stop(e, w);
    return;
  }
  if (w->state == W_STARTING) {
    set_state(w, W_WAITING, now);
    if (e->generation > 0 && !e->forming_since) announce(e, 1, 0);
  } else if (w->state == W_ACTIVE && !w->back) {
    w->back = 1;
    if (!e->forming_since) e->forming_since = now;
  }
  try_form(e, now);
}

void elastic_left(elastic *e, uint32_t id, uint64_t now) {
  worker *w = find(e, id);
  if (!w || e->ended) return;
  if (w->state == W_WAITING) set_state(w, W_STARTING, now); /* awaited again, for a while */
  if (w->state == W_ACTIVE) w->back = 0;
}

/* Once a job ran, some worker must still hold its state; else the job
 * ends (returns 0). */
static int state_left(elastic *e) {
  if (e->ended || e->generation == 0 || elastic_count(e, W_DONE) > 0) return !e->ended;
  for (int i = 0; i < e->nw; i++)
    if (e->w[i].state == W_ACTIVE || (e->w[i].state == W_LEAVING && !e->w[i].stopped))
      return 1;
  end(e, 1, "every worker that held the job's state was lost: there is nothing to go on from");
  return 0;
}

/* A worker that failed before it was ever a member (an import error, a
 * crash at start) blacklisted its host: before any job formed, when the
 * hosts left cannot meet --min-np, waiting --elastic-timeout for more
 * would only hide the failure.  Ends the job then (returns 1). */
static int failed_before_joining(elastic *e, const worker *w, int code, uint64_t now) {
  long slots = host_pool_slots(e->pool, now);
  if (e->generation > 0 || slots >= e->cfg.min_np) return 0;
  char why[200];
  snprintf(why, sizeof why, "worker %u failed before it joined a job (said above), and the "
           "hosts left have %ld slots, fewer than --min-np %d", w->id, slots, e->cfg.min_np);
  end(e, code, why);
  return 1;
}

void elastic_exited(elastic *e, uint32_t id, int code, uint64_t now) {
  worker *w = find(e, id);
  if (!w || w->state == W_DONE || w->state == W_GONE) return;
  int was = w->state, ok = code == 0;
  if (was == W_LEAVING) {
    set_state(w, W_GONE, now);
    if (state_left(e)) try_form(e, now);
    return;
  }
  if (ok && was == W_ACTIVE) {
    set_state(w, W_DONE, now);
    if (elastic_count(e, W_ACTIVE) == 0) end(e, 0, NULL); /* training finished */
    return;
  }
  if (ok) { /* finished before it joined a job (it does not use hvd, say): done too */
    set_state(w, W_DONE, now);
    if (alive_count(e) == 0)
      end(e, 0, NULL);
    else
      try_form(e, now);
    return;
  }
  set_state(w, W_GONE, now);
  if (e->ended) return;
  host_pool_failed(e->pool, e->pool->hosts[w->host].name, now);
  if ((was == W_STARTING || was == W_WAITING) && failed_before_joining(e, w, code, now)) return;
  if (!state_left(e)) return;
  e->target = e->cfg.max_np;
  rebalance(e, now);
  try_form(e, now);
}

void elastic_tick(elastic *e, uint64_t now) {
  if (e->ended) return;
  e->last_tick = now;
  if (e->started && host_pool_slots(e->pool, now) != e->slots_seen) { /* a cooldown ended */
    e->target = e->cfg.max_np;
    rebalance(e, now);
  }
  int enough = e->started ? alive_count(e) >= e->cfg.min_np
                          : host_pool_slots(e->pool, now) >= e->cfg.min_np;
  if (enough) {
    e->short_since = 0;
  } else if (!e->short_since) {
    e->short_since = now;
  } else if (now - e->short_since >= (uint64_t)e->cfg.elastic_timeout_ms) {
    char why[200];
    snprintf(why, sizeof why, "fewer than --min-np %d workers for longer than "
             "--elastic-timeout %ld s", e->cfg.min_np, e->cfg.elastic_timeout_ms / 1000);
    end(e, 1, why);
    return;
  }
  /* Those awaited too long are given up: members that do not come back,
   * workers that never reach the rendezvous. */
  for (int i = 0; i < e->nw; i++) {
    worker *w = &workers(e)[i];
    int late = (w->state == W_ACTIVE && !w->back && e->forming_since &&
                now - e->forming_since >= (uint64_t)e->cfg.start_timeout_ms) ||
               (w->state == W_STARTING && now - w->since >= (uint64_t)e->cfg.start_timeout_ms);
    if (!late) continue;
    stop(e, w);
    set_state(w, W_LEAVING, now); /* its exit, when it comes, is expected */
  }
  try_form(e, now);
}

uint64_t elastic_deadline(const elastic *e) {
  uint64_t next = HVD__NEVER;
  if (e->ended) return next;
  if (e->short_since) next = e->short_since + (uint64_t)e->cfg.elastic_timeout_ms;
  uint64_t back = host_pool_next_return(e->pool, e->last_tick);
  if (e->started && back < next) next = back;
  for (int i = 0; i < e->nw; i++) {
    const worker *w = &workers(e)[i];
    uint64_t due = HVD__NEVER;
    if (w->state == W_STARTING) due = w->since + (uint64_t)e->cfg.start_timeout_ms;
    if (w->state == W_ACTIVE && !w->back && e->forming_since)
      due = e->forming_since + (uint64_t)e->cfg.start_timeout_ms;
    if (due < next) next = due;
  }
  return next;
}
