/*
 * negotiate.c -- the decision every rank makes, identically, each cycle.
 *
 * Input: what every rank submitted this cycle, the same on every rank:
 * each rank's message (the slow path), or the cached tensors every rank
 * holds (the fast path, cycle.c).  State: the pending table, built only
 * from such input, so also the same everywhere.  Output: the responses to
 * execute, in order.
 *
 *   1. Each request (or cache bit) marks its tensor submitted by its rank;
 *      new names enter the table in arrival order (rank 0's first, then
 *      rank 1's, ...), which is the order ready tensors execute in.
 *   2. A tensor is ready when every rank of its process set submitted it,
 *      or joined (for the kinds a joined rank can take part in); a group
 *      is ready when all its tensors are.
 *   3. The ranks' requests must agree (hvd__requests_check); if not, the
 *      tensor becomes an error response, so every rank fails it with the
 *      same message and nothing else is disturbed.
 *   4. Ready allreduces with the same dtype, op, scale factors and set are
 *      fused, in table order, up to the fusion threshold.
 *
 * Cost.  A cycle must not grow with the tensors in flight (a rank far
 * ahead of the others can have thousands waiting): the table is indexed
 * by name (index.h), each tensor counts the ranks that submitted it and
 * joins the ready list the moment the count is complete, and planning
 * looks at the ready list only.  Two rare events look at the whole table
 * instead: a rank joining (a joined rank makes every tensor's readiness
 * change) and a process set going away.  Fusion follows a chain through
 * the ready allreduces of the same kind, so a tensor never looks at the
 * others it could not fuse with.  The stall inspector walks the table,
 * but at most once a second.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "engine_int.h"

/* The stall inspector's walk of the table happens at most this often. */
#define INSPECT_EVERY_MS 1000

static int same_tensor(const hvd_request *a, const char *name, int32_t set) {
  return a->process_set == set && strcmp(a->name, name) == 0;
}

/* ---- the table ---- */

/* Names belong to their process set (as in Horovod, where each set has
 * its own queue): the same name in two sets is two tensors. */
static pending *pending_find_key(hvd__table *t, const char *name, int32_t set, uint64_t key) {
  for (hvd_ilink *l = hvd__index_first(&t->by_name, key); l;
       l = hvd__index_next(&t->by_name, l)) {
    pending *p = HVD_CONTAINER_OF(l, pending, link);
    if (same_tensor(&p->req, name, set)) return p;
  }
  return NULL;
}

static pending *pending_find(hvd__table *t, const char *name, int32_t set) {
  return pending_find_key(t, name, set, hvd__index_key(name, set));
}

static void pending_unlink(hvd__table *t, pending *p) {
  if (p->prev) p->prev->next = p->next;
  else t->head = p->next;
  if (p->next) p->next->prev = p->prev;
  else t->tail = p->prev;
  p->prev = p->next = NULL;
  hvd__index_remove(&t->by_name, &p->link);
}

static const char *phase_name(int type) {
  static const char *const names[] = {"NEGOTIATE_ALLREDUCE", "NEGOTIATE_BROADCAST",
                                      "NEGOTIATE_ALLGATHER", "NEGOTIATE_ALLTOALL",
                                      "NEGOTIATE_REDUCESCATTER", "NEGOTIATE_BARRIER",
                                      "NEGOTIATE_PROCESS_SET", "NEGOTIATE_PROCESS_SET"};
  return type >= 0 && type < HVD_REQ__COUNT ? names[type] : "NEGOTIATE";
}

/* This rank's "ready" tick on tensor `name` (at_us: when; 0: now).  Every
 * rank's timeline has one per rank and operation: hvd-report pairs them up
 * (apps/report/ranks.c). */
static void tick(hvd_engine *e, const char *name, int rank, uint64_t at_us) {
  char label[32];
  if (!e->tl) return;
  snprintf(label, sizeof label, "rank %d ready", rank);
  hvd__timeline_instant_at(e->tl, name, label, at_us);
}

/* A new tensor at the end of the table.  agreed: every rank submitted
 * req (no per-rank state needed).  since_us: when its negotiation began
 * here (0: now). */
