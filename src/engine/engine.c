/*
 * engine.c -- the top of the engine: what api.c calls (enqueue, wait,
 * poll, join, the timeline), the engine's thread, start and stop, and who
 * drives the cycles (cycle.c runs one; core.c keeps the queue and the
 * handles).
 *
 * One thread at a time drives: runs cycles, owns the negotiation's state
 * and the transport.  Usually the engine's own thread, which runs a cycle
 * every HOROVOD_CYCLE_TIME as in Horovod.  But a thread that waits for a
 * handle (hvd_wait, every blocking collective) while nobody drives takes
 * the role itself and runs the cycles its operation needs: a blocking call
 * on an idle engine then costs its negotiation and its collective, without
 * waking the engine's thread and being woken back (each such hand-off
 * costs tens of microseconds, more when ranks outnumber cores).
 *
 * When a cycle is due (the same rule for every driver, due_now() and
 * due_at()):
 *   - at once when the engine had nothing in negotiation and work arrived,
 *     or when this rank holds cached tensors the others have not all
 *     submitted yet (its cycle waits for theirs in the transport: that is
 *     where the ranks meet, so the first to arrive should be there);
 *   - else, while busy, HOROVOD_CYCLE_TIME after the last one started, by
 *     whichever driver: the period lets a burst of tensors gather for
 *     fusion; while idle, HOROVOD_CYCLE_TIME after the last one was seen
 *     to end: the heartbeat that lets other ranks' collectives (process
 *     sets this rank is not in, shutdown, stalls) go on.
 * A blocking call on an idle engine reads no clock on its way: its cycle
 * is due at once, and what a cycle needs the time for (how long a tensor
 * waited, the stall inspector) reads it only when there is something to
 * time (hvd__engine_clock_ns).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "affinity.h"
#include "coll/coll.h"
#include "env.h"
#include "startup.h"
#include "transport/live.h"
#include "device.h"
#include "engine_int.h"
#include "waits.h"

void hvd__engine_set_epoch(hvd_engine *e, uint32_t epoch) {
  pthread_mutex_lock(&e->core.lock);
  e->core.epoch = epoch & 0x7fffu;
  pthread_mutex_unlock(&e->core.lock);
}

/* ---- the timeline ---- */

int hvd__engine_set_timeline(hvd_engine *e, hvd_timeline *tl) {
  hvd_timeline *unused = NULL;
  pthread_mutex_lock(&e->core.lock);
  if (e->stopped) { /* no engine thread to hand it to: ours to close */
    unused = tl;
  } else {
    unused = e->tl_swap ? e->tl_next : NULL; /* asked for, never used */
    e->tl_next = tl;
    e->tl_swap = 1;
    uint64_t ticket = ++e->tl_asked;
    if (!e->driving) pthread_cond_signal(&e->work);
    while (e->tl_done < ticket && !e->stopped) pthread_cond_wait(&e->core.cond, &e->core.lock);
  }
  pthread_mutex_unlock(&e->core.lock);
  hvd__timeline_close(unused);
  return 0;
}

/* ---- who drives ---- */

/* Under lock, nobody driving: whether the engine has nothing in
 * negotiation.  The driver's state may be read here: the last driver left
 * it under the lock. */
static int is_idle(const hvd_engine *e) {
  return !e->table.head && e->core.unsent.n == e->core.nheld;
}

/* Under lock, nobody driving: a cycle is due now whatever the clock says. */
static int due_now(const hvd_engine *e) {
  return e->stop_requested || e->tl_swap ||
         (is_idle(e) && (e->core.queue || e->core.join_requested || e->core.nheld));
}

/* Under lock, nobody driving, no cycle due_now(): when the next one is.
 * While busy, a period after the last one started.  While idle, the
 * heartbeat: a period after cycles were last seen to run.  Seen, not
 * timed: a caller that drove a cycle does not read the clock for its end
 * (on the small operation's path); whoever looks next and finds the cycle
 * count moved starts the period then (the engine's thread, after its own
 * heartbeat or on waking), so a heartbeat comes one to two periods after
 * the last cycle a caller drove, and never before the caller that a long
 * cycle completed gets to act. */
