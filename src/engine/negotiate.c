/*
 * negotiate.c -- the decision every rank makes, identically, each cycle.
 *
 * Input: every rank's message of this cycle (the same bytes on every
 * rank).  State: the pending table, built only from such messages, so also
 * the same everywhere.  Output: the responses to execute, in order.
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hash.h"
#include "engine_int.h"


void hvd__pending_free(pending *p) {
  if (!p) return;
  free(p->reqs);
  free(p->submitted);
  free(p);
}

/* Names belong to their process set (as in Horovod, where each set has
 * its own queue): the same name in two sets is two tensors. */
static pending *pending_find(hvd_engine *e, const char *name, int32_t set) {
  uint64_t h = hvd__hash_str(name);
  for (pending *p = e->pending_head; p; p = p->next)
    if (p->name_hash == h && p->req.process_set == set && strcmp(p->req.name, name) == 0)
      return p;
  return NULL;
}

static void pending_unlink(hvd_engine *e, pending *p) {
  for (pending **pp = &e->pending_head; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      if (e->pending_tail == &p->next) e->pending_tail = pp;
      p->next = NULL;
      return;
    }
}

static const char *phase_name(int type) {
  static const char *const names[] = {"NEGOTIATE_ALLREDUCE", "NEGOTIATE_BROADCAST",
                                      "NEGOTIATE_ALLGATHER", "NEGOTIATE_ALLTOALL",
                                      "NEGOTIATE_REDUCESCATTER", "NEGOTIATE_BARRIER",
                                      "NEGOTIATE_PROCESS_SET", "NEGOTIATE_PROCESS_SET"};
  return type >= 0 && type < HVD_REQ__COUNT ? names[type] : "NEGOTIATE";
}

static int pending_new(hvd_engine *e, const hvd_request *req, pending **out) {
  pending *p = calloc(1, sizeof *p);
  if (p) p->reqs = calloc((size_t)e->size, sizeof *p->reqs);
  if (p && p->reqs) p->submitted = calloc((size_t)e->size, 1);
  if (!p || !p->reqs || !p->submitted) {
    hvd__pending_free(p);
    return hvd__err(HVD_E_NOMEM, "allocating negotiation state for '%s'", req->name);
  }
  p->req = *req;
  p->name_hash = hvd__hash_str(req->name);
  p->first_seen_ms = hvd__now_ms();
  *e->pending_tail = p;
  e->pending_tail = &p->next;
  hvd__timeline_begin(e->tl, req->name, phase_name(req->type), NULL);
  *out = p;
  return 0;
}

/* Takes this rank's entry for req off the unsent list. */
static entry *take_unsent(hvd_engine *e, const hvd_request *req) {
  for (entry **pp = &e->unsent; *pp; pp = &(*pp)->next)
    if ((*pp)->w.req.process_set == req->process_set && strcmp((*pp)->w.req.name, req->name) == 0) {
      entry *en = *pp;
      *pp = en->next;
      en->next = NULL;
      return en;
    }
  return NULL;
}

static int submit(hvd_engine *e, int q, const hvd_request *req) {
  pending *p = pending_find(e, req->name, req->process_set);
  if (!p) HVD__CHECK(pending_new(e, req, &p));
  if (p->submitted[q])
    return hvd__err(HVD_E_PROTOCOL, "rank %d submitted '%s' twice", q, req->name);
  p->reqs[q] = *req;
  p->submitted[q] = 1;
  if (e->tl) {
    char label[32];
    snprintf(label, sizeof label, "rank %d ready", q);
    hvd__timeline_instant(e->tl, req->name, label);
  }
  if (q == e->rank) p->mine = take_unsent(e, req);
  return 0;
}

/* Step 1 for one rank's message. */
static int apply(hvd_engine *e, int q, const hvd_msg *m) {
  for (uint32_t i = 0; i < m->nbits; i++) {
    if (!hvd__msg_bit(m, i)) continue;
    const hvd_request *req = hvd__cache_get(e->cache, i);
    if (!req) return hvd__err(HVD_E_PROTOCOL, "rank %d sent cache bit %u for an empty slot", q, i);
    HVD__CHECK(submit(e, q, req));
  }
  for (uint32_t i = 0; i < m->nreq; i++) HVD__CHECK(submit(e, q, &m->reqs[i]));
  return 0;
}

