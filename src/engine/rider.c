/*
 * rider.c -- a small allreduce carried in the fast path's exchange.
 *
 * A blocking allreduce of a cached tensor costs two rounds: the fast
 * path's vector of cache bits (cycle.c), then the collective.  At small
 * sizes each round is all latency, so the engine costs twice what the
 * collective alone does.  The rider folds the second round into the first:
 * the tensor's values travel with the vector, and when every rank turns
 * out to have sent them, every rank reduces them itself.
 *
 * Which tensor may ride must be known before the exchange, on every rank
 * alike, because it fixes the size of what the ranks exchange.  The guess
 * is the tensor that ran alone on the fast path after the one that ran
 * alone last, the last time that one did: a loop calling several small
 * allreduces in turn (a loss, then each metric) rides every call once
 * learned; one calling the same one rides it again.  Every rank learns it
 * from the fast vector's agreed bits and the response cache, which every
 * rank holds identically.  A rank that holds it sends its values
 * (scaled by its prescale factor, as execute.c would); a rank that does
 * not sends the same number of bytes, unread, and a 0 flag.  The vector
 * becomes an allgather of fixed-size records: one sync through the shm
 * windows, or Bruck's rounds over TCP, which cost what recursive doubling
 * of the vector cost.
 *
 * When every flag is 1 and no rank needs the full exchange, each rank
 * reduces the gathered values into its output with the bits the
 * collective would have given (coll/gathered.c: the shm allreduce's rank
 * order, or recursive doubling's tree) and marks the tensor prereduced:
 * execute.c then only applies its postscale factor; when it is the only
 * tensor of the cycle and there is no timeline to write or tuner to feed,
 * it is finished right there, without negotiation's table, a plan or a
 * response (the cache touched as execute would, alone in the cycle: the
 * caches stay alike on every rank, whichever way each went; its handle
 * completes under the lock the driver takes back after every cycle, not
 * under one more take).  Otherwise the values
 * are dropped and the tensor runs as before.  Only what reduce_gathered
 * reproduces rides: host allreduces of the global set up to
 * HOROVOD_FAST_PATH_RIDER_BYTES (0 turns riding off), not Adasum, not
 * grouped, not through another library's collectives or the hierarchy.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "reduce.h"
#include "engine_int.h"

/* Records and the values in them start at multiples of 8, every dtype's
 * alignment, and no further: a record of 40 bytes at most travels in the
 * shm sync's own line (HVD_SYNC_SMALL), which a 32-byte tensor with a few
 * cached tensors' bits then fits. */
static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Whether q may ride, and the algorithm its collective would have run
 * (reduce_gathered reproduces its bits), chosen here once per cycle. */
static int rides(const hvd_engine *e, const hvd_request *q, hvd_ar_algo *algo) {
  if (!q || q->type != HVD_REQ_ALLREDUCE || q->on_device || q->process_set != 0 ||
      q->group_size || q->op == HVD_ADASUM || e->global->coll)
    return 0;
  size_t bytes = q->count * hvd_dtype_size((hvd_dtype)q->dtype);
  if (bytes == 0 || bytes > e->fast.rider_max) return 0; /* 0: nothing to carry */
  *algo = hvd__allreduce_algo(e->global, bytes);
  return *algo == HVD_AR_SHM || *algo == HVD_AR_RECURSIVE_DOUBLING;
}

int64_t hvd__rider_id(const hvd_engine *e, hvd_ar_algo *algo) {
  if (e->fast.rider < 0 || e->size < 2) return -1;
  return rides(e, hvd__cache_get(e->cache, (uint32_t)e->fast.rider), algo) ? e->fast.rider : -1;
}

/* The cache id this fast cycle runs alone (the vector's only 1), or -1. */
static int64_t alone(const hvd_engine *e) {
  uint32_t used = hvd__cache_used(e->cache);
  int64_t only = -1;
  for (uint32_t id = 0; id < used; id++)
    if (e->fast.vec[1 + id]) {
      if (only >= 0) return -1;
      only = id;
    }
  return only;
}

void hvd__rider_learn(hvd_engine *e) {
  hvd__fast *f = &e->fast;
  int64_t id = alone(e);
  if (id < 0) return;
  if (f->alone_last >= 0) f->alone_next[f->alone_last] = (uint32_t)id + 1;
  f->alone_last = id;
  int64_t guess = f->alone_next[id] ? (int64_t)f->alone_next[id] - 1 : id;
  /* The same id again needs no second look: hvd__rider_id() checks it
   * before every exchange. */
  if (guess == f->rider) return;
  hvd_ar_algo algo;
  if (rides(e, hvd__cache_get(e->cache, (uint32_t)guess), &algo)) f->rider = guess;
  else if (id != f->rider && rides(e, hvd__cache_get(e->cache, (uint32_t)id), &algo)) f->rider = id;
}