static int pending_new(hvd_engine *e, const hvd_request *req, uint64_t key, int agreed,
                       uint64_t since_us, pending **out) {
  pending *p = calloc(1, sizeof *p);
  if (p && !agreed) p->reqs = calloc((size_t)e->size, sizeof *p->reqs);
  if (p && !agreed && p->reqs) p->submitted = calloc((size_t)e->size, 1);
  if (!p || (!agreed && (!p->reqs || !p->submitted))) {
    hvd__pending_free(p);
    return hvd__err(HVD_E_NOMEM, "allocating negotiation state for '%s'", req->name);
  }
  p->req = *req;
  p->seq = e->table.next_seq++;
  p->prev = e->table.tail;
  if (e->table.tail) e->table.tail->next = p;
  else e->table.head = p;
  e->table.tail = p;
  hvd__index_add(&e->table.by_name, &p->link, key);
  hvd__timeline_begin_at(e->tl, req->name, phase_name(req->type), NULL, since_us);
  *out = p;
  return 0;
}

/* ---- readiness ---- */

/* The members of p's process set, or NULL if the set does not exist. */
static const pset *set_of(hvd_engine *e, const pending *p) {
  return hvd__pset_find(e, p->req.process_set);
}

static int member(const pset *s, int i) { return s ? s->ranks[i] : i; }
static int nmembers(hvd_engine *e, const pset *s) { return s ? s->n : e->size; }
static int missing_set(const pending *p) { return p->req.process_set != 0; }

static int submitted_by(const pending *p, int r) { return !p->submitted || p->submitted[r]; }

/* A joined rank can stand in (zeros) for these kinds, as in Horovod; the
 * others (broadcast, allgather, alltoall, reducescatter: Horovod refuses
 * them after a join, "... is not supported with Join at this time") fail
 * on every rank that submitted them rather than wait for the joined rank
 * forever, and the job goes on. */
static int joinable(int type) {
  return type == HVD_REQ_ALLREDUCE || type == HVD_REQ_BARRIER;
}

/* Horovod's name for the kind in its join error ("Broadcast", ...). */
static const char *horovod_kind(int type) {
  switch (type) {
    case HVD_REQ_BROADCAST: return "Broadcast";
    case HVD_REQ_ALLGATHER: return "Allgather";
    case HVD_REQ_ALLTOALL: return "Alltoall";
    case HVD_REQ_REDUCESCATTER: return "Reducescatter";
    default: return hvd__req_type_name(type);
  }
}

/* Ranks of the set that neither submitted p nor joined (a joined rank
 * stands in, or makes p fail in check()). */
static int missing_ranks(hvd_engine *e, const pending *p, const pset *s, int *out) {
  int n = 0;
  for (int i = 0; i < nmembers(e, s); i++) {
    int r = member(s, i);
    if (!submitted_by(p, r) && !e->join.joined[r]) out[n++] = r;
  }
  return n;
}

static int ready_push(hvd__table *t, pending *p) {
  if (t->nready == t->ready_cap) {
    size_t cap = t->ready_cap ? 2 * t->ready_cap : 64;
    pending **r = realloc(t->ready, cap * sizeof *r);
    if (!r) return hvd__err(HVD_E_NOMEM, "allocating the list of %zu ready tensors", cap);
    t->ready = r, t->ready_cap = cap;
  }
  t->ready[t->nready++] = p;
  p->state = P_READY;
  return 0;
}

/* Whether every member submitted p or joined; a set that does not exist
 * counts as ready (p fails in check()). */
static int complete(hvd_engine *e, const pending *p, int *scratch) {
  const pset *s = set_of(e, p);
  if (missing_set(p) && !s) return 1;
  if (!e->join.n && p->nsubmitted < nmembers(e, s)) return 0;
  return missing_ranks(e, p, s, scratch) == 0;
}

static int update_ready(hvd_engine *e, pending *p, int *scratch) {
  e->table.visits++;
  if (p->state != P_WAITING || !complete(e, p, scratch)) return 0;
  return ready_push(&e->table, p);
}

/* Joins and removed sets change readiness anywhere: one walk of the
 * whole table (rare events). */
static int rescan(hvd_engine *e, int *scratch) {
  for (pending *p = e->table.head; p; p = p->next) HVD__CHECK(update_ready(e, p, scratch));
  e->table.rescan = 0;
  return 0;
}

static int *scratch_ranks(hvd_engine *e) {
  return malloc((size_t)e->size * sizeof(int));
}

/* ---- step 1 ---- */

