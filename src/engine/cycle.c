/*
 * cycle.c -- one negotiation cycle, run by whichever thread drives
 * (engine.c): this rank's part, the exchange, the responses run.
 *
 * This rank's part.  What was enqueued since the last cycle is taken from
 * the queue.  A tensor the response cache knows with exactly these
 * parameters is held under its cache id; any other becomes a full request.
 *
 * The fast path (Horovod's bit vector).  When no tensor is partly
 * negotiated (the pending table, the same on every rank, is empty) and no
 * rank has joined, the ranks allreduce one small vector with MIN: a byte
 * per cache id, 1 where this rank holds that tensor, and a flag byte, 0
 * where this rank needs the full exchange (new requests, shutdown, join,
 * a stall, a tensor held too long).  MIN of 0/1 bytes is an AND of the
 * holds and an OR of the needs.  If no rank needs more, the ids every rank
 * holds run at once, in id order, and the others stay held for the next
 * cycle: one allreduce of a few hundred bytes, no requests exchanged.
 * A small allreduce called in a loop rides in that exchange (rider.c):
 * its values travel with the vector and it is reduced there, one round
 * instead of two.
 *
 * The full exchange.  Otherwise (or when the table is not empty) every
 * rank's message is allgathered: its new requests, a bit for every cached
 * tensor it holds (which enters the pending table as that rank's
 * submission), its flags; negotiate.c decides from them.  A tensor held
 * longer than HELD_MAX_MS asks for it, so that the stall inspector,
 * which reads the table, sees tensors some ranks never submit.
 *
 * After responses run, the cache may have given an id to another tensor
 * (eviction) or new parameters to its tensor: an entry held under that
 * id goes back to the queue and is looked up afresh next cycle, so a
 * tensor leaving the cache is negotiated in full, never mistaken.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "engine_int.h"

/* A tensor held this long without every rank holding it goes through the
 * full exchange, where the stall inspector can see who is missing. */
#define HELD_MAX_MS 1000

/* The job's settings, as the timeline's "hvd_job" event: what hvd-report
 * needs to judge a run (the size for bus bandwidth, the fusion threshold,
 * the cycle time, the transport). */
void hvd__engine_timeline_job(hvd_engine *e) {
  if (!e->tl) return;
  const hvd_place *pl = &e->global->place;
  char args[512];
  snprintf(args, sizeof args,
           "{\"rank\":%d,\"size\":%d,\"local_size\":%d,\"cross_size\":%d,"
           "\"transport\":\"%s\",\"fusion_threshold\":%zu,\"cycle_time_ms\":%g,"
           "\"cache_capacity\":%u,\"hierarchical_allreduce\":%d,\"version\":\"%s\"}",
           e->rank, e->size, pl->local_size, pl->cross_size,
           e->global->xport ? e->global->xport->ops->name : "none", e->fusion_threshold,
           e->cycle_ms, (unsigned)hvd__cache_capacity(e->cache), e->global->hierarchical,
           HVD_VERSION_STRING);
  hvd__timeline_job(e->tl, args);
}

void hvd__engine_timeline_waits(hvd_engine *e) {
  struct { uint64_t start_us, end_us; } w[HVD_WAITS_MAX];
  if (!e->tl) return;
  pthread_mutex_lock(&e->core.lock);
  int n = e->nwaits;
  memcpy(w, e->waits, (size_t)n * sizeof w[0]);
  e->nwaits = 0;
  pthread_mutex_unlock(&e->core.lock);
  for (int i = 0; i < n; i++) hvd__timeline_wait(e->tl, w[i].start_us, w[i].end_us);
}

/* A timeline hvd_start/stop_timeline handed over replaces ours. */
static void switch_timeline(hvd_engine *e) {
  hvd_timeline *old = NULL;
  hvd__engine_timeline_waits(e);
  /* Set under the lock, which the driver took before this cycle: read
   * without it, a switch asked for since waits for the next cycle (which
   * it makes due at once, engine.c). */
  if (!atomic_load_explicit(&e->tl_swap, memory_order_relaxed)) return;
  pthread_mutex_lock(&e->core.lock);
  if (!e->tl_swap) {
    pthread_mutex_unlock(&e->core.lock);
    return;
  }
  old = e->tl;
  e->tl = e->tl_next;
  e->tl_next = NULL;
  e->tl_swap = 0;
  e->tl_done = e->tl_asked;
  e->tl_on = e->tl != NULL;
  e->nwaits = 0; /* they belong to the old one, written above */
  pthread_mutex_unlock(&e->core.lock);
  hvd__engine_timeline_job(e);
  hvd__timeline_close(old); /* complete before the caller goes on */
  pthread_mutex_lock(&e->core.lock);
  pthread_cond_broadcast(&e->core.cond);
  pthread_mutex_unlock(&e->core.lock);
}

/* ---- this rank's part ---- */

