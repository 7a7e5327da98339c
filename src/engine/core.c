/*
 * core.c -- the bottom of the engine (core.h): entries and handles from
 * enqueue to completion, failure and the engine breaking, the cycle's
 * clock, spare lists.  Every other file of the engine calls down to it;
 * it calls none of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/dispatch.h"
#include "core.h"
#include "device_ready.h"

/* ---- spare entries and handles (under lock) ---- */

/* How many of each are kept.  None under ASan: a use after the end must
 * meet freed memory there, not a recycled entry. */
#if defined(__SANITIZE_ADDRESS__)
#define SPARES_MAX 0
#else
#define SPARES_MAX 64
#endif

static void *spares_take(spare_list *s) {
  spare_link *x = s->head;
  if (x) s->head = x->next, s->n--;
  return x;
}

/* Keeps p, or frees it when SPARES_MAX are kept already. */
static void spares_keep(spare_list *s, void *p) {
  if (s->n >= SPARES_MAX) {
    free(p);
    return;
  }
  spare_link *x = p;
  x->next = s->head;
  s->head = x;
  s->n++;
}

static void spares_free(spare_list *s) {
  for (void *p; (p = spares_take(s));) free(p);
}

entry *hvd__entry_spare(hvd__core *c) { return spares_take(&c->spare_entries); }

/* What an entry owns besides itself. */
static void entry_clear(entry *en) {
  hvd__device_ready_free(en->w.ready);
  free(en->sendcounts);
  free(en->ranks);
  en->w.ready = NULL, en->sendcounts = NULL, en->ranks = NULL;
}

void hvd__entry_free(entry *en) {
  entry_clear(en);
  free(en);
}

/* ---- the core's life ---- */

void hvd__cond_init(pthread_cond_t *cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

void hvd__core_init(hvd__core *c) {
  pthread_mutex_init(&c->lock, NULL);
  hvd__cond_init(&c->cond);
  c->queue_tail = &c->queue;
}

void hvd__core_free(hvd__core *c) {
  spares_free(&c->spare_entries);
  spares_free(&c->spare_ops);
  for (uint32_t i = 0; i < c->nops; i++)
    if (c->ops[i]) free(c->ops[i]->msg), free(c->ops[i]);
  free(c->ops);
  free(c->gens);
  free(c->held);
  hvd__index_free(&c->inflight);
  hvd__index_free(&c->unsent);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->cond);
}

int hvd__core_held_alloc(hvd__core *c, uint32_t capacity) {
  free(c->held);
  c->nheld_cap = 0;
  c->held = calloc(capacity ? capacity : 1, sizeof *c->held);
  if (!c->held) return hvd__err(HVD_E_NOMEM, "allocating %u cache entries", (unsigned)capacity);
  c->nheld_cap = capacity;
  return 0;
}

/* ---- handles (under lock) ---- */

/* A handle is (epoch << 48) | (generation of its slot << 32) | (slot + 1):
 * the epoch tells the handles of this engine from those of an engine an
 * earlier hvd_init() started (api.c numbers them), the slot's generation
 * tells it from an earlier handle of the same slot. */
#define HANDLE_GEN_MASK 0xffffu

op *hvd__op_lookup(hvd__core *c, hvd_handle h) {
  if (h <= 0 || ((uint64_t)h >> 48) != c->epoch) return NULL;
  uint32_t slot = (uint32_t)((uint64_t)h & 0xffffffffu) - 1;
  uint32_t gen = (uint32_t)((uint64_t)h >> 32) & HANDLE_GEN_MASK;
  if (slot >= c->nops || !c->ops[slot] || c->gens[slot] != gen) return NULL;
  return c->ops[slot];
}

static op *op_alloc(hvd__core *c) {
  op *o = spares_take(&c->spare_ops);
  return o ? memset(o, 0, sizeof *o) : calloc(1, sizeof *o);
}