static int submit(hvd_engine *e, int q, const hvd_request *req, int *scratch) {
  uint64_t key = hvd__index_key(req->name, req->process_set);
  pending *p = pending_find_key(&e->table, req->name, req->process_set, key);
  if (!p) HVD__CHECK(pending_new(e, req, key, 0, 0, &p));
  if (!p->submitted)
    return hvd__err(HVD_E_PROTOCOL, "rank %d submitted '%s', which every rank had submitted",
                    q, req->name);
  if (p->submitted[q])
    return hvd__err(HVD_E_PROTOCOL, "rank %d submitted '%s' twice", q, req->name);
  p->reqs[q] = *req;
  p->submitted[q] = 1;
  p->nsubmitted++;
  tick(e, req->name, q, 0);
  if (q == e->rank) p->mine = hvd__unsent_take(&e->core, req);
  return update_ready(e, p, scratch);
}

int hvd__negotiate_apply(hvd_engine *e, int q, const hvd_msg *m) {
  int *scratch = scratch_ranks(e), rc = 0;
  if (!scratch) return hvd__err(HVD_E_NOMEM, "allocating %d ranks", e->size);
  for (uint32_t i = 0; rc == 0 && i < m->nbits; i++) {
    if (!hvd__msg_bit(m, i)) continue;
    const hvd_request *req = hvd__cache_get(e->cache, i);
    if (!req) rc = hvd__err(HVD_E_PROTOCOL, "rank %d sent cache bit %u for an empty slot", q, i);
    else rc = submit(e, q, req, scratch);
  }
  for (uint32_t i = 0; rc == 0 && i < m->nreq; i++) rc = submit(e, q, &m->reqs[i], scratch);
  free(scratch);
  return rc;
}

int hvd__negotiate_agreed(hvd_engine *e, uint32_t id) {
  const hvd_request *req = hvd__cache_get(e->cache, id);
  pending *p;
  if (!req) return hvd__err(HVD_E_PROTOCOL, "every rank holds cache id %u, an empty slot", id);
  uint64_t key = hvd__index_key(req->name, req->process_set);
  if (pending_find_key(&e->table, req->name, req->process_set, key))
    return hvd__err(HVD_E_PROTOCOL, "cached tensor '%s' is negotiated twice", req->name);
  /* The vector of bits says only that every rank holds it now: of the
   * ranks' readiness, this rank knows its own, since it began holding the
   * tensor.  That is its tick here (each rank's file has its own; without
   * it the report saw only the full exchanges, issue 30). */
  uint64_t since = e->core.held[id] ? e->core.held[id]->held_us : 0;
  HVD__CHECK(pending_new(e, req, key, 1, since, &p));
  tick(e, req->name, e->rank, since);
  p->nsubmitted = e->size;
  p->mine = hvd__unsent_take(&e->core, req);
  e->table.visits++;
  HVD__CHECK(ready_push(&e->table, p));
  if (!p->mine) /* it would run with this rank's zeros */
    return hvd__err(HVD_E_PROTOCOL, "every rank holds cached tensor '%s', this one does not",
                    req->name);
  return 0;
}

/* ---- step 3: agreement ---- */

/* "[1, 3]" */
int hvd__pending_missing(hvd_engine *e, const pending *p, int *out) {
  return missing_ranks(e, p, set_of(e, p), out);
}

void hvd__format_ranks(char *buf, size_t cap, const int *ranks, int n) {
  size_t len = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? ", " : "", ranks[i]);
  if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* "" if no rank of the set that joined instead of submitting p keeps p
 * from running, else why (the same text on every rank). */
static void check_joined(hvd_engine *e, const pending *p, const pset *s, char *why,
                         size_t cap) {
  int *ranks = malloc((size_t)nmembers(e, s) * sizeof *ranks), k = 0;
  for (int i = 0; ranks && i < nmembers(e, s); i++)
    if (!submitted_by(p, member(s, i)) && e->join.joined[member(s, i)]) ranks[k++] = member(s, i);
  if (!ranks) {
    snprintf(why, cap, "out of memory checking '%s'", p->req.name);
  } else if (k && !joinable(p->req.type)) {
    char list[256];
    hvd__format_ranks(list, sizeof list, ranks, k);
    snprintf(why, cap, "%s '%s': ranks %s joined (hvd_join), and a joined rank cannot take "
             "part: %s is not supported with Join at this time", hvd__req_type_name(p->req.type),
             p->req.name, list, horovod_kind(p->req.type));
  }
  free(ranks);
}