/* When this cycle began (read at the first use). */
static uint64_t cycle_us(hvd_engine *e) { return hvd__engine_clock_ns(&e->core) / 1000u; }

/* How long it waits is timed from here only with a timeline, which draws
 * it; else from the next cycle that finds it still held (needs_full), so
 * that one that runs in this cycle costs no clock. */
static void hold(hvd_engine *e, entry *en, uint32_t id) {
  e->core.held[id] = en;
  e->core.nheld++;
  en->held = id;
  en->held_cycle = e->cycle;
  en->held_us = e->tl ? cycle_us(e) : 0;
}

/* The queue the driver took: cached tensors are held, the others become
 * requests in *mine. */
static int take_queue(hvd_engine *e, entry *taken, hvd_msg *mine) {
  hvd__tuning_message(&e->tuning, mine);
  /* The cached ones are held; the others stay on the list, as requests. */
  size_t n = 0;
  for (entry **t = &taken; *t;) {
    entry *en = *t;
    int64_t id = e->fast.on ? hvd__cache_find(e->cache, &en->w.req) : -1;
    if (id < 0 || e->core.held[id]) {
      n++, t = &en->next;
      continue;
    }
    *t = en->next;
    en->next = NULL;
    hvd__unsent_add(&e->core, en); /* the table takes it by name */
    hold(e, en, (uint32_t)id);
  }
  mine->reqs = n ? malloc(n * sizeof *mine->reqs) : NULL;
  if (n && !mine->reqs) {
    pthread_mutex_lock(&e->core.lock); /* give them back: the engine breaks, and fails them */
    for (entry **t = &taken; *t; t = &(*t)->next) e->core.queue_tail = &(*t)->next;
    *e->core.queue_tail = e->core.queue;
    e->core.queue = taken;
    pthread_mutex_unlock(&e->core.lock);
    return hvd__err(HVD_E_NOMEM, "allocating %zu requests", n);
  }
  for (entry *en = taken, *next; en; en = next) {
    next = en->next;
    en->next = NULL;
    hvd__unsent_add(&e->core, en);
    mine->reqs[mine->nreq++] = en->w.req;
  }
  return 0;
}

/* 1 if this rank needs the full exchange this cycle. */
static int needs_full(hvd_engine *e, const hvd_msg *mine) {
  if (mine->nreq || mine->flags || mine->nfail) return 1;
  uint32_t used = hvd__cache_used(e->cache);
  for (uint32_t id = 0; e->core.nheld && id < used; id++) {
    entry *en = e->core.held[id];
    if (!en || en->held_cycle == e->cycle) continue; /* new: not held long */
    uint64_t now = cycle_us(e);
    if (!en->held_us) en->held_us = now;
    if (now - en->held_us > HELD_MAX_MS * 1000u) return 1;
  }
  return 0;
}

/* Whether this cycle may take the fast path: the same answer on every
 * rank, from state every rank shares. */
static int fast_possible(const hvd_engine *e) {
  return e->fast.on && hvd__cache_capacity(e->cache) > 0 && !e->table.head && !e->join.n;
}

/* ---- the fast path ---- */

/* The vector's MIN over every rank.  *full: some rank needs the full
 * exchange. */
static int fast_exchange(hvd_engine *e, int need, int *full) {
  size_t used = hvd__cache_used(e->cache), n = 1 + used;
  if (n > e->fast.cap) {
    uint8_t *v = realloc(e->fast.vec, n);
    if (!v) return hvd__err(HVD_E_NOMEM, "allocating a vector of %zu cache bits", used);
    e->fast.vec = v, e->fast.cap = n;
  }
  e->fast.vec[0] = need ? 0 : 1;
  for (size_t id = 0; id < used; id++) e->fast.vec[1 + id] = e->core.held[id] != NULL;
  hvd_ar_algo algo;
  int64_t rider = hvd__rider_id(e, &algo);
  if (rider >= 0) HVD__CHECK(hvd__rider_exchange(e, rider, algo, n));
  else HVD__CHECK(hvd__allreduce_small(e->global, e->fast.vec, n, HVD_UINT8, HVD_MIN));
  *full = e->fast.vec[0] == 0;
  return 0;
}

/* Every id every rank holds becomes a tensor every rank submitted. */
static int fast_submit(hvd_engine *e) {
  size_t used = hvd__cache_used(e->cache);
  if (hvd__rider_finish(e)) return 0;
  for (size_t id = 0; id < used; id++)
    if (e->fast.vec[1 + id]) {
      HVD__CHECK(hvd__negotiate_agreed(e, (uint32_t)id));
      HVD__BUMP(e->fast.tensors);
    }
  return 0;
}

/* ---- the full exchange ---- */