int hvd__op_new(hvd__core *c, op **out) {
  uint32_t slot = c->free_slot_hint;
  while (slot < c->nops && c->ops[slot]) slot++;
  if (slot == c->nops) {
    for (slot = 0; slot < c->nops && c->ops[slot]; slot++) {}
  }
  if (slot == c->nops) {
    uint32_t n = c->nops ? 2 * c->nops : 64;
    op **ops = realloc(c->ops, n * sizeof *ops);
    if (ops) c->ops = ops;
    uint32_t *gens = ops ? realloc(c->gens, n * sizeof *gens) : NULL;
    if (!ops || !gens) return hvd__err(HVD_E_NOMEM, "allocating %u handles", n);
    c->gens = gens;
    for (uint32_t i = c->nops; i < n; i++) c->ops[i] = NULL, c->gens[i] = 0;
    c->nops = n;
  }
  op *o = op_alloc(c);
  if (!o) return hvd__err(HVD_E_NOMEM, "allocating a handle");
  c->gens[slot] = (c->gens[slot] + 1) & HANDLE_GEN_MASK;
  o->id = (hvd_handle)(((uint64_t)c->epoch << 48) | ((uint64_t)c->gens[slot] << 32) |
                       (uint64_t)(slot + 1));
  c->ops[slot] = o;
  c->free_slot_hint = slot + 1;
  *out = o;
  return 0;
}

void hvd__op_release(hvd__core *c, op *o) {
  uint32_t slot = (uint32_t)((uint64_t)o->id & 0xffffffffu) - 1;
  c->ops[slot] = NULL;
  if (slot < c->free_slot_hint) c->free_slot_hint = slot;
  free(o->msg);
  spares_keep(&c->spare_ops, o);
}

/* The strdup() of the message in finish_locked() fails when memory is
 * short, and then the code's description stands in (the fault sweep
 * printed "(null)" before). */
const char *hvd__op_msg(const op *o) { return o->msg ? o->msg : hvd_strerror(o->status); }

/* ---- completion ---- */

/* Under lock: finishes one entry (cleared already); the handle completes
 * with its last entry.  Returns the handle if that completed it and it has
 * a callback, which run_callback() then calls without the lock. */
static op *finish_locked(hvd__core *c, entry *en, int status, const char *msg) {
  hvd__index_remove(&c->inflight, &en->inflight);
  op *o = en->op;
  spares_keep(&c->spare_entries, en);
  if (status < 0 && o->status == 0) {
    o->status = status;
    o->msg = strdup(msg ? msg : "");
  }
  if (--o->remaining) return NULL;
  o->done = 1;
  HVD__BUMP(c->completions);
  if (o->cb) return o;
  pthread_cond_broadcast(&c->cond); /* its waiter */
  return NULL;
}

/* Without the lock: o's callback, then o released. */
static void run_callback(hvd__core *c, op *o) {
  /* The callback reads why from hvd_last_error(), as a waiter would. */
  if (o->status < 0) hvd__err(o->status, "%s", hvd__op_msg(o));
  o->cb(o->id, o->status, o->cb_arg);
  pthread_mutex_lock(&c->lock);
  hvd__op_release(c, o);
  pthread_mutex_unlock(&c->lock);
}

void hvd__engine_finish(hvd__core *c, entry *en, int status, const char *msg) {
  entry_clear(en);
  pthread_mutex_lock(&c->lock);
  op *o = finish_locked(c, en, status, msg);
  pthread_mutex_unlock(&c->lock);
  if (o) run_callback(c, o);
}

void hvd__engine_fail_entry(hvd__core *c, entry *en, int status, const char *msg) {
  char full[1400];
  snprintf(full, sizeof full, "%s '%s': %s", hvd__req_type_name(en->w.req.type),
           en->w.req.name, msg);
  hvd__engine_finish(c, en, status, full);
}

void hvd__engine_finish_later(hvd__core *c) {
  entry *en = c->finish_later;
  if (!en) return;
  c->finish_later = NULL;
  entry_clear(en);
  op *o = finish_locked(c, en, 0, NULL);
  if (o) {
    pthread_mutex_unlock(&c->lock);
    run_callback(c, o);
    pthread_mutex_lock(&c->lock);
  }
}

/* ---- failure ---- */