/* The requests of the ranks that submitted p agree?  0, or the code with
 * why. */
static int check_requests(hvd_engine *e, const pending *p, const pset *s, char *why,
                          size_t cap) {
  int n = nmembers(e, s), k = 0, code = HVD_E_MISMATCH;
  const hvd_request **reqs = malloc((size_t)n * sizeof *reqs);
  int *ranks = malloc((size_t)n * sizeof *ranks);
  for (int i = 0; reqs && ranks && i < n; i++)
    if (p->submitted[member(s, i)]) reqs[k] = &p->reqs[member(s, i)], ranks[k++] = member(s, i);
  if (!reqs || !ranks) { /* this rank's trouble, not a disagreement */
    snprintf(why, cap, "out of memory checking '%s'", p->req.name);
    code = HVD_E_NOMEM;
  } else if (hvd__requests_check(reqs, ranks, k) < 0) {
    snprintf(why, cap, "%s", hvd_last_error());
  } else if (k < n) {
    check_joined(e, p, s, why, cap);
    code = HVD_E_INVALID;
  }
  free(reqs);
  free(ranks);
  return why[0] ? code : 0;
}

/* 0 if p may run, else the error code and why not (the same text on every
 * rank): HVD_E_MISMATCH when the ranks disagree, HVD_E_INVALID when the
 * call cannot run as made, HVD_E_UNSUPPORTED (or HVD_E_ENV) for device
 * tensors the device path does not run (device.h), HVD_E_NOMEM when this
 * rank could not check. */
static int check(hvd_engine *e, const pending *p, char *why, size_t cap) {
  const pset *s = set_of(e, p);
  why[0] = '\0';
  if (missing_set(p) && !s) {
    snprintf(why, cap, "%s '%s': process set %d does not exist",
             hvd__req_type_name(p->req.type), p->req.name, p->req.process_set);
    return HVD_E_INVALID;
  }
  if (p->req.type == HVD_REQ_BROADCAST && (p->req.root < 0 || p->req.root >= nmembers(e, s))) {
    snprintf(why, cap, "broadcast '%s': root rank %d is not a rank of its set of %d",
             p->req.name, p->req.root, nmembers(e, s));
    return HVD_E_INVALID;
  }
  /* Without p->submitted every rank submitted the cached request. */
  int code = p->submitted ? check_requests(e, p, s, why, cap) : 0;
  if (code || !p->req.on_device) return code;
  int everyone = !p->submitted || p->nsubmitted == nmembers(e, s);
  return hvd__device_check(p->req.type, p->req.op, everyone, p->req.name, why, cap);
}

/* ---- step 4: planning ---- */

/* The response list being built. */
typedef struct {
  response *rs;
  int n, cap;
} plan;

static response *plan_add(plan *pl) {
  if (pl->n == pl->cap) {
    int cap = pl->cap ? 2 * pl->cap : 16;
    response *rs = realloc(pl->rs, (size_t)cap * sizeof *rs);
    if (!rs) return NULL;
    pl->rs = rs, pl->cap = cap;
  }
  response *r = &pl->rs[pl->n++];
  memset(r, 0, sizeof *r);
  return r;
}

static void fuse_unlink(pending *p) {
  if (p->fuse_prev) p->fuse_prev->fuse_next = p->fuse_next;
  if (p->fuse_next) p->fuse_next->fuse_prev = p->fuse_prev;
  p->fuse_prev = p->fuse_next = NULL;
}

/* Moves p from the table into response r. */
static int take(hvd_engine *e, response *r, pending *p) {
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 4;
    pending **items = realloc(r->items, (size_t)cap * sizeof *items);
    if (!items) return hvd__err(HVD_E_NOMEM, "planning a response of %d tensors", cap);
    r->items = items, r->cap = cap;
  }
  pending_unlink(&e->table, p);
  fuse_unlink(p);
  p->state = P_TAKEN;
  if (e->tl) { /* the cycle, the same number on every rank, pairs the ranks' files */
    char args[48];
    snprintf(args, sizeof args, "{\"cycle\":%" PRIu64 "}", e->cycle);
    hvd__timeline_end_args(e->tl, p->req.name, args);
  }
  r->items[r->n++] = p;
  return 0;
}

