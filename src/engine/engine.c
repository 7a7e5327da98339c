/*
 * engine.c -- the engine's thread, the queue application threads feed,
 * and the handles they wait on.
 *
 * Every cycle the thread takes what was enqueued since the last one,
 * encodes it into this rank's message (a bit for each tensor the response
 * cache knows, a full request for the others), allgathers the messages,
 * and hands them to the negotiation, whose responses it then executes.
 * Cycles start HOROVOD_CYCLE_TIME apart, as in Horovod.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../coll/coll.h"
#include "../env.h"
#include "../hash.h"
#include "engine_int.h"


/* ---- handles (under lock) ---- */

/* A handle is (epoch << 48) | (generation of its slot << 32) | (slot + 1):
 * the epoch tells the handles of this engine from those of an engine an
 * earlier hvd_init() started (api.c numbers them), the slot's generation
 * tells it from an earlier handle of the same slot. */
#define HANDLE_GEN_MASK 0xffffu

static op *op_lookup(hvd_engine *e, hvd_handle h) {
  if (h <= 0 || ((uint64_t)h >> 48) != e->epoch) return NULL;
  uint32_t slot = (uint32_t)((uint64_t)h & 0xffffffffu) - 1;
  uint32_t gen = (uint32_t)((uint64_t)h >> 32) & HANDLE_GEN_MASK;
  if (slot >= e->nops || !e->ops[slot] || e->gens[slot] != gen) return NULL;
  return e->ops[slot];
}

void hvd__engine_set_epoch(hvd_engine *e, uint32_t epoch) {
  pthread_mutex_lock(&e->lock);
  e->epoch = epoch & 0x7fffu;
  pthread_mutex_unlock(&e->lock);
}

static int op_new(hvd_engine *e, op **out) {
  uint32_t slot = e->free_slot_hint;
  while (slot < e->nops && e->ops[slot]) slot++;
  if (slot == e->nops) {
    for (slot = 0; slot < e->nops && e->ops[slot]; slot++) {}
  }
  if (slot == e->nops) {
    uint32_t n = e->nops ? 2 * e->nops : 64;
    op **ops = realloc(e->ops, n * sizeof *ops);
    if (ops) e->ops = ops;
    uint32_t *gens = ops ? realloc(e->gens, n * sizeof *gens) : NULL;
    if (!ops || !gens) return hvd__err(HVD_E_NOMEM, "allocating %u handles", n);
    e->gens = gens;
    for (uint32_t i = e->nops; i < n; i++) e->ops[i] = NULL, e->gens[i] = 0;
    e->nops = n;
  }
  op *o = calloc(1, sizeof *o);
  if (!o) return hvd__err(HVD_E_NOMEM, "allocating a handle");
  e->gens[slot] = (e->gens[slot] + 1) & HANDLE_GEN_MASK;
  o->id = (hvd_handle)(((uint64_t)e->epoch << 48) | ((uint64_t)e->gens[slot] << 32) |
                       (uint64_t)(slot + 1));
  e->ops[slot] = o;
  e->free_slot_hint = slot + 1;
  *out = o;
  return 0;
}

static void op_release(hvd_engine *e, op *o) {
  uint32_t slot = (uint32_t)((uint64_t)o->id & 0xffffffffu) - 1;
  e->ops[slot] = NULL;
  if (slot < e->free_slot_hint) e->free_slot_hint = slot;
  free(o->msg);
  free(o);
}

/* ---- completion ---- */

static void entry_free(entry *en) {
  free(en->sendcounts);
  free(en->ranks);
  free(en);
}

static void inflight_remove(hvd_engine *e, entry *en) {
  for (entry **p = &e->inflight; *p; p = &(*p)->inflight)
    if (*p == en) {
      *p = en->inflight;
      return;
    }
}

/* Finishes one entry; the handle completes with its last entry.  Called
 * on the engine thread (or by stop, after it). */
void hvd__engine_finish(hvd_engine *e, entry *en, int status, const char *msg) {
  pthread_mutex_lock(&e->lock);
  inflight_remove(e, en);
  op *o = en->op;
  if (status < 0 && o->status == 0) {
    o->status = status;
    o->msg = strdup(msg ? msg : "");
  }
  int complete = --o->remaining == 0;
  if (complete) o->done = 1;
  hvd_callback cb = complete ? o->cb : NULL;
  pthread_mutex_unlock(&e->lock);
  entry_free(en);
  if (!complete) return;
  if (cb) {
    cb(o->id, o->status, o->cb_arg);
    pthread_mutex_lock(&e->lock);
    op_release(e, o);
    pthread_mutex_unlock(&e->lock);
  } else {
    pthread_mutex_lock(&e->lock);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
  }
}