static uint64_t due_at(hvd_engine *e, uint64_t now) {
  uint64_t period = (uint64_t)(e->cycle_ms * 1e6);
  if (!is_idle(e)) return e->last_cycle_ns + period;
  if (e->beat_cycle != e->cycle) e->beat_cycle = e->cycle, e->beat_ns = now;
  return e->beat_ns + period;
}

static void timed_wait(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  pthread_cond_timedwait(cond, lock, &ts);
}

/* Under lock, taken with driving set; runs one cycle without the lock and
 * gives the role back.  now: the clock, read just before (0: not read).
 * The queue and the flags are taken here, under the lock held anyway. */
static void drive(hvd_engine *e, uint64_t now) {
  hvd__live_beat(); /* the driver's sign of life, whichever thread drives */
  e->core.cycle_ns = now;
  entry *taken = e->core.queue;
  e->core.queue = NULL;
  e->core.queue_tail = &e->core.queue;
  /* blocked read with the queue: a thread that enqueued then waits has
   * its tensor in this cycle's message */
  uint32_t flags = (e->stop_requested ? HVD_MSG_SHUTDOWN : 0u) |
                   (e->core.join_requested ? HVD_MSG_JOINED : 0u) |
                   (hvd__waits_blocked() ? HVD_MSG_BLOCKED : 0u);
  pthread_mutex_unlock(&e->core.lock);
  int finished = hvd__cycle(e, taken, flags);
  pthread_mutex_lock(&e->core.lock);
  hvd__engine_finish_later(&e->core); /* the rider's entry: under this take of the lock */
  /* Busy, the next cycle is due a period after this one's start: read
   * now if the cycle did not (its end stands in for its start). */
  if (!is_idle(e)) e->last_cycle_ns = hvd__engine_clock_ns(&e->core);
  e->driving = 0;
  if (finished) e->finished = 1;
  pthread_cond_broadcast(&e->core.cond); /* callers waiting for the role */
  /* The engine's thread only when there is something for it now: waking
   * it after every cycle a caller drove would be the hand-off this saves.
   * A cycle due later is its own timed wait's (a period at most). */
  if (finished || due_now(e)) pthread_cond_signal(&e->work);
}

/* Under lock: takes the role and runs one cycle if nobody drives and a
 * cycle is due (1); else waits on cond until one may be due or something
 * changes (0).  Callers loop on it until what they wait for happened. */
static int drive_or_wait(hvd_engine *e, pthread_cond_t *cond) {
  if (e->finished) {
    pthread_cond_wait(cond, &e->core.lock);
    return 0;
  }
  if (e->driving) { /* a period at most: the driver need not wake us */
    timed_wait(cond, &e->core.lock, hvd__now_ns() + (uint64_t)(e->cycle_ms * 1e6) + 1000);
    return 0;
  }
  uint64_t now = 0;
  if (!due_now(e)) {
    now = hvd__now_ns();
    uint64_t due = due_at(e, now);
    if (due > now) { /* in slices, for the signs of life of a long period (live.h) */
      uint64_t slice = now + (uint64_t)HVD_LIVE_SLICE_MS * 1000000u;
      timed_wait(cond, &e->core.lock, due < slice ? due : slice);
      return 0;
    }
  }
  e->driving = 1;
  drive(e, now);
  return 1;
}

/* Under lock: whether an enqueue should wake the engine's thread: nobody
 * drives and the engine had nothing in negotiation (when busy it keeps
 * its period, gathering tensors for fusion). */
static int wants_wakeup(const hvd_engine *e) {
  return !e->driving && is_idle(e);
}

/* watch_for_work()'s while: about what a wake-up costs here, several
 * times over. */
#define WATCH_NS 50000