/* The records gathered: the vectors' MIN into fast.vec; 1 if every rank
 * sent the rider's values. */
static int merge(hvd_engine *e, const uint8_t *all, size_t n, size_t stride) {
  int every = 1;
  for (int r = 0; r < e->size; r++) {
    const uint8_t *v = all + (size_t)r * stride;
    every &= v[0] == 1;
    for (size_t i = 0; i < n; i++)
      if (v[1 + i] < e->fast.vec[i]) e->fast.vec[i] = v[1 + i];
  }
  return every;
}

/* Every rank's values in hand: this rank's output, with the bits of the
 * collective the tensor would have run. */
static int finish(hvd_engine *e, entry *en, hvd_ar_algo algo, uint8_t *all, size_t head,
                  size_t stride) {
  const hvd_request *q = &en->w.req;
  hvd_dtype dt = (hvd_dtype)q->dtype;
  int n = e->size; /* >= 2: hvd__rider_id() */
  void *few[64], **vecs = n <= 64 ? few : malloc((size_t)n * sizeof *vecs);
  if (!vecs) return hvd__err(HVD_E_NOMEM, "allocating %d pointers", n);
  vecs[0] = all + head; /* set before the loop: gcc cannot tell the loop runs */
  for (int r = 1; r < n; r++) vecs[r] = all + (size_t)r * stride + head;
  int rc = hvd__reduce_gathered(e->global, algo, vecs, q->count, dt, (hvd_op)q->op,
                                en->w.recvbuf);
  if (vecs != few) free(vecs);
  if (rc < 0) return hvd__err_prefix(rc, "allreduce '%s' on the fast path", q->name);
  en->prereduced = 1;
  HVD__BUMP(e->fast.rider_tensors);
  return 0;
}

int hvd__rider_exchange(hvd_engine *e, int64_t id, hvd_ar_algo algo, size_t n) {
  const hvd_request *q = hvd__cache_get(e->cache, (uint32_t)id);
  hvd_dtype dt = (hvd_dtype)q->dtype;
  size_t bytes = q->count * hvd_dtype_size(dt), head = align8(1 + n);
  size_t stride = head + align8(bytes), total = stride * (size_t)e->size;
  hvd__fast *f = &e->fast;
  if (total > f->rider_cap) {
    uint8_t *b = realloc(f->rider_buf, total);
    if (!b) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes for the fast path", total);
    f->rider_buf = b, f->rider_cap = total;
  }
  uint8_t *mine = f->rider_buf + (size_t)e->rank * stride;
  entry *en = e->core.held[id];
  memset(mine, 0, stride); /* the padding too: no stale bytes on the wire */
  mine[0] = en != NULL;
  memcpy(mine + 1, f->vec, n);
  if (en) {
    memcpy(mine + head, en->w.sendbuf, bytes);
    hvd__reduce_scale(mine + head, q->count, dt, q->prescale);
  }
  HVD__CHECK(hvd__allgather_equal(e->global, mine, stride, f->rider_buf));
  if (!merge(e, f->rider_buf, n, stride) || !f->vec[0] || !f->vec[1 + id] || !en) return 0;
  return finish(e, en, algo, f->rider_buf, head, stride);
}

int hvd__rider_finish(hvd_engine *e) {
  entry *en = e->fast.rider >= 0 ? e->core.held[e->fast.rider] : NULL;
  if (!en || !en->prereduced || e->tl || e->tuning.tuner) return 0;
  if (alone(e) != e->fast.rider) return 0; /* others run too: through the plan, in order */
  const hvd_request *q = &en->w.req;
  hvd__unsent_remove(&e->core, en); /* unholds it */
  hvd__cache_touch(e->cache, (uint32_t)e->fast.rider); /* held under it: equal */
  hvd__reduce_scale(en->w.recvbuf, q->count, (hvd_dtype)q->dtype, q->postscale);
  en->op->value = 0;
  /* counted before the handle completes, as negotiation counts it: a
   * caller woken by it reads the count with its result */
  HVD__BUMP(e->fast.tensors);
  e->core.finish_later = en; /* drive() finishes it when it takes the lock back */
  return 1;
}