/* Fails one entry: the message says which tensor it was, then why. */
void hvd__engine_fail_entry(hvd_engine *e, entry *en, int status, const char *msg) {
  char full[1400];
  snprintf(full, sizeof full, "%s '%s': %s", hvd__req_type_name(en->w.req.type),
           en->w.req.name, msg);
  hvd__engine_finish(e, en, status, full);
}

/* Fails every entry this rank still has with status, and marks the engine
 * broken so new work is refused (HVD_E_ABORTED) with the same reason. */
void hvd__engine_break(hvd_engine *e, int status, const char *msg) {
  char why[sizeof e->why];
  snprintf(why, sizeof why, "%s", msg); /* msg may be this thread's error buffer */
  pthread_mutex_lock(&e->lock);
  if (!e->broken) {
    e->broken = status;
    snprintf(e->why, sizeof e->why, "%s", why);
  }
  entry *queued = e->queue;
  e->queue = NULL;
  e->queue_tail = &e->queue;
  pthread_mutex_unlock(&e->lock);
  for (entry *en = queued, *next; en; en = next) next = en->next, hvd__engine_fail_entry(e, en, status, why);
  for (entry *en = e->unsent, *next; en; en = next) next = en->next, hvd__engine_fail_entry(e, en, status, why);
  e->unsent = NULL;
  for (pending *p = e->pending_head, *next; p; p = next) {
    next = p->next;
    if (p->mine) hvd__engine_fail_entry(e, p->mine, status, why);
    hvd__pending_free(p);
  }
  e->pending_head = NULL;
  e->pending_tail = &e->pending_head;
  pthread_mutex_lock(&e->lock);
  if (e->join_op) {
    e->join_op->status = status;
    e->join_op->msg = strdup(why);
    e->join_op->done = 1;
    e->join_op = NULL;
  }
  e->join_requested = 0;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
}

void hvd__engine_join_done(hvd_engine *e, int last) {
  pthread_mutex_lock(&e->lock);
  if (e->join_op) {
    e->join_op->value = last;
    e->join_op->done = 1;
    e->join_op = NULL;
  }
  e->join_requested = 0;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
}

/* ---- one cycle ---- */

/* This rank's message: a cache bit where the cache knows the tensor as
 * enqueued, else the full request. */
static int build_message(hvd_engine *e, hvd_msg *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_lock(&e->lock);
  entry *taken = e->queue;
  e->queue = NULL;
  e->queue_tail = &e->queue;
  if (e->stop_requested) m->flags |= HVD_MSG_SHUTDOWN;
  if (e->join_requested) m->flags |= HVD_MSG_JOINED;
  pthread_mutex_unlock(&e->lock);
  size_t n = 0;
  for (entry *en = taken; en; en = en->next) n++;
  m->reqs = n ? malloc(n * sizeof *m->reqs) : NULL;
  if (n && !m->reqs) return hvd__err(HVD_E_NOMEM, "allocating %zu requests", n);
  for (entry *en = taken, *next; en; en = next) {
    next = en->next;
    int64_t id = hvd__cache_find(e->cache, &en->w.req);
    if (id >= 0)
      HVD__CHECK(hvd__msg_set_bit(m, (uint32_t)id));
    else
      m->reqs[m->nreq++] = en->w.req;
    en->next = e->unsent; /* negotiation matches them by name */
    e->unsent = en;
  }
  if (e->rank == 0) hvd__stall_inspect(e, m);
  return 0;
}

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

/* A timeline hvd_start/stop_timeline handed over replaces ours. */
static void switch_timeline(hvd_engine *e) {
  hvd_timeline *old = NULL;
  pthread_mutex_lock(&e->lock);
  if (e->tl_swap) {
    old = e->tl;
    e->tl = e->tl_next;
    e->tl_next = NULL;
    e->tl_swap = 0;
    e->tl_done = e->tl_asked;
  }
  pthread_mutex_unlock(&e->lock);
  hvd__timeline_close(old); /* complete before the caller goes on */
  pthread_mutex_lock(&e->lock);
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
}

int hvd__engine_set_timeline(hvd_engine *e, hvd_timeline *tl) {
  hvd_timeline *unused = NULL;
  pthread_mutex_lock(&e->lock);
  if (e->stopped) { /* no engine thread to hand it to: ours to close */
    unused = tl;
  } else {
    unused = e->tl_swap ? e->tl_next : NULL; /* asked for, never used */
    e->tl_next = tl;
    e->tl_swap = 1;
    uint64_t ticket = ++e->tl_asked;
    pthread_cond_signal(&e->work);
    while (e->tl_done < ticket && !e->stopped) pthread_cond_wait(&e->cond, &e->lock);
  }
  pthread_mutex_unlock(&e->lock);
  hvd__timeline_close(unused);
  return 0;
}