/* Under lock, on the engine's thread, nothing due: after a cycle it ran
 * that completed an operation, watch a while for the next enqueue that wants
 * this thread before sleeping.  A loop of small operations each waited
 * at once from Python (whose waits poll rather than drive: the main
 * thread must stay responsive to Ctrl-C, python/_C/wait.c) then has its
 * next one taken at once instead of after a wake-up, tens of
 * microseconds.  Not after heartbeats (nothing completed), and not when
 * the ranks of this host outnumber its cores (the watch would take a
 * core from them). */
static void watch_for_work(hvd_engine *e, uint32_t completions) {
  if (!e->watch_ns ||
      atomic_load_explicit(&e->core.completions, memory_order_relaxed) == completions)
    return;
  uint32_t kicks = atomic_load_explicit(&e->kicks, memory_order_relaxed);
  pthread_mutex_unlock(&e->core.lock);
  uint64_t until = hvd__now_ns() + (uint64_t)e->watch_ns;
  for (int i = 1; atomic_load_explicit(&e->kicks, memory_order_relaxed) == kicks; i++) {
    if (i % 64 == 0 && hvd__now_ns() > until) {
      pthread_mutex_lock(&e->core.lock);
      return;
    }
    if (i % 16 == 0) sched_yield(); /* a peer's thread may share our core */
  }
  HVD__BUMP(e->watched);
  pthread_mutex_lock(&e->core.lock);
}

static void *engine_main(void *arg) {
  hvd_engine *e = arg;
  hvd__log_set_rank(e->rank);
  pthread_mutex_lock(&e->core.lock);
  while (!e->finished) {
    if (!e->driving) hvd__live_beat(); /* idle: alive; another driver beats for itself */
    uint32_t completions = atomic_load_explicit(&e->core.completions, memory_order_relaxed);
    if (drive_or_wait(e, &e->work) && !e->finished && !e->driving && !due_now(e)) {
      uint64_t now = hvd__now_ns();
      if (due_at(e, now) > now) watch_for_work(e, completions);
    }
  }
  e->stopped = 1;
  pthread_cond_broadcast(&e->core.cond);
  pthread_mutex_unlock(&e->core.lock);
  hvd__live_active(0);
  return NULL;
}

/* ---- start / stop ---- */

/* The cache and what is sized by its capacity. */
static int cache_create(hvd_engine *e, uint32_t capacity) {
  hvd__cache_destroy(e->cache);
  free(e->fast.alone_next);
  e->cache = NULL;
  e->fast.alone_next = calloc(capacity ? capacity : 1, sizeof *e->fast.alone_next);
  e->fast.rider = e->fast.alone_last = -1;
  if (!e->fast.alone_next)
    return hvd__err(HVD_E_NOMEM, "allocating %u cache entries", (unsigned)capacity);
  HVD__CHECK(hvd__core_held_alloc(&e->core, capacity));
  return hvd__cache_create(capacity, &e->cache);
}

static int read_config(hvd_engine *e) {
  long fusion, cache_cap, rider;
  int mark = 0;
  HVD__CHECK(hvd__param_double(HVD_P_CYCLE_TIME, &e->cycle_ms));
  HVD__CHECK(hvd__param_int(HVD_P_FUSION_THRESHOLD, &fusion));
  HVD__CHECK(hvd__param_int(HVD_P_CACHE_CAPACITY, &cache_cap));
  HVD__CHECK(hvd__param_int(HVD_P_FAST_PATH_RIDER_BYTES, &rider));
  e->fast.rider_max = (size_t)rider;
  HVD__CHECK(hvd__param_bool(HVD_P_STALL_CHECK_DISABLE, &e->stall.disable));
  HVD__CHECK(hvd__param_int(HVD_P_STALL_CHECK_TIME_SECONDS, &e->stall.check_s));
  HVD__CHECK(hvd__param_int(HVD_P_STALL_SHUTDOWN_TIME_SECONDS, &e->stall.shutdown_s));
  HVD__CHECK(hvd__param_int(HVD_P_DESYNC_TIMEOUT_SECONDS, &e->desync.timeout_s));
  HVD__CHECK(hvd__param_bool(HVD_P_TIMELINE_MARK_CYCLES, &mark));
  HVD__CHECK(hvd__param_bool(HVD_P_AUTOTUNE, &e->tuning.on));
  e->fusion_threshold = (size_t)fusion;
  HVD__CHECK(cache_create(e, (uint32_t)cache_cap));
  const char *path = hvd__param_raw(HVD_P_TIMELINE);
  if (path) HVD__CHECK(hvd__timeline_open_for_rank(path, e->rank, mark, &e->tl));
  e->tl_on = e->tl != NULL;
  return 0;
}

