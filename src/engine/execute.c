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
 * Allreduces of several tensors are reduced as one collective over a
 * layout that goes segment by segment (segment s of the fused collective
 * holds segment s of each tensor, see coll/allreduce.c), so every element
 * is reduced exactly as it would be alone: fused and unfused results are
 * bitwise equal.  For the same reason each tensor's algorithm (ring or
 * recursive doubling) follows from its own size: a fused response runs
 * one collective per algorithm among its tensors.  The hierarchical
 * allreduce, when on, takes every tensor of the global communicator and
 * the same segments.  The tensors stay where
 * they are; the engine's buffer only holds a joined rank's zeros and
 * scratch for the other kinds.
 *
 * A communicator with other collectives (c->coll: MPI's, under
 * HOROVOD_CPU_OPERATIONS=mpi) runs every kind through them instead --
 * fused allreduces as one call over each tensor, reduced alone -- except
 * Adasum, which is hvd's own algorithm.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coll/coll.h"
#include "../reduce.h"
#include "device.h"
#include "engine_int.h"

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

/* Where the items lie and how they are laid out: one allocation for the
 * response.  algo[i] is the algorithm item i is reduced with, chosen by
 * its own size so that fusing it with others changes none of its bits
 * (HVD_AR_AUTO: none, rider.c reduced it already). */
typedef struct {
  char **at;
  unsigned char *algo;
  hvd_piece *pieces; /* [n * k] */
  hvd_pieces *segs;  /* [n] */
} layout;

static void *layout_new(const job *j, layout *l) {
  size_t n = (size_t)j->c->size, k = (size_t)j->r->n;
  char *m = calloc(1, k * sizeof *l->at + n * k * sizeof *l->pieces + n * sizeof *l->segs + k);
  if (!m) return NULL;
  l->at = (char **)m;
  l->pieces = (hvd_piece *)(m + k * sizeof *l->at);
  l->segs = (hvd_pieces *)(m + k * sizeof *l->at + n * k * sizeof *l->pieces);
  l->algo = (unsigned char *)(l->segs + n);
  if (j->c->coll || j->r->items[0]->req.op == HVD_ADASUM) return m; /* not hvd's algorithms */
  for (size_t i = 0; i < k; i++) {
    const pending *p = j->r->items[i];
    l->algo[i] = p->mine && p->mine->prereduced
                     ? HVD_AR_AUTO : hvd__allreduce_algo(j->c, p->req.count * j->esize);
  }
  return m;
}

/* Segment s of the fused buffer is segment s of every item reduced with
 * `algo`, in order: the layout that keeps each element's reduction order
 * what it is alone.  Returns how many items that is. */
static int lay_out(const job *j, const layout *l, hvd_ar_algo algo) {
  int n = j->c->size, k = j->r->n, used = 0;
  char **at = l->at;
  hvd_piece *pieces = l->pieces;
  hvd_pieces *segs = l->segs;
  for (int i = 0; i < k; i++) {
    if (l->algo[i] != algo) continue;
    size_t count = j->r->items[i]->req.count;
    for (int s = 0; s < n; s++) {
      pieces[s * k + used].ptr = at[i] + hvd__split_offset(count, n, s) * j->esize;
      pieces[s * k + used].len = hvd__split_count(count, n, s) * j->esize;
    }
    used++;
  }
  for (int s = 0; s < n; s++) segs[s] = (hvd_pieces){&pieces[s * k], used};
  return used;
}

/* One collective for the items reduced with `algo`, if there are any. */
static int reduce_group(const job *j, const layout *l, hvd_ar_algo algo) {
  if (lay_out(j, l, algo) == 0) return 0;
  return hvd__allreduce_pieces(j->c, algo, l->segs, j->dtype, (hvd_op)j->r->items[0]->req.op);
}