static int run_cycle(hvd_engine *e, int *shutdown) {
  hvd_msg mine, *all = calloc((size_t)e->size, sizeof *all);
  response *rs = NULL;
  int nrs = 0;
  if (!all) return hvd__err(HVD_E_NOMEM, "allocating %d messages", e->size);
  switch_timeline(e);
  hvd__timeline_cycle(e->tl);
  int rc = build_message(e, &mine);
  if (rc == 0) rc = exchange(e, &mine, all);
  if (rc == 0) rc = hvd__negotiate(e, all, &rs, &nrs, shutdown);
  for (int i = 0; rc == 0 && i < nrs; i++) rc = hvd__execute(e, &rs[i]);
  for (int i = 0; i < nrs; i++) free(rs[i].items);
  free(rs);
  hvd__msg_free(&mine);
  for (int q = 0; q < e->size; q++) hvd__msg_free(&all[q]);
  free(all);
  hvd__timeline_tick(e->tl);
  e->cycle++;
  return rc;
}

/* Waits for the next cycle.  An engine that had nothing to do starts the
 * next cycle as soon as work arrives instead: a lone blocking call then
 * costs one negotiation, not a cycle period.  While busy, cycles keep
 * their period, which is what lets a burst of tensors gather for fusion. */
static void wait_next_cycle(hvd_engine *e, uint64_t deadline_ns) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
  int idle = !e->pending_head && !e->unsent;
  pthread_mutex_lock(&e->lock);
  e->idle = idle;
  while (!e->stop_requested && !e->tl_swap && !(idle && (e->queue || e->join_requested)))
    if (pthread_cond_timedwait(&e->work, &e->lock, &ts) == ETIMEDOUT) break;
  e->idle = 0;
  pthread_mutex_unlock(&e->lock);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *engine_main(void *arg) {
  hvd_engine *e = arg;
  uint64_t period = (uint64_t)(e->cycle_ms * 1e6);
  hvd__log_set_rank(e->rank);
  for (;;) {
    uint64_t start = now_ns();
    int shutdown = 0;
    int rc = run_cycle(e, &shutdown);
    if (rc < 0) {
      hvd__engine_break(e, rc, hvd_last_error());
      break;
    }
    if (shutdown) {
      hvd__engine_break(e, HVD_E_ABORTED, e->why[0] ? e->why : "hvd_shutdown() was called");
      break;
    }
    wait_next_cycle(e, start + period);
  }
  pthread_mutex_lock(&e->lock);
  e->stopped = 1;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
  return NULL;
}

/* ---- start / stop ---- */

static int read_config(hvd_engine *e) {
  long fusion, cache_cap;
  int mark = 0;
  HVD__CHECK(hvd__param_double(HVD_P_CYCLE_TIME, &e->cycle_ms));
  HVD__CHECK(hvd__param_int(HVD_P_FUSION_THRESHOLD, &fusion));
  HVD__CHECK(hvd__param_int(HVD_P_CACHE_CAPACITY, &cache_cap));
  HVD__CHECK(hvd__param_bool(HVD_P_STALL_CHECK_DISABLE, &e->stall_disable));
  HVD__CHECK(hvd__param_int(HVD_P_STALL_CHECK_TIME_SECONDS, &e->stall_check_s));
  HVD__CHECK(hvd__param_int(HVD_P_STALL_SHUTDOWN_TIME_SECONDS, &e->stall_shutdown_s));
  HVD__CHECK(hvd__param_bool(HVD_P_TIMELINE_MARK_CYCLES, &mark));
  e->fusion_threshold = (size_t)fusion;
  HVD__CHECK(hvd__cache_create((uint32_t)cache_cap, &e->cache));
  const char *path = hvd__param_raw(HVD_P_TIMELINE);
  if (path && e->rank == 0) HVD__CHECK(hvd__timeline_open(path, mark, &e->tl));
  return 0;
}

/* Ranks must agree on what shapes decisions: rank 0's settings win.  The
 * allreduce algorithm and the hierarchical switch are among them: ranks
 * that ran different algorithms would exchange frames neither expects. */