/* Ranks must agree on what shapes decisions: rank 0's settings win, the
 * engine's here and the communicator's (allreduce algorithm, hierarchical
 * switch) in hvd__startup_agree, as hvd-bench --direct agrees on them. */
static int agree_on_config(hvd_engine *e) {
  uint64_t cycle_bits;
  memcpy(&cycle_bits, &e->cycle_ms, sizeof cycle_bits);
  uint64_t v[5] = {(uint64_t)e->fusion_threshold, hvd__cache_capacity(e->cache),
                   (uint64_t)e->tuning.on, cycle_bits, (uint64_t)e->fast.rider_max};
  HVD__CHECK(hvd__broadcast(e->global, v, sizeof v, 0));
  e->fusion_threshold = (size_t)v[0];
  e->tuning.on = v[2] != 0;
  e->fast.rider_max = (size_t)v[4];
  if (e->tuning.on) memcpy(&e->cycle_ms, &v[3], sizeof e->cycle_ms); /* rank 0 tunes from its own */
  if (v[1] != hvd__cache_capacity(e->cache)) HVD__CHECK(cache_create(e, (uint32_t)v[1]));
  /* the autotuner may switch the hierarchical allreduce on: build it */
  return hvd__startup_agree(e->global, e->tuning.on);
}

void hvd__engine_dealloc(hvd_engine *e) {
  if (!e) return;
  hvd__table_free(&e->table);
  hvd__engine_timeline_waits(e);
  hvd__cache_destroy(e->cache);
  hvd__timeline_close(e->tl);
  hvd__timeline_close(e->tl_next);
  hvd__psets_free(e);
  free(e->join.joined);
  free(e->join.cycle);
  free(e->desync.blocked);
  free(e->desync.stuck);
  free(e->scratch);
  hvd__device_close(&e->dev, e->core.broken);
  free(e->fast.alone_next);
  free(e->fast.vec);
  free(e->fast.rider_buf);
  hvd__tuning_free(&e->tuning);
  hvd__core_free(&e->core);
  pthread_cond_destroy(&e->work);
  free(e);
}

int hvd__engine_alloc(int rank, int size, uint32_t cache_capacity, hvd_engine **out) {
  hvd_engine *e = calloc(1, sizeof *e);
  if (!e) return hvd__err(HVD_E_NOMEM, "allocating the engine");
  hvd__core_init(&e->core);
  hvd__cond_init(&e->work);
  e->rank = rank;
  e->size = size;
  e->next_pset_id = 1;
  e->cycle_ms = 1;
  e->fast.on = 1;
  e->join.joined = calloc((size_t)size, 1);
  e->join.cycle = calloc((size_t)size, sizeof *e->join.cycle);
  e->desync.blocked = calloc((size_t)size, 1);
  e->desync.stuck = calloc((size_t)size, 1);
  int rc = e->join.joined && e->join.cycle && e->desync.blocked && e->desync.stuck
               ? cache_create(e, cache_capacity)
               : hvd__err(HVD_E_NOMEM, "allocating the engine");
  if (rc < 0) {
    hvd__engine_dealloc(e);
    return rc;
  }
  *out = e;
  return 0;
}