/* Adasum's coefficients are per tensor: Adasum tensors never fuse. */
static int fuses(const pending *p) {
  return p->req.type == HVD_REQ_ALLREDUCE && p->req.group_size == 0 && p->req.op != HVD_ADASUM;
}

/* What must be equal for two allreduces to fuse. */
static int kind_cmp(const pending *a, const pending *b) {
  int d = (a->req.dtype > b->req.dtype) - (a->req.dtype < b->req.dtype);
  if (!d) d = (a->req.op > b->req.op) - (a->req.op < b->req.op);
  if (!d) d = (a->req.process_set > b->req.process_set) - (a->req.process_set < b->req.process_set);
  if (!d) d = memcmp(&a->req.prescale, &b->req.prescale, sizeof(double));
  if (!d) d = memcmp(&a->req.postscale, &b->req.postscale, sizeof(double));
  if (!d) d = (a->req.on_device > b->req.on_device) - (a->req.on_device < b->req.on_device);
  return d;
}

/* By kind, then by arrival: each kind's run is its fusion chain. */
static int by_kind(const void *x, const void *y) {
  const pending *a = *(pending *const *)x, *b = *(pending *const *)y;
  int d = kind_cmp(a, b);
  return d ? d : (a->seq > b->seq) - (a->seq < b->seq);
}

/* Links the ready tensors that may fuse into one chain per kind, in
 * arrival order, leaving out those the ranks disagree on (they fail on
 * their own). */
static int link_chains(hvd_engine *e) {
  size_t n = 0;
  pending **v = malloc((e->table.nready ? e->table.nready : 1) * sizeof *v);
  if (!v) return hvd__err(HVD_E_NOMEM, "allocating %zu ready tensors", e->table.nready);
  for (size_t i = 0; i < e->table.nready; i++) {
    pending *p = e->table.ready[i];
    char why[8];
    p->fuse_prev = p->fuse_next = NULL;
    p->bad = check(e, p, why, sizeof why) != 0;
    if (fuses(p) && !p->bad) v[n++] = p;
  }
  qsort(v, n, sizeof *v, by_kind);
  for (size_t i = 1; i < n; i++)
    if (kind_cmp(v[i - 1], v[i]) == 0) v[i - 1]->fuse_next = v[i], v[i]->fuse_prev = v[i - 1];
  free(v);
  return 0;
}

static size_t bytes_of(const pending *p) {
  return (size_t)p->req.count * hvd_dtype_size((hvd_dtype)p->req.dtype);
}

/* Step 4 from p: p and the later ready allreduces of its kind, in order,
 * while they fit under the threshold (as Horovod, the first that does not
 * fit ends the response: waiting tensors are not skipped over). */
static int plan_fused(hvd_engine *e, plan *pl, pending *p) {
  response *r = plan_add(pl);
  if (!r) return hvd__err(HVD_E_NOMEM, "planning responses");
  size_t bytes = bytes_of(p);
  pending *q = e->fusion_threshold > 0 ? p->fuse_next : NULL;
  HVD__CHECK(take(e, r, p));
  for (pending *next; q && bytes + bytes_of(q) <= e->fusion_threshold; q = next) {
    next = q->fuse_next;
    e->table.visits++;
    bytes += bytes_of(q);
    HVD__CHECK(take(e, r, q));
  }
  return 0;
}

/* The group p belongs to, in index order, if every member is ready;
 * else 0. */
static int gather_group(hvd_engine *e, const pending *p, pending **group) {
  size_t plen = strrchr(p->req.name, '.') ? (size_t)(strrchr(p->req.name, '.') - p->req.name) : 0;
  for (uint32_t i = 0; i < p->req.group_size; i++) {
    char name[HVD_NAME_MAX + 16];
    snprintf(name, sizeof name, "%.*s.%u", (int)plen, p->req.name, i);
    pending *g = pending_find(&e->table, name, p->req.process_set);
    if (!g || g->state != P_READY) return 0;
    group[i] = g;
  }
  return (int)p->req.group_size;
}

/* A response for p alone, or for p's whole group once every member is
 * ready; an error response if the ranks disagree. */