static int agree_on_config(hvd_engine *e) {
  uint64_t v[4] = {(uint64_t)e->fusion_threshold, hvd__cache_capacity(e->cache),
                   (uint64_t)e->global->allreduce_algo, (uint64_t)e->global->hierarchical};
  HVD__CHECK(hvd__broadcast(e->global, v, sizeof v, 0));
  e->fusion_threshold = (size_t)v[0];
  e->global->allreduce_algo = (int)v[2];
  e->global->hierarchical = v[3] != 0;
  if (v[1] != hvd__cache_capacity(e->cache)) {
    hvd__cache_destroy(e->cache);
    e->cache = NULL;
    HVD__CHECK(hvd__cache_create((uint32_t)v[1], &e->cache));
  }
  return 0;
}

static void engine_free(hvd_engine *e) {
  hvd__cache_destroy(e->cache);
  hvd__timeline_close(e->tl);
  hvd__timeline_close(e->tl_next);
  hvd__psets_free(e);
  for (uint32_t i = 0; i < e->nops; i++)
    if (e->ops[i]) free(e->ops[i]->msg), free(e->ops[i]);
  free(e->ops);
  free(e->gens);
  free(e->joined);
  free(e->join_cycle);
  free(e->scratch);
  pthread_mutex_destroy(&e->lock);
  pthread_cond_destroy(&e->cond);
  pthread_cond_destroy(&e->work);
  free(e);
}

int hvd__engine_start(hvd_comm *global, hvd_engine **out) {
  hvd_engine *e = calloc(1, sizeof *e);
  if (!e) return hvd__err(HVD_E_NOMEM, "allocating the engine");
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cond, NULL);
  pthread_condattr_t attr; /* the cycle deadline is on CLOCK_MONOTONIC */
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&e->work, &attr);
  pthread_condattr_destroy(&attr);
  e->queue_tail = &e->queue;
  e->pending_tail = &e->pending_head;
  e->global = global;
  e->rank = global->rank;
  e->size = global->size;
  e->next_pset_id = 1;
  e->joined = calloc((size_t)e->size, 1);
  e->join_cycle = calloc((size_t)e->size, sizeof *e->join_cycle);
  int rc = (e->joined && e->join_cycle) ? read_config(e) : hvd__err(HVD_E_NOMEM, "engine");
  if (rc == 0) rc = agree_on_config(e);
  if (rc == 0) rc = hvd__hier_setup(global); /* after agreeing on the switch */
  if (rc == 0 && pthread_create(&e->thread, NULL, engine_main, e) != 0)
    rc = hvd__err(HVD_E_SYSTEM, "starting the engine thread");
  if (rc < 0) {
    engine_free(e);
    return rc;
  }
  *out = e;
  return 0;
}

void hvd__engine_stop(hvd_engine *e) {
  if (!e) return;
  pthread_mutex_lock(&e->lock);
  e->stop_requested = 1;
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->lock);
  pthread_join(e->thread, NULL);
}

void hvd__engine_free(hvd_engine *e) {
  if (e) engine_free(e);
}

/* ---- what application threads call ---- */

static int name_in_flight(hvd_engine *e, const hvd_request *r, uint64_t h) {
  for (entry *en = e->inflight; en; en = en->inflight)
    if (en->name_hash == h && en->w.req.process_set == r->process_set &&
        strcmp(en->w.req.name, r->name) == 0)
      return 1;
  return 0;
}

static int entry_new(const hvd_work *w, int size, entry **out) {
  entry *en = calloc(1, sizeof *en);
  if (!en) return hvd__err(HVD_E_NOMEM, "allocating a tensor entry");
  en->w = *w;
  en->name_hash = hvd__hash_str(w->req.name);
  if (w->req.type == HVD_REQ_ALLTOALL) {
    en->sendcounts = malloc((size_t)size * sizeof *en->sendcounts);
    if (en->sendcounts) memcpy(en->sendcounts, w->sendcounts, (size_t)size * sizeof(size_t));
  }
  if (w->req.type == HVD_REQ_PSET_ADD) {
    en->ranks = malloc((size_t)w->req.count * sizeof *en->ranks);
    if (en->ranks) memcpy(en->ranks, w->ranks, (size_t)w->req.count * sizeof *en->ranks);
  }
  if ((w->req.type == HVD_REQ_ALLTOALL && !en->sendcounts) ||
      (w->req.type == HVD_REQ_PSET_ADD && !en->ranks)) {
    entry_free(en);
    return hvd__err(HVD_E_NOMEM, "copying the counts of '%s'", w->req.name);
  }
  *out = en;
  return 0;
}