int hvd__engine_start(hvd_comm *global, hvd_engine **out) {
  hvd_engine *e;
  HVD__CHECK(hvd__engine_alloc(global->rank, global->size, 0, &e));
  hvd__waits_reset();
  e->global = global;
  /* the ranks of this host, not of the job: those are who share its cores */
  e->watch_ns = hvd__core_each(global->place.local_size) ? WATCH_NS : 0;
  int rc = read_config(e);
  if (rc == 0) rc = agree_on_config(e); /* and builds the hierarchy */
  if (rc == 0) rc = hvd__tuning_start(e);
  if (rc == 0) hvd__engine_timeline_job(e);    /* the settings agreed on */
  if (rc == 0 && pthread_create(&e->thread, NULL, engine_main, e) != 0)
    rc = hvd__err(HVD_E_SYSTEM, "starting the engine thread");
  if (rc == 0) {
    /* alive from here (live.h), whichever thread drives first: the
     * engine's may not have run yet when a caller's cycles are done */
    hvd__live_active(1);
    pthread_setname_np(e->thread, "hvd engine"); /* for ps, top, gdb, and the tests */
    hvd__affinity_apply(e->thread, global->place.local_rank, global->place.local_size);
  }
  if (rc < 0) {
    hvd__engine_dealloc(e);
    return rc;
  }
  *out = e;
  return 0;
}

void hvd__engine_stop(hvd_engine *e) {
  if (!e) return;
  pthread_mutex_lock(&e->core.lock);
  e->stop_requested = 1;
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->core.lock);
  pthread_join(e->thread, NULL);
}

void hvd__engine_free(hvd_engine *e) { hvd__engine_dealloc(e); }

/* ---- what application threads call ---- */

static int name_in_flight(hvd_engine *e, const hvd_request *r, uint64_t key) {
  hvd_index *in = &e->core.inflight;
  for (hvd_ilink *l = hvd__index_first(in, key); l; l = hvd__index_next(in, l)) {
    const entry *en = HVD_CONTAINER_OF(l, entry, inflight);
    if (en->w.req.process_set == r->process_set && strcmp(en->w.req.name, r->name) == 0) return 1;
  }
  return 0;
}

_Static_assert(offsetof(entry, w) == 0, "entry_new clears what follows w");

/* spare: a recycled entry to fill, or NULL. */
static int entry_new(const hvd_work *w, int size, entry *spare, entry **out) {
  /* w comes first and is copied whole: only the rest is cleared */
  entry *en = spare ? memset(&spare->w + 1, 0, sizeof *spare - sizeof spare->w), spare
                    : calloc(1, sizeof *en);
  if (!en) return hvd__err(HVD_E_NOMEM, "allocating a tensor entry");
  en->w = *w;
  en->w.ready = NULL; /* the engine's own, made below */
  en->key = hvd__index_key(w->req.name, w->req.process_set);
  en->held = -1;
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
    hvd__entry_free(en);
    return hvd__err(HVD_E_NOMEM, "copying the counts of '%s'", w->req.name);
  }
  int rc = w->req.on_device ? hvd__device_ready_new(w->device, w->stream, &en->w.ready) : 0;
  if (rc < 0) {
    hvd__entry_free(en);
    return rc;
  }
  *out = en;
  return 0;
}

/* Under lock: the checks that need the engine's state. */
static int admit(hvd_engine *e, const hvd_work *works, entry *const *ens, int n) {
  if (e->core.broken || e->stopped)
    return hvd__err(HVD_E_ABORTED, "the engine stopped: %s", e->core.why);
  for (int i = 0; i < n; i++) {
    const hvd_request *r = &works[i].req;
    if (name_in_flight(e, r, ens[i]->key))
      return hvd__err(HVD_E_INVALID, "tensor '%s' is already in flight: wait for its handle "
                      "before enqueuing the name again", r->name);
    for (int j = 0; j < i; j++)
      if (strcmp(works[j].req.name, r->name) == 0)
        return hvd__err(HVD_E_INVALID, "tensor '%s' appears twice in one group", r->name);
  }
  return 0;
}

/* Under lock: admits n entries, gives them one handle and queues them,
 * waking the engine's thread unless the caller waits at once. */
