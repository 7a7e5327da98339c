/*
 * execute.c -- running a planned response on this rank.
 *
 * Every rank runs the same responses in the same order; a rank outside a
 * response's process set skips it.  A joined rank has no entry for the
 * tensor and stands in: zeros for allreduce and reducescatter, a scratch
 * buffer for broadcast (allgather and alltoall fail in negotiation when a
 * rank has joined).  A grouped response of another kind than allreduce
 * runs its tensors one after the other, in index order.
 *
 * Allreduces of several tensors are reduced where they lie, each with
 * the bits it gets alone, as one collective per algorithm among them
 * (coll/tensors.c): fused and unfused results are bitwise equal.  The
 * engine's buffer only holds a joined rank's zeros and scratch for the
 * other kinds.
 *
 * Every collective runs through the process set's collectives
 * (coll/dispatch.h: MPI's under HOROVOD_CPU_OPERATIONS=mpi, else hvd's),
 * except Adasum, which is hvd's own algorithm.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/dispatch.h"
#include "reduce.h"
#include "device.h"
#include "engine_int.h"

/* Tensors of a fused allreduce whose places are kept on the stack. */
#define FEW 8

/* The engine's scratch, grown to at least `bytes`; NULL if that fails. */
static void *scratch(hvd_engine *e, size_t bytes) {
  if (bytes > e->scratch_cap) {
    void *p = realloc(e->scratch, bytes);
    if (!p) return NULL;
    e->scratch = p, e->scratch_cap = bytes;
  }
  return e->scratch;
}

static hvd_comm *comm_of(hvd_engine *e, const hvd_request *req) {
  if (req->process_set == 0) return e->global;
  pset *s = hvd__pset_find(e, req->process_set);
  return s && s->member ? &s->comm : NULL;
}

static const char *collective_name(int type) {
  static const char *const names[] = {"ALLREDUCE", "BROADCAST", "ALLGATHER", "ALLTOALL",
                                      "REDUCESCATTER", "BARRIER", "PROCESS_SET", "PROCESS_SET"};
  return type >= 0 && type < HVD_REQ__COUNT ? names[type] : "?";
}

/* ---- allreduce ---- */

typedef struct {
  hvd_engine *e;
  response *r;
  hvd_comm *c;
  hvd_dtype dtype;
  size_t esize;
} job;

/* rode: the args of a tensor reduced on the fast path's exchange
 * (rider.c), whose input went there instead of through MEMCPY_IN. */
static void trace_all(const job *j, const char *phase, const char *args, const char *rode) {
  for (int i = 0; i < j->r->n; i++) {
    const entry *en = j->r->items[i]->mine;
    hvd__timeline_begin(j->e->tl, j->r->items[i]->req.name, phase,
                        en && en->prereduced ? rode : args);
  }
}

static void trace_end_all(const job *j) {
  for (int i = 0; i < j->r->n; i++) hvd__timeline_end(j->e->tl, j->r->items[i]->req.name);
}

/* Where item p's data lives while it is reduced: its recvbuf (in place,
 * after copying sendbuf there when they differ: the MEMCPY_IN phase), or,
 * for a joined rank, zeros in the engine's buffer. */
static char *stage_item(const job *j, const pending *p, char *zeros) {
  entry *en = p->mine;
  size_t bytes = p->req.count * j->esize;
  if (!en) {
    memset(zeros, 0, bytes);
    return zeros;
  }
  if (en->prereduced) return en->w.recvbuf; /* rider.c: reduced, prescaled */
  if (en->w.sendbuf != en->w.recvbuf && bytes) {
    hvd__timeline_begin(j->e->tl, p->req.name, "MEMCPY_IN_FUSION_BUFFER", NULL);
    memcpy(en->w.recvbuf, en->w.sendbuf, bytes);
    hvd__timeline_end(j->e->tl, p->req.name);
  }
  hvd__reduce_scale(en->w.recvbuf, p->req.count, j->dtype, p->req.prescale);
  return en->w.recvbuf;
}

/* The tensors not reduced yet (rider.c reduced a prereduced one on the
 * fast path's exchange), each by itself, through the set's collectives;
 * Adasum, hvd's own algorithm, per tensor (a group's members one by one). */
static int reduce_items(const job *j, char **at, size_t *counts) {
  const hvd_request *req = &j->r->items[0]->req;
  int k = j->r->n, m = 0;
  if (req->op == HVD_ADASUM) {
    for (int i = 0; i < k; i++)
      HVD__CHECK(hvd__adasum(j->c, at[i], j->r->items[i]->req.count, j->dtype));
    return 0;
  }
  for (int i = 0; i < k; i++) {
    const entry *en = j->r->items[i]->mine;
    if (en && en->prereduced) continue;
    at[m] = at[i], counts[m++] = j->r->items[i]->req.count;
  }
  if (m == 0) return 0;
  return hvd__coll_allreduce_tensors(j->c, (void *const *)at, counts, m, j->dtype, (hvd_op)req->op);
}