/* "[1, 3]" */
static void format_ranks(char *buf, size_t cap, const int *ranks, int n) {
  size_t len = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? ", " : "", ranks[i]);
  if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* The members of p's process set, or NULL if the set does not exist. */
static const pset *set_of(hvd_engine *e, const pending *p) {
  return hvd__pset_find(e, p->req.process_set);
}

static int member(const pset *s, int i) { return s ? s->ranks[i] : i; }
static int nmembers(hvd_engine *e, const pset *s) { return s ? s->n : e->size; }

/* A joined rank can stand in (zeros, a scratch buffer) for these kinds;
 * for the others (an allgather needs its data, Horovod fails them too)
 * it makes the tensor fail rather than wait for it forever. */
static int joinable(int type) {
  return type == HVD_REQ_ALLREDUCE || type == HVD_REQ_REDUCESCATTER ||
         type == HVD_REQ_BROADCAST || type == HVD_REQ_BARRIER;
}

/* Ranks of the set that neither submitted p nor joined (a joined rank
 * stands in, or makes p fail in check()). */
static int missing_ranks(hvd_engine *e, const pending *p, const pset *s, int *out) {
  int n = 0;
  for (int i = 0; i < nmembers(e, s); i++) {
    int r = member(s, i);
    if (!p->submitted[r] && !e->joined[r]) out[n++] = r;
  }
  return n;
}

/* "" if no rank of the set that joined instead of submitting p keeps p
 * from running, else why (the same text on every rank). */
static void check_joined(hvd_engine *e, const pending *p, const pset *s, char *why,
                         size_t cap) {
  int *ranks = malloc((size_t)nmembers(e, s) * sizeof *ranks), k = 0;
  for (int i = 0; ranks && i < nmembers(e, s); i++)
    if (!p->submitted[member(s, i)] && e->joined[member(s, i)]) ranks[k++] = member(s, i);
  if (!ranks) {
    snprintf(why, cap, "out of memory checking '%s'", p->req.name);
  } else if (k && !joinable(p->req.type)) {
    char list[256];
    format_ranks(list, sizeof list, ranks, k);
    snprintf(why, cap, "%s '%s': ranks %s joined (hvd_join), and a joined rank cannot take part "
             "in an %s", hvd__req_type_name(p->req.type), p->req.name, list,
             hvd__req_type_name(p->req.type));
  } else if (k && p->req.type == HVD_REQ_BROADCAST && e->joined[member(s, p->req.root)] &&
             !p->submitted[member(s, p->req.root)]) {
    snprintf(why, cap, "broadcast '%s': root rank %d has joined", p->req.name,
             member(s, p->req.root));
  }
  free(ranks);
}

static int is_ready(hvd_engine *e, const pending *p, int *scratch) {
  if (p->req.process_set != 0 && !set_of(e, p)) return 1; /* fails below */
  return missing_ranks(e, p, set_of(e, p), scratch) == 0;
}

/* Step 3: 0 if p may run, else the error code and why not (the same
 * text on every rank): HVD_E_MISMATCH when the ranks disagree,
 * HVD_E_INVALID when the call cannot run as made. */