static int queue_locked(hvd_engine *e, const hvd_work *works, entry *const *ens, int n,
                        hvd_callback cb, void *arg, int will_wait, op **out) {
  op *o = NULL;
  HVD__CHECK(admit(e, works, ens, n));
  HVD__CHECK(hvd__op_new(&e->core, &o));
  o->remaining = n;
  o->cb = cb;
  o->cb_arg = arg;
  for (int i = 0; i < n; i++) {
    /* Cleared only once admitted: a refused enqueue may name the out
     * of an operation in flight, which the engine thread writes. */
    if (works[i].out) *works[i].out = NULL;
    ens[i]->op = o;
    *e->core.queue_tail = ens[i];
    e->core.queue_tail = &ens[i]->next;
    hvd__index_add(&e->core.inflight, &ens[i]->inflight, ens[i]->key);
  }
  if (!will_wait && wants_wakeup(e)) {
    HVD__BUMP(e->kicks);
    pthread_cond_signal(&e->work);
  }
  *out = o;
  return 0;
}

hvd_handle hvd__engine_enqueue(hvd_engine *e, const hvd_work *works, int n, hvd_callback cb,
                               void *arg, int will_wait) {
  if (!will_wait) hvd__waits_submitted(); /* it may come back to wait, or never */
  entry *one = NULL, **ens = n == 1 ? &one : calloc((size_t)n, sizeof *ens);
  int rc = ens ? 0 : hvd__err(HVD_E_NOMEM, "allocating %d entries", n);
  entry *spare = NULL;
  if (rc == 0 && n == 1) { /* groups allocate theirs */
    pthread_mutex_lock(&e->core.lock);
    spare = hvd__entry_spare(&e->core);
    pthread_mutex_unlock(&e->core.lock);
  }
  for (int i = 0; rc == 0 && i < n; i++) rc = entry_new(&works[i], e->size, spare, &ens[i]);
  op *o = NULL;
  hvd_handle id = 0; /* read under the lock: with a callback, o may be gone after it */
  pthread_mutex_lock(&e->core.lock);
  if (rc == 0) rc = queue_locked(e, works, ens, n, cb, arg, will_wait, &o);
  if (rc == 0) id = o->id;
  pthread_mutex_unlock(&e->core.lock);
  if (rc < 0)
    for (int i = 0; ens && i < n; i++)
      if (ens[i]) hvd__entry_free(ens[i]);
  if (ens != &one) free(ens);
  return rc < 0 ? rc : id;
}

int hvd__engine_poll(hvd_engine *e, hvd_handle h) {
  pthread_mutex_lock(&e->core.lock);
  op *o = hvd__op_lookup(&e->core, h);
  int rc = !o ? hvd__err(HVD_E_INVALID, "unknown or released handle %lld", (long long)h)
               : o->done ? 1 : 0;
  if (o && o->done && o->status < 0) {
    rc = hvd__err(o->status, "%s", hvd__op_msg(o));
    hvd__op_release(&e->core, o);
  }
  pthread_mutex_unlock(&e->core.lock);
  return rc;
}

/* Under lock: waits for o, driving cycles while nobody else does, and
 * releases it; its status, and its value into *value. */
static int wait_locked(hvd_engine *e, op *o, int64_t *value) {
  uint64_t start_ns = o->done || !e->tl_on ? 0 : hvd__now_ns(); /* for the timeline */
  /* A stopped engine has finished every entry it knew; one it lost would
   * leave this wait without an end, so stop waiting then too.  The thread
   * counts as waiting (waits.h) once a first drive did not end it: a small
   * operation that completes in its own cycle pays nothing for it. */
  int waits = 0;
  while (!o->done && !e->stopped) {
    drive_or_wait(e, &e->core.cond);
    if (!waits && !o->done) hvd__waits_enter(), waits = 1;
  }
  if (waits) hvd__waits_leave();
  if (!o->done) /* o stays: a lost entry may still point to it */
    return hvd__err(HVD_E_ABORTED, "the engine stopped before handle %lld completed: %s",
                    (long long)o->id, e->core.why);
  if (start_ns && e->tl_on && e->nwaits < HVD_WAITS_MAX) {
    e->waits[e->nwaits].start_us = start_ns / 1000;
    e->waits[e->nwaits++].end_us = hvd__now_ns() / 1000;
  }
  int rc = o->status;
  if (rc < 0) hvd__err(rc, "%s", hvd__op_msg(o));
  if (value) *value = o->value;
  hvd__op_release(&e->core, o);
  return rc;
}