/* The timeline's args of a fused allreduce, and the same for a tensor
 * that rode the fast path's exchange (one key more). */
static void trace_args(const job *j, size_t total, char *args, size_t cap, char *rode,
                       size_t rode_cap) {
  int len = snprintf(args, cap, "{\"tensors\":%d,\"bytes\":%zu,\"dtype\":\"%s\"}", j->r->n,
                     total, hvd_dtype_name(j->dtype));
  snprintf(rode, rode_cap, "%.*s,\"rode\":1}", len - 1, args);
}

/* Fused or not, the tensors are reduced where they lie: no fusion-buffer
 * copies (on loopback TCP the network runs at memory speed, so copying
 * 100 MB in and out cost as much as the collective).  Inputs are copied
 * only when out of place, and that is the MEMCPY_IN_FUSION_BUFFER phase. */
static int run_allreduce(const job *j) {
  const hvd_request *req = &j->r->items[0]->req;
  int n = j->c->size, k = j->r->n;
  size_t zero_bytes = 0, total = 0;
  if (n < 1 || k < 1) return hvd__err(HVD_E_INVALID, "allreduce of %d tensors over %d ranks", k, n);
  for (int i = 0; i < k; i++) {
    total += j->r->items[i]->req.count * j->esize;
    if (!j->r->items[i]->mine) zero_bytes += j->r->items[i]->req.count * j->esize;
  }
  /* where each tensor lies, and its count: on the stack for a few */
  char *few_at[FEW];
  size_t few_counts[FEW];
  char **at = k <= FEW ? few_at : malloc((size_t)k * (sizeof *at + sizeof *few_counts));
  size_t *counts = k <= FEW ? few_counts : (size_t *)(at ? at + k : NULL);
  char *zeros = scratch(j->e, zero_bytes);
  int rc = (at && (zeros || !zero_bytes))
               ? 0 : hvd__err(HVD_E_NOMEM, "allocating the layout of %d tensors", k);
  for (int i = 0; rc == 0 && i < k; i++) {
    at[i] = stage_item(j, j->r->items[i], zeros);
    if (!j->r->items[i]->mine) zeros += j->r->items[i]->req.count * j->esize;
  }
  char args[96] = "", rode[112] = "";
  if (j->e->tl) trace_args(j, total, args, sizeof args, rode, sizeof rode);
  if (rc == 0) {
    trace_all(j, "ALLREDUCE", args, rode);
    rc = reduce_items(j, at, counts);
    for (int i = 0; rc == 0 && i < k; i++)
      if (j->r->items[i]->mine)
        hvd__reduce_scale(j->r->items[i]->mine->w.recvbuf, j->r->items[i]->req.count, j->dtype,
                          req->postscale);
    trace_end_all(j);
  }
  if (at != few_at) free(at);
  return rc;
}

/* ---- the others: one tensor each ---- */

static int run_broadcast(const job *j, pending *p) {
  size_t bytes = p->req.count * j->esize;
  void *buf = p->mine ? p->mine->w.recvbuf : scratch(j->e, bytes);
  if (!buf && bytes) return hvd__err(HVD_E_NOMEM, "scratch of %zu bytes", bytes);
  return hvd__coll_broadcast(j->c, buf, bytes, p->req.root);
}

/* allgather and alltoall: the result is the caller's (a joined rank
 * standing in for an allgather sends nothing and drops it; negotiation
 * refuses alltoall then). */
static int run_gather(const job *j, pending *p) {
  entry *en = p->mine;
  void *out = NULL;
  size_t *counts = calloc((size_t)j->c->size, sizeof *counts);
  if (!counts) return hvd__err(HVD_E_NOMEM, "allocating %d counts", j->c->size);
  int rc = hvd__gather(j->c, p->req.type, en ? en->w.sendbuf : NULL, en ? en->w.local_count : 0,
                       en ? en->sendcounts : NULL, j->esize, &out, counts);
  if (rc == 0 && en) {
    hvd__gather_deliver(en, out, counts, j->c->size);
  } else {
    free(out);
  }
  free(counts);
  return rc;
}