void hvd__engine_break(hvd__core *c, int status, const char *msg) {
  char why[sizeof c->why];
  snprintf(why, sizeof why, "%s", msg); /* msg may be this thread's error buffer */
  pthread_mutex_lock(&c->lock);
  if (!c->broken) {
    c->broken = status;
    snprintf(c->why, sizeof c->why, "%s", why);
  }
  entry *queued = c->queue;
  c->queue = NULL;
  c->queue_tail = &c->queue;
  pthread_mutex_unlock(&c->lock);
  for (entry *en = queued, *next; en; en = next)
    next = en->next, hvd__engine_fail_entry(c, en, status, why);
  for (hvd_ilink *l = hvd__index_walk(&c->unsent, NULL), *next; l; l = next) {
    next = hvd__index_walk(&c->unsent, l);
    hvd__index_remove(&c->unsent, l);
    hvd__engine_fail_entry(c, HVD_CONTAINER_OF(l, entry, unsent), status, why);
  }
  for (uint32_t id = 0; c->held && id < c->nheld_cap; id++) c->held[id] = NULL;
  c->nheld = 0;
  pthread_mutex_lock(&c->lock);
  if (c->join_op) {
    c->join_op->status = status;
    c->join_op->msg = strdup(why);
    c->join_op->done = 1;
    c->join_op = NULL;
  }
  c->join_requested = 0;
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
}

void hvd__engine_join_done(hvd__core *c, int last) {
  pthread_mutex_lock(&c->lock);
  if (c->join_op) {
    c->join_op->value = last;
    c->join_op->done = 1;
    c->join_op = NULL;
  }
  c->join_requested = 0;
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
}

uint64_t hvd__engine_clock_ns(hvd__core *c) {
  if (!c->cycle_ns) c->cycle_ns = hvd__now_ns();
  return c->cycle_ns;
}

/* ---- this rank's entries not yet in the table ---- */

void hvd__unsent_add(hvd__core *c, entry *en) { hvd__index_add(&c->unsent, &en->unsent, en->key); }

void hvd__unsent_remove(hvd__core *c, entry *en) {
  hvd__index_remove(&c->unsent, &en->unsent);
  if (en->held >= 0) {
    c->held[en->held] = NULL;
    c->nheld--;
    en->held = -1;
  }
}

entry *hvd__unsent_take(hvd__core *c, const hvd_request *req) {
  uint64_t key = hvd__index_key(req->name, req->process_set);
  for (hvd_ilink *l = hvd__index_first(&c->unsent, key); l; l = hvd__index_next(&c->unsent, l)) {
    entry *en = HVD_CONTAINER_OF(l, entry, unsent);
    if (en->w.req.process_set != req->process_set || strcmp(en->w.req.name, req->name) != 0)
      continue;
    hvd__unsent_remove(c, en);
    return en;
  }
  return NULL;
}

void hvd__held_recheck(hvd__core *c, const hvd_cache *cache, int64_t id) {
  entry *en = id >= 0 ? c->held[id] : NULL;
  if (!en || hvd__request_equal(&en->w.req, hvd__cache_get(cache, (uint32_t)id))) return;
  hvd__unsent_remove(c, en); /* unholds it */
  pthread_mutex_lock(&c->lock); /* first in the queue: looked up afresh next cycle */
  en->next = c->queue;
  if (!c->queue) c->queue_tail = &en->next;
  c->queue = en;
  pthread_mutex_unlock(&c->lock);
}

/* ---- results ---- */

int hvd__gather(hvd_comm *comm, int type, const void *send, size_t count,
                const size_t *sendcounts, size_t esize, void **out, size_t *counts) {
  if (type == HVD_REQ_ALLTOALL)
    return hvd__coll_alltoall(comm, send, sendcounts, esize, out, counts);
  return hvd__coll_allgather(comm, send, count, esize, out, counts);
}

void hvd__gather_deliver(entry *en, void *out, const size_t *counts, int n) {
  *en->w.out = out;
  if (en->w.out_counts) memcpy(en->w.out_counts, counts, (size_t)n * sizeof *counts);
}

size_t hvd__counts_sum(const size_t *counts, int n) {
  size_t s = 0;
  for (int i = 0; i < n; i++) s = counts[i] > SIZE_MAX - s ? SIZE_MAX : s + counts[i];
  return s;
}