/* Under lock: the checks that need the engine's state. */
static int admit(hvd_engine *e, const hvd_work *works, int n) {
  if (e->broken || e->stopped)
    return hvd__err(HVD_E_ABORTED, "the engine stopped: %s", e->why);
  for (int i = 0; i < n; i++) {
    const hvd_request *r = &works[i].req;
    if (name_in_flight(e, r, hvd__hash_str(r->name)))
      return hvd__err(HVD_E_INVALID, "tensor '%s' is already in flight: wait for its handle "
                      "before enqueuing the name again", r->name);
    for (int j = 0; j < i; j++)
      if (strcmp(works[j].req.name, r->name) == 0)
        return hvd__err(HVD_E_INVALID, "tensor '%s' appears twice in one group", r->name);
  }
  return 0;
}

hvd_handle hvd__engine_enqueue(hvd_engine *e, const hvd_work *works, int n, hvd_callback cb,
                               void *arg) {
  entry **ens = calloc((size_t)n, sizeof *ens);
  int rc = ens ? 0 : hvd__err(HVD_E_NOMEM, "allocating %d entries", n);
  for (int i = 0; rc == 0 && i < n; i++) rc = entry_new(&works[i], e->size, &ens[i]);
  op *o = NULL;
  hvd_handle id = 0; /* read under the lock: with a callback, o may be gone after it */
  pthread_mutex_lock(&e->lock);
  if (rc == 0) rc = admit(e, works, n);
  if (rc == 0) rc = op_new(e, &o);
  if (rc == 0) {
    id = o->id;
    o->remaining = n;
    o->cb = cb;
    o->cb_arg = arg;
    for (int i = 0; i < n; i++) {
      ens[i]->op = o;
      *e->queue_tail = ens[i];
      e->queue_tail = &ens[i]->next;
      ens[i]->inflight = e->inflight;
      e->inflight = ens[i];
    }
    if (e->idle) pthread_cond_signal(&e->work);
  }
  pthread_mutex_unlock(&e->lock);
  if (rc < 0)
    for (int i = 0; ens && i < n; i++)
      if (ens[i]) entry_free(ens[i]);
  free(ens);
  return rc < 0 ? rc : id;
}

int hvd__engine_poll(hvd_engine *e, hvd_handle h) {
  pthread_mutex_lock(&e->lock);
  op *o = op_lookup(e, h);
  int rc = !o ? hvd__err(HVD_E_INVALID, "unknown or released handle %lld", (long long)h)
               : o->done ? 1 : 0;
  if (o && o->done && o->status < 0) {
    rc = hvd__err(o->status, "%s", o->msg);
    op_release(e, o);
  }
  pthread_mutex_unlock(&e->lock);
  return rc;
}

int hvd__engine_wait(hvd_engine *e, hvd_handle h, int64_t *value) {
  pthread_mutex_lock(&e->lock);
  op *o = op_lookup(e, h);
  if (!o || o->cb) {
    pthread_mutex_unlock(&e->lock);
    return hvd__err(HVD_E_INVALID, "unknown or released handle %lld%s", (long long)h,
                    o ? " (it completes through its callback)" : "");
  }
  while (!o->done) pthread_cond_wait(&e->cond, &e->lock);
  int rc = o->status;
  if (rc < 0) hvd__err(rc, "%s", o->msg);
  if (value) *value = o->value;
  op_release(e, o);
  pthread_mutex_unlock(&e->lock);
  return rc;
}

int hvd__engine_join(hvd_engine *e) {
  op *o = NULL;
  pthread_mutex_lock(&e->lock);
  int rc = (e->broken || e->stopped) ? hvd__err(HVD_E_ABORTED, "the engine stopped: %s", e->why)
           : e->join_op ? hvd__err(HVD_E_INVALID, "hvd_join is already running on this rank")
                        : op_new(e, &o);
  if (rc == 0) {
    o->remaining = 1;
    e->join_op = o;
    e->join_requested = 1;
    pthread_cond_signal(&e->work);
    while (!o->done) pthread_cond_wait(&e->cond, &e->lock);
    rc = o->status < 0 ? hvd__err(o->status, "%s", o->msg) : (int)o->value;
    op_release(e, o);
  }
  pthread_mutex_unlock(&e->lock);
  return rc;
}

int hvd__engine_pset_info(hvd_engine *e, int id, int *rank, int *size) {
  pthread_mutex_lock(&e->lock);
  pset *p = hvd__pset_find(e, id);
  int rc = 0;
  if (id == 0) {
    *rank = e->rank, *size = e->size;
  } else if (!p) {
    rc = hvd__err(HVD_E_INVALID, "process set %d does not exist", id);
  } else {
    *rank = p->member ? p->comm.rank : -1;
    *size = p->n;
  }
  pthread_mutex_unlock(&e->lock);
  return rc;
}