static int check(hvd_engine *e, const pending *p, char *why, size_t cap) {
  const pset *s = set_of(e, p);
  why[0] = '\0';
  if (p->req.process_set != 0 && !s) {
    snprintf(why, cap, "%s '%s': process set %d does not exist",
             hvd__req_type_name(p->req.type), p->req.name, p->req.process_set);
    return HVD_E_INVALID;
  }
  int n = nmembers(e, s), k = 0;
  if (p->req.type == HVD_REQ_BROADCAST && (p->req.root < 0 || p->req.root >= n)) {
    snprintf(why, cap, "broadcast '%s': root rank %d is not a rank of its set of %d",
             p->req.name, p->req.root, n);
    return HVD_E_INVALID;
  }
  const hvd_request **reqs = malloc((size_t)n * sizeof *reqs);
  int *ranks = malloc((size_t)n * sizeof *ranks), code = HVD_E_MISMATCH;
  for (int i = 0; reqs && ranks && i < n; i++)
    if (p->submitted[member(s, i)]) reqs[k] = &p->reqs[member(s, i)], ranks[k++] = member(s, i);
  if (!reqs || !ranks) {
    snprintf(why, cap, "out of memory checking '%s'", p->req.name);
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

/* The group p belongs to, in index order, if every member is pending and
 * ready; else 0. */
static int gather_group(hvd_engine *e, const pending *p, pending **group, int *scratch) {
  size_t plen = strrchr(p->req.name, '.') ? (size_t)(strrchr(p->req.name, '.') - p->req.name) : 0;
  for (uint32_t i = 0; i < p->req.group_size; i++) {
    char name[HVD_NAME_MAX + 16];
    snprintf(name, sizeof name, "%.*s.%u", (int)plen, p->req.name, i);
    pending *g = pending_find(e, name, p->req.process_set);
    if (!g || !is_ready(e, g, scratch)) return 0;
    group[i] = g;
  }
  return (int)p->req.group_size;
}

/* Adasum's coefficients are per tensor: Adasum tensors never fuse. */
static int fusable(const pending *a, const pending *b) {
  return b->req.type == HVD_REQ_ALLREDUCE && b->req.group_size == 0 &&
         a->req.op != HVD_ADASUM &&
         a->req.dtype == b->req.dtype && a->req.op == b->req.op &&
         a->req.process_set == b->req.process_set &&
         memcmp(&a->req.prescale, &b->req.prescale, sizeof(double)) == 0 &&
         memcmp(&a->req.postscale, &b->req.postscale, sizeof(double)) == 0;
}

static size_t bytes_of(const pending *p) {
  return (size_t)p->req.count * hvd_dtype_size((hvd_dtype)p->req.dtype);
}

/* The response list being built. */
typedef struct {
  response *rs;
  int n, cap;
} plan;

static response *plan_add(plan *pl, int nitems) {
  if (pl->n == pl->cap) {
    int cap = pl->cap ? 2 * pl->cap : 16;
    response *rs = realloc(pl->rs, (size_t)cap * sizeof *rs);
    if (!rs) return NULL;
    pl->rs = rs, pl->cap = cap;
  }
  response *r = &pl->rs[pl->n];
  memset(r, 0, sizeof *r);
  r->items = calloc((size_t)nitems, sizeof *r->items);
  if (!r->items) return NULL;
  pl->n++;
  return r;
}

/* Moves p from the table into response r. */
static void take(hvd_engine *e, response *r, pending *p) {
  pending_unlink(e, p);
  hvd__timeline_end(e->tl, p->req.name);
  r->items[r->n++] = p;
}

/* Step 4 from p: p and the later ready allreduces that fuse with it. */
static int plan_fused(hvd_engine *e, plan *pl, pending *p, int *scratch) {
  int cap = 1;
  size_t bytes = bytes_of(p);
  for (pending *q = p->next; q && e->fusion_threshold > 0; q = q->next) cap++;
  response *r = plan_add(pl, cap);
  if (!r) return hvd__err(HVD_E_NOMEM, "planning responses");
  pending *next;
  for (pending *q = p->next; q && e->fusion_threshold > 0; q = next) {
    next = q->next;
    char why[8];
    if (!fusable(p, q) || !is_ready(e, q, scratch) ||
        bytes + bytes_of(q) > e->fusion_threshold)
      continue;
    if (check(e, q, why, sizeof why)) continue; /* it fails on its own, below */
    bytes += bytes_of(q);
    take(e, r, q);
  }
  /* p goes first: the buffer's order is the table's order. */
  memmove(r->items + 1, r->items, (size_t)r->n * sizeof *r->items);
  r->items[0] = p;
  r->n++;
  pending_unlink(e, p);
  hvd__timeline_end(e->tl, p->req.name);
  return 0;
}

/* A response for p alone, or for p's whole group once every member is
 * ready; an error response if the ranks disagree. */
static int plan_one(hvd_engine *e, plan *pl, pending *p, int *scratch) {
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
    n = gather_group(e, p, group, scratch);
    if (n == 0) return 0; /* not every member is ready yet */
    for (int i = 0; !code && i < n; i++) code = check(e, group[i], why, sizeof why);
  } else if (!code && p->req.type == HVD_REQ_ALLREDUCE && p->req.op != HVD_ADASUM) {
    return plan_fused(e, pl, p, scratch);
  }
  response *r = plan_add(pl, n);
  if (!r) return hvd__err(HVD_E_NOMEM, "planning responses");
  for (int i = 0; i < n; i++) take(e, r, group[i]);
  if (code) {
    r->error = code;
    snprintf(r->errmsg, sizeof r->errmsg, "%s", why);
  }
  return 0;
}

static int in_table(const hvd_engine *e, const pending *p) {
  for (const pending *q = e->pending_head; q; q = q->next)
    if (q == p) return 1;
  return 0;
}

/* Walks the table in order, planning every ready tensor.  Planning may
 * take later tensors too (fusion, groups); when the next one went, the
 * walk starts over: what lies before is not ready, and the table shrank. */
static int plan_responses(hvd_engine *e, plan *pl) {
  int *scratch = malloc((size_t)e->size * sizeof *scratch);
  if (!scratch) return hvd__err(HVD_E_NOMEM, "allocating %d ranks", e->size);
  int rc = 0;
  for (pending *p = e->pending_head, *next; rc == 0 && p; p = next) {
    next = p->next;
    if (!is_ready(e, p, scratch)) continue;
    rc = plan_one(e, pl, p, scratch);
    if (next && !in_table(e, next)) next = e->pending_head;
  }
  free(scratch);
  return rc;
}

/* Join: a rank's flag stays up until every rank has joined; the last to
 * join (latest cycle, then highest rank) is what hvd_join returns. */
static void apply_joins(hvd_engine *e, const hvd_msg *msgs) {
  int all = 1, last = -1;
  for (int q = 0; q < e->size; q++) {
    if ((msgs[q].flags & HVD_MSG_JOINED) && !e->joined[q]) {
      e->joined[q] = 1;
      e->join_cycle[q] = e->cycle;
      if (!e->join_since_ms) e->join_since_ms = hvd__now_ms();
    }
    all &= e->joined[q];
  }
  if (!all) return;
  e->join_since_ms = 0;
  for (int q = 0; q < e->size; q++)
    if (last < 0 || e->join_cycle[q] >= e->join_cycle[last]) last = q;
  memset(e->joined, 0, (size_t)e->size);
  hvd__engine_join_done(e, last);
}

/* Rank 0's stall inspector asked every rank to give up on some tensors. */
static void stall_shutdown(hvd_engine *e, const hvd_msg *m0) {
  char msg[1024];
  size_t len = (size_t)snprintf(msg, sizeof msg,
                                "stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS on rank 0):");
  int *missing = malloc((size_t)e->size * sizeof *missing);
  for (uint32_t i = 0; missing && i < m0->nfail && len < sizeof msg; i++) {
    pending *p = pending_find(e, m0->fails[i], 0);
    for (pending *q = e->pending_head; !p && q; q = q->next)
      if (strcmp(q->req.name, m0->fails[i]) == 0) p = q;
    char ranks[256] = "[]";
    if (p) format_ranks(ranks, sizeof ranks, missing, missing_ranks(e, p, set_of(e, p), missing));
    len += (size_t)snprintf(msg + len, sizeof msg - len, " tensor '%s' was not submitted by ranks %s;",
                            m0->fails[i], ranks);
  }
  free(missing);
  hvd__engine_break(e, HVD_E_TIMEOUT, msg);
}

int hvd__negotiate(hvd_engine *e, hvd_msg *msgs, response **out, int *nout, int *shutdown) {
  plan pl = {0};
  *out = NULL, *nout = 0;
  for (int q = 0; q < e->size; q++) HVD__CHECK(apply(e, q, &msgs[q]));
  for (int q = 0; q < e->size; q++)
    if ((msgs[q].flags & HVD_MSG_SHUTDOWN) && !*shutdown) {
      *shutdown = 1;
      pthread_mutex_lock(&e->lock);
      snprintf(e->why, sizeof e->why, "rank %d called hvd_shutdown()", q);
      pthread_mutex_unlock(&e->lock);
    }
  if (msgs[0].nfail > 0) {
    stall_shutdown(e, &msgs[0]);
    *shutdown = 1;
    return 0;
  }
  apply_joins(e, msgs);
  int rc = plan_responses(e, &pl);
  *out = pl.rs, *nout = pl.n;
  return rc;
}

/* ---- the stall inspector (rank 0) ---- */

/* Ranks that joined wait in hvd_join for the others: say who is missing. */
static void inspect_join(hvd_engine *e, uint64_t now, uint64_t check_ms, int *ranks) {
  if (!e->join_since_ms || now - e->join_since_ms < check_ms ||
      now - e->join_warned_ms < check_ms)
    return;
  char joined[256], missing[256];
  int nj = 0, nm = 0;
  for (int q = 0; q < e->size; q++)
    if (e->joined[q]) ranks[nj++] = q;
  format_ranks(joined, sizeof joined, ranks, nj);
  for (int q = 0; q < e->size; q++)
    if (!e->joined[q]) ranks[nm++] = q;
  format_ranks(missing, sizeof missing, ranks, nm);
  e->join_warned_ms = now;
  hvd__log(HVD_LOG_WARNING,
           "Stall: ranks %s called hvd_join() and have waited more than %ld s "
           "(HOROVOD_STALL_CHECK_TIME_SECONDS) for the others; missing ranks: %s", joined,
           e->stall_check_s, missing);
}

void hvd__stall_inspect(hvd_engine *e, hvd_msg *mine) {
  if (e->stall_disable) return;
  uint64_t now = hvd__now_ms(), check_ms = (uint64_t)e->stall_check_s * 1000;
  uint64_t shut_ms = (uint64_t)e->stall_shutdown_s * 1000;
  int *missing = malloc((size_t)e->size * sizeof *missing);
  char warn[2048];
  size_t len = 0;
  warn[0] = '\0';
  if (!missing) return;
  inspect_join(e, now, check_ms, missing);
  for (pending *p = e->pending_head; p; p = p->next) {
    int n = missing_ranks(e, p, set_of(e, p), missing);
    uint64_t age = now - p->first_seen_ms;
    if (n == 0 || age < check_ms) continue;
    if (shut_ms > 0 && age >= shut_ms) {
      char (*fails)[HVD_NAME_MAX] = realloc(mine->fails, (mine->nfail + 1) * sizeof *fails);
      if (fails) {
        mine->fails = fails;
        snprintf(fails[mine->nfail++], HVD_NAME_MAX, "%s", p->req.name);
      }
    }
    if (now - p->warned_ms < check_ms || len >= sizeof warn) continue;
    p->warned_ms = now;
    char ranks[256];
    format_ranks(ranks, sizeof ranks, missing, n);
    len += (size_t)snprintf(warn + len, sizeof warn - len, "%s'%s' missing ranks: %s",
                            len ? "; " : "", p->req.name, ranks);
  }
  free(missing);
  if (len)
    hvd__log(HVD_LOG_WARNING,
             "Stall: one or more tensors were submitted by some ranks and have waited more "
             "than %ld s (HOROVOD_STALL_CHECK_TIME_SECONDS) for the others, which may mean "
             "the ranks submit different tensors or only some of them reach this step: %s",
             e->stall_check_s, warn);
}