static int plan_one(hvd_engine *e, plan *pl, pending *p) {
  char why[1024];
  pending *group[1024];
  int n = 1;
  group[0] = p;
  int code = check(e, p, why, sizeof why);
  if (p->req.group_size > 1024) {
    code = HVD_E_INVALID;
    snprintf(why, sizeof why, "group of '%s' has %u tensors (at most 1024)", p->req.name,
             p->req.group_size);
  } else if (p->req.group_size > 0) {
    n = gather_group(e, p, group);
    if (n == 0) return 0; /* not every member is ready yet */
    for (int i = 0; !code && i < n; i++) code = check(e, group[i], why, sizeof why);
  } else if (!code && fuses(p)) {
    return plan_fused(e, pl, p);
  }
  response *r = plan_add(pl);
  if (!r) return hvd__err(HVD_E_NOMEM, "planning responses");
  for (int i = 0; i < n; i++) HVD__CHECK(take(e, r, group[i]));
  if (code) {
    r->error = code;
    r->errmsg = strdup(why);
  }
  return 0;
}

static int by_seq(const void *x, const void *y) {
  const pending *a = *(pending *const *)x, *b = *(pending *const *)y;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Plans every ready tensor, in table order; what cannot run yet (a group
 * with members missing) stays on the ready list. */
int hvd__negotiate_plan(hvd_engine *e, response **out, int *nout) {
  plan pl = {0};
  int rc = 0;
  *out = NULL, *nout = 0;
  if (e->table.rescan || e->join.n) {
    int *scratch = scratch_ranks(e);
    rc = scratch ? rescan(e, scratch) : hvd__err(HVD_E_NOMEM, "allocating %d ranks", e->size);
    free(scratch);
  }
  if (rc < 0 || e->table.nready == 0) return rc; /* the fast path's usual cycle: nothing to plan */
  qsort(e->table.ready, e->table.nready, sizeof *e->table.ready, by_seq);
  rc = link_chains(e);
  for (size_t i = 0; rc == 0 && i < e->table.nready; i++) {
    e->table.visits++;
    if (e->table.ready[i]->state == P_READY) rc = plan_one(e, &pl, e->table.ready[i]);
  }
  size_t kept = 0;
  for (size_t i = 0; i < e->table.nready; i++)
    if (e->table.ready[i]->state == P_READY) e->table.ready[kept++] = e->table.ready[i];
  e->table.nready = kept;
  *out = pl.rs, *nout = pl.n;
  return rc;
}

/* ---- flags: join, shutdown, stall failures ---- */

/* Join: a rank's flag stays up until every rank has joined; the last to
 * join (latest cycle, then highest rank) is what hvd_join returns. */
static void apply_joins(hvd_engine *e, const hvd_msg *msgs) {
  int last = -1;
  for (int q = 0; q < e->size; q++)
    if ((msgs[q].flags & HVD_MSG_JOINED) && !e->join.joined[q]) {
      e->join.joined[q] = 1;
      e->join.n++;
      e->join.cycle[q] = e->cycle;
      e->table.rescan = 1;
      if (!e->join.since_ms) e->join.since_ms = hvd__engine_clock_ns(&e->core) / 1000000u;
    }
  if (e->join.n < e->size) return;
  e->join.since_ms = 0;
  for (int q = 0; q < e->size; q++)
    if (last < 0 || e->join.cycle[q] >= e->join.cycle[last]) last = q;
  memset(e->join.joined, 0, (size_t)e->size);
  e->join.n = 0;
  hvd__engine_join_done(&e->core, last);
}

/* What each rank waits on, for a job whose ranks fell out of step: "rank
 * 0: 'a', 'b'; rank 1: in hvd_join(); rank 2: nothing" -- the tensors it
 * submitted that still miss some rank (the same text on every rank: the
 * table is).  Appended to out at *len. */
static void waits_by_rank(hvd_engine *e, char *out, size_t cap, size_t *len, int *scratch) {
  if (*len >= cap) return;
  *len += (size_t)snprintf(out + *len, cap - *len, " waiting, by rank:");
  for (int q = 0; q < e->size && *len < cap; q++) {
    int k = 0;
    *len += (size_t)snprintf(out + *len, cap - *len, "%s rank %d:", q ? ";" : "", q);
    for (pending *p = e->table.head; p && *len < cap; p = p->next) {
      if (!p->submitted || !p->submitted[q] || !missing_ranks(e, p, set_of(e, p), scratch))
        continue;
      *len += (size_t)snprintf(out + *len, cap - *len, "%s '%s'", k++ ? "," : "", p->req.name);
    }
    if (*len < cap && e->join.joined[q])
      *len += (size_t)snprintf(out + *len, cap - *len, "%s in hvd_join()", k++ ? "," : "");
    if (*len < cap && !k) *len += (size_t)snprintf(out + *len, cap - *len, " nothing");
  }
  if (*len >= cap) *len = cap - 1;
}

/* Rank 0's stall inspector asked every rank to give up on some tensors, or
 * on the wait in hvd_join (join_stalled): why, into core.why, for the
 * engine's break (cycle.c). */
static void stall_shutdown(hvd_engine *e, const hvd_msg *m0, int join_stalled) {
  char msg[2048];
  size_t len = (size_t)snprintf(msg, sizeof msg,
                                "stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS on rank 0):");
  int *missing = malloc((size_t)e->size * sizeof *missing);
  for (uint32_t i = 0; missing && i < m0->nfail && len < sizeof msg; i++) {
    pending *p = pending_find(&e->table, m0->fails[i], 0);
    for (pending *q = e->table.head; !p && q; q = q->next)
      if (strcmp(q->req.name, m0->fails[i]) == 0) p = q;
    char ranks[256] = "[]";
    if (p)
      hvd__format_ranks(ranks, sizeof ranks, missing,
                        missing_ranks(e, p, set_of(e, p), missing));
    len += (size_t)snprintf(msg + len, sizeof msg - len,
                            " tensor '%s' was not submitted by ranks %s;",
                            m0->fails[i], ranks);
  }
  if (join_stalled && len < sizeof msg)
    len += (size_t)snprintf(msg + len, sizeof msg - len, " ranks waited in hvd_join() for "
                            "ranks that never joined;");
  if (missing && len < sizeof msg) waits_by_rank(e, msg, sizeof msg, &len, missing);
  free(missing);
  pthread_mutex_lock(&e->core.lock); /* read by application threads under it */
  _Static_assert(sizeof e->core.why == 1024, "the precision below");
  snprintf(e->core.why, sizeof e->core.why, "%.1023s", msg); /* the first 1023 bytes */
  pthread_mutex_unlock(&e->core.lock);
}

int hvd__negotiate_flags(hvd_engine *e, const hvd_msg *msgs, int *stop) {
  for (int q = 0; q < e->size; q++)
    if ((msgs[q].flags & HVD_MSG_SHUTDOWN) && !*stop) {
      *stop = HVD_E_ABORTED;
      pthread_mutex_lock(&e->core.lock);
      snprintf(e->core.why, sizeof e->core.why, "rank %d called hvd_shutdown()", q);
      pthread_mutex_unlock(&e->core.lock);
    }
  apply_joins(e, msgs);
  /* the join may have completed in this very cycle */
  int join_stalled = (msgs[0].flags & HVD_MSG_JOIN_STALLED) && e->join.n > 0;
  if (msgs[0].nfail == 0 && !join_stalled) return 0;
  stall_shutdown(e, &msgs[0], join_stalled);
  *stop = HVD_E_TIMEOUT;
  return 1;
}

int hvd__negotiate(hvd_engine *e, hvd_msg *msgs, response **out, int *nout, int *stop) {
  *out = NULL, *nout = 0;
  for (int q = 0; q < e->size; q++) HVD__CHECK(hvd__negotiate_apply(e, q, &msgs[q]));
  if (hvd__negotiate_flags(e, msgs, stop)) return 0;
  HVD__CHECK(hvd__tuning_apply(e, msgs)); /* before planning: every rank fuses alike */
  return hvd__negotiate_plan(e, out, nout);
}

/* Frees the table's tensors, leaving it empty. */
static void table_clear(hvd__table *t) {
  for (pending *p = t->head, *next; p; p = next) next = p->next, hvd__pending_free(p);
  t->head = t->tail = NULL;
  hvd__index_free(&t->by_name);
  t->nready = 0;
}

void hvd__table_fail(hvd_engine *e, int status, const char *msg) {
  for (pending *p = e->table.head; p; p = p->next)
    if (p->mine) hvd__engine_fail_entry(&e->core, p->mine, status, msg);
  table_clear(&e->table);
}

void hvd__table_free(hvd__table *t) {
  table_clear(t);
  free(t->ready);
}

/* ---- the stall inspector (rank 0) ---- */

/* Ranks that joined wait in hvd_join for the others: say who is missing
 * and what each rank waits on; past the shutdown time, ask every rank to
 * give up. */
static void inspect_join(hvd_engine *e, hvd_msg *mine, uint64_t now, uint64_t check_ms,
                         uint64_t shut_ms, int *ranks) {
  if (!e->join.since_ms || now - e->join.since_ms < check_ms) return;
  if (shut_ms > 0 && now - e->join.since_ms >= shut_ms) mine->flags |= HVD_MSG_JOIN_STALLED;
  if (now - e->join.warned_ms < check_ms) return;
  char joined[256], missing[256], waits[1024] = "";
  int nj = 0, nm = 0;
  size_t len = 0;
  for (int q = 0; q < e->size; q++)
    if (e->join.joined[q]) ranks[nj++] = q;
  hvd__format_ranks(joined, sizeof joined, ranks, nj);
  for (int q = 0; q < e->size; q++)
    if (!e->join.joined[q]) ranks[nm++] = q;
  hvd__format_ranks(missing, sizeof missing, ranks, nm);
  waits_by_rank(e, waits, sizeof waits, &len, ranks);
  e->join.warned_ms = now;
  hvd__log(HVD_LOG_WARNING,
           "Stall: ranks %s called hvd_join() and have waited more than %ld s "
           "(HOROVOD_STALL_CHECK_TIME_SECONDS) for the others; missing ranks: %s;%s", joined,
           e->stall.check_s, missing, waits);
}

/* Asks every rank, through rank 0's next message, to give up on p. */
static void request_fail(hvd_msg *mine, const pending *p) {
  char (*fails)[HVD_NAME_MAX] = realloc(mine->fails, (mine->nfail + 1) * sizeof *fails);
  if (!fails) return;
  mine->fails = fails;
  snprintf(fails[mine->nfail++], HVD_NAME_MAX, "%s", p->req.name);
}

void hvd__stall_inspect(hvd_engine *e, hvd_msg *mine) {
  /* Nothing waits (the table is empty, nobody joined): no clock to read. */
  if (e->stall.disable || (!e->table.head && !e->join.since_ms)) return;
  uint64_t now = hvd__engine_clock_ns(&e->core) / 1000000u;
  uint64_t check_ms = (uint64_t)e->stall.check_s * 1000;
  uint64_t shut_ms = (uint64_t)e->stall.shutdown_s * 1000;
  /* Tensors new since the last cycle (at the table's end) wait from now:
   * timed here, not where negotiation adds them, so that a cycle that
   * negotiates and runs them at once reads no clock. */
  for (pending *p = e->table.tail; p && !p->first_seen_ms; p = p->prev) p->first_seen_ms = now;
  if (now - e->stall.inspected_ms < INSPECT_EVERY_MS) return;
  e->stall.inspected_ms = now;
  int *missing = malloc((size_t)e->size * sizeof *missing);
  char warn[3072];
  size_t len = 0;
  warn[0] = '\0';
  if (!missing) return;
  inspect_join(e, mine, now, check_ms, shut_ms, missing);
  for (pending *p = e->table.head; p; p = p->next) {
    e->table.visits++;
    int n = missing_ranks(e, p, set_of(e, p), missing);
    uint64_t age = now - p->first_seen_ms;
    if (n == 0 || age < check_ms) continue;
    if (shut_ms > 0 && age >= shut_ms) request_fail(mine, p);
    if (now - p->warned_ms < check_ms || len >= sizeof warn) continue;
    p->warned_ms = now;
    char ranks[256];
    hvd__format_ranks(ranks, sizeof ranks, missing, n);
    len += (size_t)snprintf(warn + len, sizeof warn - len, "%s'%s' missing ranks: %s",
                            len ? "; " : "", p->req.name, ranks);
  }
  if (len && len + 1 < sizeof warn) {
    warn[len++] = ';', warn[len] = '\0';
    waits_by_rank(e, warn, sizeof warn, &len, missing);
  }
  free(missing);
  if (len)
    hvd__log(HVD_LOG_WARNING,
             "Stall: one or more tensors were submitted by some ranks and have waited more "
             "than %ld s (HOROVOD_STALL_CHECK_TIME_SECONDS) for the others, which may mean "
             "the ranks submit different tensors or only some of them reach this step: %s.",
             e->stall.check_s, warn);
}