int hvd__engine_wait(hvd_engine *e, hvd_handle h, int64_t *value) {
  pthread_mutex_lock(&e->core.lock);
  op *o = hvd__op_lookup(&e->core, h);
  int rc = !o || o->cb ? hvd__err(HVD_E_INVALID, "unknown or released handle %lld%s",
                                  (long long)h, o ? " (it completes through its callback)" : "")
                       : wait_locked(e, o, value);
  pthread_mutex_unlock(&e->core.lock);
  return rc;
}

int hvd__engine_run(hvd_engine *e, const hvd_work *works, int n, int64_t *value, int *queued) {
  *queued = 0;
  if (n > 1 || works[0].req.on_device) { /* a group's entries, a device tensor's ready event:
                                            made outside the lock */
    hvd_handle h = hvd__engine_enqueue(e, works, n, NULL, NULL, 1);
    if (h < 0) return (int)h;
    *queued = 1;
    return hvd__engine_wait(e, h, value);
  }
  /* One lock for the whole call: taking a spare entry, queueing it and
   * waiting each took it before (with the read lock in api.c, a tenth of
   * a small allreduce's time on this path). */
  entry *en = NULL;
  op *o = NULL;
  pthread_mutex_lock(&e->core.lock);
  int rc = entry_new(works, e->size, hvd__entry_spare(&e->core), &en);
  if (rc == 0) rc = queue_locked(e, works, &en, 1, NULL, NULL, 1, &o);
  if (rc == 0) {
    *queued = 1;
    rc = wait_locked(e, o, value);
  }
  pthread_mutex_unlock(&e->core.lock);
  if (!*queued && en) hvd__entry_free(en);
  return rc;
}

int hvd__engine_join(hvd_engine *e) {
  op *o = NULL;
  pthread_mutex_lock(&e->core.lock);
  int rc = (e->core.broken || e->stopped)
               ? hvd__err(HVD_E_ABORTED, "the engine stopped: %s", e->core.why)
           : e->core.join_op ? hvd__err(HVD_E_INVALID, "hvd_join is already running on this rank")
                             : hvd__op_new(&e->core, &o);
  if (rc == 0) {
    o->remaining = 1;
    e->core.join_op = o;
    e->core.join_requested = 1;
    while (!o->done) drive_or_wait(e, &e->core.cond);
    rc = o->status < 0 ? hvd__err(o->status, "%s", hvd__op_msg(o)) : (int)o->value;
    hvd__op_release(&e->core, o);
  }
  pthread_mutex_unlock(&e->core.lock);
  return rc;
}

void hvd__engine_cycle_counts(hvd_engine *e, uint64_t *fast, uint64_t *full, uint64_t *rode) {
  *fast = atomic_load_explicit(&e->fast.tensors, memory_order_relaxed);
  *full = atomic_load_explicit(&e->fast.full_cycles, memory_order_relaxed);
  if (rode) *rode = atomic_load_explicit(&e->fast.rider_tensors, memory_order_relaxed);
}

uint64_t hvd__engine_watched(hvd_engine *e) {
  return atomic_load_explicit(&e->watched, memory_order_relaxed);
}

int hvd__engine_pset_info(hvd_engine *e, int id, int *rank, int *size) {
  if (id == 0) { /* fixed from the start: no lock on every call's way */
    *rank = e->rank, *size = e->size;
    return 0;
  }
  pthread_mutex_lock(&e->core.lock);
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
  pthread_mutex_unlock(&e->core.lock);
  return rc;
}