/* The tensors through c->coll, each reduced by itself. */
static int other_allreduce(const job *j, char **at) {
  int k = j->r->n;
  size_t *counts = calloc((size_t)k, sizeof *counts);
  if (!counts) return hvd__err(HVD_E_NOMEM, "allocating %d counts", k);
  for (int i = 0; i < k; i++) counts[i] = j->r->items[i]->req.count;
  int rc = j->c->coll->allreduce(j->c, (void *const *)at, counts, k, j->dtype,
                                 (hvd_op)j->r->items[0]->req.op);
  free(counts);
  return rc;
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
  layout l = {0};
  char *zeros = scratch(j->e, zero_bytes);
  void *mem = layout_new(j, &l);
  char **at = mem ? l.at : NULL;
  int rc = (mem && (zeros || !zero_bytes))
               ? 0 : hvd__err(HVD_E_NOMEM, "allocating the layout of %d tensors", k);
  for (int i = 0; rc == 0 && i < k; i++) {
    at[i] = stage_item(j, j->r->items[i], zeros);
    if (!j->r->items[i]->mine) zeros += j->r->items[i]->req.count * j->esize;
  }
  char args[96] = "", rode[112] = "";
  if (j->e->tl) {
    int len = snprintf(args, sizeof args, "{\"tensors\":%d,\"bytes\":%zu,\"dtype\":\"%s\"}", k,
                       total, hvd_dtype_name(j->dtype));
    snprintf(rode, sizeof rode, "%.*s,\"rode\":1}", len - 1, args); /* the same, one key more */
  }
  if (rc == 0) {
    trace_all(j, "ALLREDUCE", args, rode);
    if (req->op == HVD_ADASUM) { /* per tensor: a group's members one by one */
      for (int i = 0; rc == 0 && i < k; i++)
        rc = hvd__adasum(j->c, at[i], j->r->items[i]->req.count, j->dtype);
    } else if (j->c->coll) {
      rc = other_allreduce(j, at);
    } else {
      for (int a = HVD_AR_AUTO + 1; rc == 0 && a < HVD_AR_N; a++)
        rc = reduce_group(j, &l, (hvd_ar_algo)a);
    }
    for (int i = 0; rc == 0 && i < k; i++)
      if (j->r->items[i]->mine)
        hvd__reduce_scale(at[i], j->r->items[i]->req.count, j->dtype, req->postscale);
    trace_end_all(j);
  }
  free(mem);
  return rc;
}

/* ---- the others: one tensor each ---- */

static int run_broadcast(const job *j, pending *p) {
  size_t bytes = p->req.count * j->esize;
  void *buf = p->mine ? p->mine->w.recvbuf : scratch(j->e, bytes);
  if (!buf && bytes) return hvd__err(HVD_E_NOMEM, "scratch of %zu bytes", bytes);
  if (j->c->coll) return j->c->coll->broadcast(j->c, buf, bytes, p->req.root);
  return hvd__broadcast(j->c, buf, bytes, p->req.root);
}

int hvd__gather(hvd_comm *c, int type, const void *send, size_t count,
                const size_t *sendcounts, size_t esize, void **out, size_t *counts) {
  if (type == HVD_REQ_ALLTOALL)
    return c->coll ? c->coll->alltoall(c, send, sendcounts, esize, out, counts)
                   : hvd__alltoall(c, send, sendcounts, esize, out, counts);
  return c->coll ? c->coll->allgather(c, send, count, esize, out, counts)
                 : hvd__allgather_tensor(c, send, count, esize, out, counts);
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
  int rc = j->c->coll ? j->c->coll->reducescatter(j->c, send, out, count, j->dtype, rop)
                      : hvd__reducescatter(j->c, send, out, count, j->dtype, rop);
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
    case HVD_REQ_BARRIER: return j->c->coll ? j->c->coll->barrier(j->c) : hvd__barrier(j->c);
    case HVD_REQ_PSET_ADD:
      HVD__CHECK(hvd__pset_add(j->e, p->mine->ranks, (int)p->req.count, &id));
      *value = id;
      return 0;
    case HVD_REQ_PSET_REMOVE: return hvd__pset_remove(j->e, p->req.root);
    default: return hvd__err(HVD_E_PROTOCOL, "unknown request type %d", p->req.type);
  }
}

/* Finishes every item of r with status; frees them.  A failure's message
 * is given without the tensor: each item's names its own. */
static void finish_all(hvd_engine *e, response *r, int status, const char *msg, int64_t value) {
  char why[1024] = "";
  if (status < 0) snprintf(why, sizeof why, "%s", msg ? msg : ""); /* may be this thread's error */
  for (int i = 0; i < r->n; i++) {
    pending *p = r->items[i];
    if (p->mine && status < 0 && !r->error) hvd__engine_fail_entry(e, p->mine, status, why);
    else if (p->mine && status < 0) hvd__engine_finish(e, p->mine, status, why);
    else if (p->mine) p->mine->op->value = value, hvd__engine_finish(e, p->mine, 0, NULL);
    hvd__pending_free(p);
  }
  r->n = 0;
}

int hvd__execute(hvd_engine *e, response *r) {
  if (r->error) {
    finish_all(e, r, r->error, r->errmsg ? r->errmsg : "out of memory describing the error", 0);
    return 0;
  }
  for (int i = 0; i < r->n; i++) hvd__held_recheck(e, hvd__cache_put(e->cache, &r->items[i]->req));
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
    rc = hvd__device_execute(e, r, j.c, &fatal);
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
  hvd__tuning_record(e, r);
  finish_all(e, r, 0, NULL, value);
  return 0;
}