static int run_reducescatter(const job *j, pending *p) {
  entry *en = p->mine;
  size_t count = p->req.count, own = hvd__split_count(count, j->c->size, j->c->rank);
  /* Scaling or a joined rank's zeros need a copy of the input. */
  int copy = !en || p->req.prescale != 1.0;
  char *in = copy ? scratch(j->e, (count + own) * j->esize) : NULL;
  if (copy && !in && count) return hvd__err(HVD_E_NOMEM, "scratch of %zu elements", count);
  char *out = en ? en->w.recvbuf : in + count * j->esize;
  if (copy && en) memcpy(in, en->w.sendbuf, count * j->esize);
  else if (copy) memset(in, 0, count * j->esize);
  if (copy) hvd__reduce_scale(in, count, j->dtype, p->req.prescale);
  const void *send = copy ? in : en->w.sendbuf;
  hvd_op rop = (hvd_op)p->req.op;
  int rc = hvd__coll_reducescatter(j->c, send, out, count, j->dtype, rop);
  if (rc == 0) hvd__reduce_scale(out, own, j->dtype, p->req.postscale);
  return rc;
}

static int run_single(const job *j, pending *p, int64_t *value) {
  int id;
  switch (p->req.type) {
    case HVD_REQ_BROADCAST: return run_broadcast(j, p);
    case HVD_REQ_ALLGATHER:
    case HVD_REQ_ALLTOALL: return run_gather(j, p);
    case HVD_REQ_REDUCESCATTER: return run_reducescatter(j, p);
    case HVD_REQ_BARRIER: return hvd__coll_barrier(j->c);
    case HVD_REQ_PSET_ADD:
      HVD__CHECK(hvd__pset_add(j->e, p->mine->ranks, (int)p->req.count, &id));
      *value = id;
      return 0;
    case HVD_REQ_PSET_REMOVE: return hvd__pset_remove(j->e, p->req.root);
    default: return hvd__err(HVD_E_PROTOCOL, "unknown request type %d", p->req.type);
  }
}

void hvd__pending_free(pending *p) {
  if (!p) return;
  free(p->reqs);
  free(p->submitted);
  free(p);
}

void hvd__responses_free(response *rs, int n) {
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < rs[i].n; k++) hvd__pending_free(rs[i].items[k]);
    free(rs[i].items);
    free(rs[i].errmsg);
  }
  free(rs);
}

/* Finishes every item of r with status; frees them.  A failure's message
 * is given without the tensor: each item's names its own. */
static void finish_all(hvd_engine *e, response *r, int status, const char *msg, int64_t value) {
  char why[1024] = "";
  if (status < 0) snprintf(why, sizeof why, "%s", msg ? msg : ""); /* may be this thread's error */
  for (int i = 0; i < r->n; i++) {
    pending *p = r->items[i];
    if (p->mine && status < 0 && !r->error) hvd__engine_fail_entry(&e->core, p->mine, status, why);
    else if (p->mine && status < 0) hvd__engine_finish(&e->core, p->mine, status, why);
    else if (p->mine) p->mine->op->value = value, hvd__engine_finish(&e->core, p->mine, 0, NULL);
    hvd__pending_free(p);
  }
  r->n = 0;
}

int hvd__execute(hvd_engine *e, response *r) {
  if (r->error) {
    finish_all(e, r, r->error, r->errmsg ? r->errmsg : "out of memory describing the error", 0);
    return 0;
  }
  for (int i = 0; i < r->n; i++)
    hvd__held_recheck(&e->core, e->cache, hvd__cache_put(e->cache, &r->items[i]->req));
  const hvd_request *req = &r->items[0]->req;
  job j = {e, r, comm_of(e, req), (hvd_dtype)req->dtype, hvd_dtype_size((hvd_dtype)req->dtype)};
  /* Process set changes involve every rank; collectives only members. */
  int everyone = req->type == HVD_REQ_PSET_ADD || req->type == HVD_REQ_PSET_REMOVE;
  if (!j.c && !everyone) {
    finish_all(e, r, 0, NULL, 0);
    return 0;
  }
  if (everyone) j.c = e->global;
  int64_t value = 0;
  int rc, fatal = !everyone; /* a collective may have left frames half sent */
  if (req->on_device) {
    rc = hvd__device_execute(&e->dev, r, j.c, e->tl, &fatal);
  } else if (req->type == HVD_REQ_ALLREDUCE) {
    rc = run_allreduce(&j);
  } else { /* one collective per tensor: a group's in index order */
    rc = 0;
    for (int i = 0; rc == 0 && i < r->n; i++) {
      const char *name = r->items[i]->req.name;
      char args[96];
      snprintf(args, sizeof args, "{\"tensors\":1,\"bytes\":%zu,\"dtype\":\"%s\"}",
               r->items[i]->req.count * j.esize, hvd_dtype_name(j.dtype));
      hvd__timeline_begin(e->tl, name, collective_name(req->type), args);
      rc = run_single(&j, r->items[i], &value);
      hvd__timeline_end(e->tl, name);
    }
  }
  if (rc < 0) {
    finish_all(e, r, rc, hvd_last_error(), 0);
    return fatal ? rc : 0;
  }
  hvd__tuning_record(&e->tuning, r);
  finish_all(e, r, 0, NULL, value);
  return 0;
}