/* Allgathers every rank's encoded message and decodes them. */
static int exchange(hvd_engine *e, const hvd_msg *mine, hvd_msg *all) {
  uint8_t *buf = NULL, *gathered = NULL;
  size_t len = 0, *counts = calloc((size_t)e->size, sizeof *counts);
  int rc = counts ? hvd__msg_encode(mine, &buf, &len) : hvd__err(HVD_E_NOMEM, "counts");
  if (rc == 0)
    rc = hvd__allgather(e->global, buf, len, 1, (void **)&gathered, counts);
  size_t off = 0;
  for (int q = 0; rc == 0 && q < e->size; q++) {
    rc = hvd__msg_decode(gathered + off, counts[q], hvd__cache_capacity(e->cache), &all[q]);
    if (rc < 0) hvd__err_prefix(rc, "negotiation message from rank %d", q);
    off += counts[q];
  }
  free(buf);
  free(gathered);
  free(counts);
  return rc;
}

/* Every tensor this rank holds goes into its message as a cache bit. */
static int add_held_bits(hvd_engine *e, hvd_msg *mine) {
  uint32_t used = hvd__cache_used(e->cache);
  for (uint32_t id = 0; e->core.nheld && id < used; id++)
    if (e->core.held[id]) HVD__CHECK(hvd__msg_set_bit(mine, id));
  return 0;
}

/* blocked: this rank's HVD_MSG_BLOCKED, sent only here: a rank waiting on
 * tensors of the fast path must not cost every cycle a full exchange. */
static int full_exchange(hvd_engine *e, hvd_msg *mine, uint32_t blocked, response **rs,
                         int *nrs, int *stop) {
  hvd_msg *all = calloc((size_t)e->size, sizeof *all);
  if (!all) return hvd__err(HVD_E_NOMEM, "allocating %d messages", e->size);
  mine->flags |= blocked;
  int rc = add_held_bits(e, mine);
  if (rc == 0) rc = exchange(e, mine, all);
  if (rc == 0) rc = hvd__negotiate(e, all, rs, nrs, stop);
  if (rc == 0) hvd__desync_check(e, all, stop);
  for (int q = 0; q < e->size; q++) hvd__msg_free(&all[q]);
  free(all);
  return rc;
}

/* ---- the cycle ---- */

static int decide(hvd_engine *e, hvd_msg *mine, uint32_t blocked, response **rs, int *nrs,
                  int *stop) {
  int full = 1;
  if (fast_possible(e)) HVD__CHECK(fast_exchange(e, needs_full(e, mine), &full));
  if (full) {
    HVD__BUMP(e->fast.full_cycles);
    return full_exchange(e, mine, blocked, rs, nrs, stop);
  }
  HVD__CHECK(fast_submit(e));
  hvd__rider_learn(e);
  return hvd__negotiate_plan(e, rs, nrs);
}

/* The engine breaks: every entry this rank has fails with status and
 * why, those in negotiation's table too. */
static void break_engine(hvd_engine *e, int status, const char *why) {
  hvd__engine_break(&e->core, status, why);
  hvd__table_fail(e, status, why);
}

/* A response failed fatally: the engine breaks, and the responses
 * planned after it fail with the same reason. */
static void fail_all(hvd_engine *e, int rc, response *rest, int n) {
  char why[1024];
  snprintf(why, sizeof why, "%s", hvd_last_error());
  break_engine(e, rc, why);
  /* No more cycles here: the peers would wait for this rank's next
   * message until their deadline (a failed malloc, say, breaks no
   * connection), so tell them now (found by the fault sweep). */
  hvd__comm_abort(e->global, why);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < rest[i].n; k++)
      if (rest[i].items[k]->mine) {
        hvd__engine_fail_entry(&e->core, rest[i].items[k]->mine, rc, why);
        rest[i].items[k]->mine = NULL;
      }
}

int hvd__cycle(hvd_engine *e, entry *taken, uint32_t flags) {
  hvd_msg mine;
  response *rs = NULL;
  int nrs = 0, stop = 0, i = 0;
  memset(&mine, 0, sizeof mine);
  mine.flags = flags & ~(uint32_t)HVD_MSG_BLOCKED;
  switch_timeline(e);
  hvd__timeline_cycle(e->tl);
  int rc = take_queue(e, taken, &mine);
  if (rc == 0 && e->rank == 0) hvd__stall_inspect(e, &mine);
  if (rc == 0 && e->rank == 0) hvd__desync_inspect(e, &mine);
  if (rc == 0) rc = decide(e, &mine, flags & HVD_MSG_BLOCKED, &rs, &nrs, &stop);
  for (; rc == 0 && i < nrs; i++) rc = hvd__execute(e, &rs[i]);
  if (rc < 0) fail_all(e, rc, rs + i, nrs - i);
  hvd__responses_free(rs, nrs);
  hvd__msg_free(&mine);
  hvd__timeline_tick(e->tl);
  e->cycle++;
  if (rc < 0) return 1;
  if (stop) {
    char why[sizeof e->core.why];
    snprintf(why, sizeof why, "%s", e->core.why[0] ? e->core.why : "hvd_shutdown() was called");
    break_engine(e, stop, why);
    return 1;
  }
  return 0;
}
