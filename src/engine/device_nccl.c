/*
 * device_nccl.c -- the NCCL path for tensors in device memory (the
 * hvd__device_nccl table, device.h), chosen as Horovod chooses it:
 * HOROVOD_GPU_OPERATIONS=NCCL, or HOROVOD_GPU_ALLREDUCE=NCCL for
 * allreduces (device.c reads the knobs, the ranks negotiate the path with
 * each request).
 *
 * One NCCL communicator per process set, made at the set's first NCCL
 * response (rank 0's ncclUniqueId sent by the set's host broadcast) and
 * kept until shutdown; the collectives run on a stream of the path's own,
 * and the engine completes the tensors when an event recorded after them
 * has completed, waiting with a deadline (docs/gpu.md).
 *
 * Each response goes: (1) a refusal decided from the request alone, so
 * identical on every rank (a dtype NCCL cannot reduce, scale factors it
 * cannot apply); (2) one small host allreduce in which every rank says
 * whether it has the path (libcudart, a device, libnccl, the set's
 * communicator or rank 0's ncclUniqueId), so that a rank without a GPU
 * fails the tensor on every rank instead of leaving the others in a
 * collective it never joins; at a set's first response, the id is then
 * broadcast over hvd's host communicator, every rank makes its NCCL
 * communicator (non-blocking, polled against a deadline) and a second
 * agreement says whether all did; (3) the collectives queued on the
 * path's stream, an event recorded after them, and the engine waits for
 * it, polling the event and NCCL's asynchronous error against the
 * deadline.  A failure after (2) aborts the communicator (ncclCommAbort
 * never waits for the peers).
 *
 * Communicators are made non-blocking (ncclConfig_t.blocking = 0): every
 * call may return ncclInProgress and is then polled to its end, so that
 * a rank that never arrives costs a deadline, not a hang.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/dispatch.h"
#include "reduce.h"
#include "transport/live.h"
#include "device.h"
#include "engine_int.h"
#ifdef HVD_WITH_NCCL
#include "gpu/cuda/cudart.h"
#include "gpu/nccl/nccl_lib.h"
#endif

#define DEADLINE_MS 600000 /* one response's collectives, or a communicator's set-up */
#define CLOSE_MS 10000     /* a communicator's finalisation at shutdown */
#define NO_PATH "has no NCCL path for device memory"

#ifndef HVD_WITH_NCCL

static int nccl_execute(hvd__device *d, response *r, hvd_comm *c, hvd_timeline *tl, int *fatal) {
  HVD__UNUSED(d), HVD__UNUSED(r), HVD__UNUSED(tl);
  int rc = hvd__err(HVD_E_UNSUPPORTED, "this libhvd was built without NCCL (HVD_WITH_NCCL)");
  HVD__CHECK(hvd__coll_agree(c, rc, NO_PATH, fatal));
  return hvd__err(HVD_E_PROTOCOL, "the ranks agreed on NCCL that no rank has");
}

static void nccl_close(hvd__device *d, int broken) { HVD__UNUSED(d), HVD__UNUSED(broken); }

const hvd__device_ops hvd__device_nccl = {"NCCL", NULL, nccl_execute, nccl_close};

#else

/* One process set's communicator; the set's id, size and this rank's
 * place in it, so that a set re-made under an old id gets a new one. */
typedef struct nccl_comm {
  int set, size, rank;
  ncclComm_t comm;
  struct nccl_comm *next;
} nccl_comm;

struct hvd__nccl_path {
  const hvd__cudart *rt;
  const hvd__nccl *nc;
  int device;          /* the first device tensor's: one GPU per process */
  cudaStream_t stream; /* every collective and copy of the path, in order */
  cudaEvent_t done;    /* recorded after a response's work */
  void *fusion;        /* the NCCL path's device fusion buffer */
  size_t fusion_cap;
  void *host;          /* pinned: the hierarchical allreduce's shard, across hosts */
  size_t host_cap;
  nccl_comm *comms;
};
typedef struct hvd__nccl_path path;

/* ---- what NCCL cannot do: decided from the request, alike on every rank ---- */

static int nccl_dtype(int dtype, ncclDataType_t *t) {
  switch (dtype) {
    case HVD_UINT8: case HVD_BOOL: *t = ncclUint8; return 1;
    case HVD_INT8: *t = ncclInt8; return 1;
    case HVD_INT32: *t = ncclInt32; return 1;
    case HVD_INT64: *t = ncclInt64; return 1;
    case HVD_FLOAT16: *t = ncclFloat16; return 1;
    case HVD_BFLOAT16: *t = ncclBfloat16; return 1;
    case HVD_FLOAT32: *t = ncclFloat32; return 1;
    case HVD_FLOAT64: *t = ncclFloat64; return 1;
    default: return 0; /* int16, uint16: NCCL has no 16-bit integers */
  }
}

static int floating(int dtype) {
  return dtype == HVD_FLOAT16 || dtype == HVD_BFLOAT16 || dtype == HVD_FLOAT32 ||
         dtype == HVD_FLOAT64;
}

/* How a reduction runs: NCCL's op, or a pre-multiplied sum by `scalar`
 * (ncclRedOpCreatePreMulSum) when `premul`. */
typedef struct {
  ncclDataType_t type;
  ncclRedOp_t op;
  int premul;
  double scalar;
} reduction;

/* The scale factors become one multiplier applied before the sum:
 * (x * pre) summed, times post, is x * (pre * post) summed -- the same
 * bits where the products are exact, as Horovod's NCCL and CPU paths are
 * not bitwise equal either.  Floating-point Sum and Average only (whose
 * 1/size joins the multiplier): NCCL takes a scalar of the tensor's type,
 * for float16 and bfloat16 the multiplier rounded to it. */
static int plan_reduction(const hvd_request *q, int size, reduction *rd, char *why, size_t cap) {
  const char *kind = hvd__req_type_name(q->type);
  if (!nccl_dtype(q->dtype, &rd->type)) {
    snprintf(why, cap, "%s '%s': NCCL has no reduction for %s (unset HOROVOD_GPU_OPERATIONS / "
             "HOROVOD_GPU_ALLREDUCE, or set MPI or GLOO, for the staged path; docs/gpu.md)",
             kind, q->name, hvd_dtype_name((hvd_dtype)q->dtype));
    return HVD_E_UNSUPPORTED;
  }
  int is_bool = q->dtype == HVD_BOOL;
  static const ncclRedOp_t ops[] = {[HVD_AVERAGE] = ncclAvg, [HVD_SUM] = ncclSum,
                                    [HVD_MIN] = ncclMin, [HVD_MAX] = ncclMax,
                                    [HVD_PRODUCT] = ncclProd};
  rd->op = ops[q->op];
  if (is_bool) /* hvd's bool: Sum and Max are or, Min and Product and */
    rd->op = q->op == HVD_SUM || q->op == HVD_MAX ? ncclMax : ncclMin;
  double factor = q->prescale * q->postscale;
  rd->premul = 0, rd->scalar = 1.0;
  if (factor == 1.0) return 0;
  if (!floating(q->dtype) || (q->op != HVD_SUM && q->op != HVD_AVERAGE)) {
    snprintf(why, cap, "%s '%s': the NCCL path applies scale factors (prescale %g, postscale %g) "
             "to floating-point Sum and Average only, not %s %s (unset HOROVOD_GPU_OPERATIONS"
             " / HOROVOD_GPU_ALLREDUCE for the staged path; docs/gpu.md)", kind, q->name,
             q->prescale, q->postscale, hvd_dtype_name((hvd_dtype)q->dtype),
             hvd_op_name((hvd_op)q->op));
    return HVD_E_UNSUPPORTED;
  }
  rd->premul = 1;
  rd->scalar = q->op == HVD_AVERAGE ? factor / size : factor;
  return 0;
}

/* 0, or every rank fails r with the same message: nothing was sent. */
static int refuse(const response *r, int size) {
  const hvd_request *q = &r->items[0]->req; /* a fused response's items share all this */
  if (q->type != HVD_REQ_ALLREDUCE && q->type != HVD_REQ_REDUCESCATTER)
    return 0; /* no reduction: bytes move, any dtype */
  reduction rd;
  char why[512];
  int code = plan_reduction(q, size, &rd, why, sizeof why);
  return code ? hvd__err(code, "%s", why) : 0;
}

/* ---- waiting ---- */

/* Polls spin a little, then sleep in growing steps of at most 1 ms. */
static void nap(int *spins, long *ns) {
  if ((*spins)++ < 64) return;
  *ns = *ns ? (*ns * 2 > 1000000 ? 1000000 : *ns * 2) : 1000;
  struct timespec ts = {0, *ns};
  nanosleep(&ts, NULL);
}

static int nccl_error(const path *np, ncclComm_t comm, ncclResult_t r, const char *what) {
  const char *detail = np->nc->GetLastError(comm);
  return hvd__err(r == ncclInvalidArgument || r == ncclInvalidUsage ? HVD_E_INVALID
                                                                     : HVD_E_SYSTEM,
                  "%s: %s%s%s%s", what, np->nc->GetErrorString(r), detail && *detail ? " (" : "",
                  detail ? detail : "", detail && *detail ? ")" : "");
}

/* A call on a non-blocking communicator returns ncclInProgress while it
 * runs on: poll the communicator until it settles, or the deadline. */
static int settle(const path *np, ncclComm_t comm, ncclResult_t r, const char *what,
                  uint64_t deadline) {
  int spins = 0;
  long ns = 0;
  while (r == ncclInProgress) {
    if (hvd__now_ms() >= deadline)
      return hvd__err(HVD_E_TIMEOUT, "%s did not finish before the deadline (%d s)", what,
                      DEADLINE_MS / 1000);
    nap(&spins, &ns);
    ncclResult_t state = ncclSuccess, q = np->nc->CommGetAsyncError(comm, &state);
    r = q != ncclSuccess ? q : state;
  }
  return r == ncclSuccess ? 0 : nccl_error(np, comm, r, what);
}

#define CUDA(np, call, what) hvd__cudart_check((np)->rt, (call), what)

/* The event recorded after everything queued so far: polled, with NCCL's
 * asynchronous error (a peer that failed), until the deadline. */
static int wait_done(const path *np, ncclComm_t comm, uint64_t deadline) {
  HVD__CHECK(CUDA(np, np->rt->EventRecord(np->done, np->stream), "cudaEventRecord"));
  int spins = 0;
  long ns = 0;
  for (;;) {
    cudaError_t ce = np->rt->EventQuery(np->done);
    if (ce == cudaSuccess) return 0;
    if (ce != cudaErrorNotReady) return CUDA(np, ce, "cudaEventQuery");
    ncclResult_t state = ncclSuccess, q = np->nc->CommGetAsyncError(comm, &state);
    if (q != ncclSuccess) state = q;
    if (state != ncclSuccess && state != ncclInProgress)
      return nccl_error(np, comm, state, "NCCL (asynchronous)");
    hvd__live_beat(); /* a long collective on a slow link is progress (live.h) */
    if (hvd__now_ms() >= deadline)
      return hvd__err(HVD_E_TIMEOUT, "the NCCL collectives did not complete within %d s "
                      "(a rank missing, or the GPU hung)", DEADLINE_MS / 1000);
    nap(&spins, &ns);
  }
}

/* ---- the path and its communicators ---- */

static void path_free(path *np) {
  if (!np) return;
  if (np->rt) {
    np->rt->SetDevice(np->device);
    if (np->fusion) np->rt->Free(np->fusion);
    if (np->host) np->rt->FreeHost(np->host);
    if (np->done) np->rt->EventDestroy(np->done);
    if (np->stream) np->rt->StreamDestroy(np->stream);
  }
  free(np);
}

/* This rank's path on `device`, made at the first NCCL response. */
static int open_path(hvd__device *d, int device) {
  path *np = d->nccl;
  if (np) {
    if (device != np->device)
      return hvd__err(HVD_E_INVALID, "a tensor on CUDA device %d, where this process's NCCL "
                      "path runs on device %d (one GPU per process)", device, np->device);
    return hvd__cudart_check(np->rt, np->rt->SetDevice(device), "cudaSetDevice");
  }
  np = calloc(1, sizeof *np);
  if (!np) return hvd__err(HVD_E_NOMEM, "out of memory for the NCCL path");
  np->device = device;
  int rc = hvd__cudart_get(&np->rt);
  if (rc == 0) rc = hvd__cudart_device_count(np->rt);
  if (rc > 0 && device >= rc)
    rc = hvd__err(HVD_E_INVALID, "CUDA device %d does not exist (%d devices)", device, rc);
  if (rc >= 0) rc = CUDA(np, np->rt->SetDevice(device), "cudaSetDevice");
  if (rc == 0) rc = hvd__nccl_get(&np->nc);
  if (rc == 0)
    rc = CUDA(np, np->rt->StreamCreateWithFlags(&np->stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  if (rc == 0)
    rc = CUDA(np, np->rt->EventCreateWithFlags(&np->done, cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
  if (rc < 0) {
    if (!np->stream) np->rt = NULL; /* nothing of CUDA's to free */
    path_free(np);
    return rc;
  }
  d->nccl = np;
  return 0;
}

/* The key of a host's communicator in the hierarchical allreduce (the
 * global set's only: the hierarchy is the global communicator's). */
#define HOST_KEY (-1)

static nccl_comm *find_comm(const path *np, int set, const hvd_comm *c) {
  for (nccl_comm *k = np ? np->comms : NULL; k; k = k->next)
    if (k->set == set && k->size == c->size && k->rank == c->rank) return k;
  return NULL;
}

/* Aborts and forgets k: after a failure its peers may be anywhere. */
static void drop_comm(path *np, nccl_comm *k) {
  for (nccl_comm **at = &np->comms; *at; at = &(*at)->next)
    if (*at == k) {
      *at = k->next;
      break;
    }
  np->nc->CommAbort(k->comm);
  free(k);
}

/* ncclCommInitRank, non-blocking, polled to its end. */
static int init_comm(path *np, const ncclUniqueId *id, const hvd_comm *c, ncclComm_t *out) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  *out = NULL;
  ncclResult_t r = np->nc->CommInitRankConfig(out, c->size, *id, c->rank, &config);
  int rc = settle(np, *out, r, "ncclCommInitRankConfig", hvd__now_ms() + DEADLINE_MS);
  if (rc < 0 && *out) np->nc->CommAbort(*out), *out = NULL;
  return rc;
}

/* The communicator of c's ranks (key: the process set, or HOST_KEY),
 * every rank agreeing that it has one: made at the first NCCL response
 * that needs it.  *fatal 0 when every rank fails alike. */
static int agree_on_comm(hvd__device *d, hvd_comm *c, const response *r, int key,
                         ncclComm_t *out, int *fatal) {
  int rc = open_path(d, r->items[0]->mine->w.device);
  path *np = d->nccl;
  nccl_comm *k = rc == 0 ? find_comm(np, key, c) : NULL;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rc == 0 && !k && c->rank == 0)
    rc = settle(np, NULL, np->nc->GetUniqueId(&id), "ncclGetUniqueId", hvd__now_ms() + 1000);
  HVD__CHECK(hvd__coll_agree(c, rc, NO_PATH, fatal));
  if (k) return *out = k->comm, 0;
  /* Every rank is here: none has the set's communicator yet. */
  *fatal = 1;
  HVD__CHECK(hvd__coll_broadcast(c, &id, sizeof id, 0));
  ncclComm_t comm = NULL;
  rc = init_comm(np, &id, c, &comm);
  k = rc == 0 ? calloc(1, sizeof *k) : NULL;
  if (rc == 0 && !k) rc = hvd__err(HVD_E_NOMEM, "out of memory for an NCCL communicator");
  int ok = hvd__coll_agree(c, rc, "could not make its NCCL communicator", fatal);
  if (ok < 0) {
    if (comm) np->nc->CommAbort(comm);
    free(k);
    return ok;
  }
  *k = (nccl_comm){key, c->size, c->rank, comm, np->comms};
  np->comms = k;
  *out = comm;
  return 0;
}

static void nccl_close(hvd__device *d, int broken) {
  path *np = d->nccl;
  if (!np) return;
  np->rt->SetDevice(np->device);
  uint64_t deadline = hvd__now_ms() + CLOSE_MS;
  for (nccl_comm *k = np->comms, *next; k; k = next) {
    next = k->next;
    int rc = broken ? -1 : settle(np, k->comm, np->nc->CommFinalize(k->comm),
                                     "ncclCommFinalize", deadline);
    if (rc == 0) np->nc->CommDestroy(k->comm);
    else np->nc->CommAbort(k->comm); /* never waits for the peers */
    free(k);
  }
  np->comms = NULL;
  path_free(np);
  d->nccl = NULL;
}

/* ---- the collectives ---- */

static int fusion_buffer(path *np, size_t bytes) {
  if (bytes <= np->fusion_cap) return 0;
  if (np->fusion) np->rt->Free(np->fusion);
  np->fusion = NULL, np->fusion_cap = 0;
  HVD__CHECK(CUDA(np, np->rt->Malloc(&np->fusion, bytes), "cudaMalloc (the NCCL fusion buffer)"));
  np->fusion_cap = bytes;
  return 0;
}

static int copy(const path *np, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return 0;
  return CUDA(np, np->rt->MemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, np->stream),
              "cudaMemcpyAsync (device to device)");
}

/* r's tensors one after the other into the fusion buffer fb (in), or
 * back out into each recvbuf (out), queued on the stream. */
static int fuse(const path *np, const response *r, char *fb, size_t esize) {
  size_t off = 0;
  for (int i = 0; i < r->n; i++) {
    size_t bytes = r->items[i]->req.count * esize;
    HVD__CHECK(copy(np, fb + off, r->items[i]->mine->w.sendbuf, bytes));
    off += bytes;
  }
  return 0;
}

static int unfuse(const path *np, const response *r, const char *fb, size_t esize) {
  size_t off = 0;
  for (int i = 0; i < r->n; i++) {
    size_t bytes = r->items[i]->req.count * esize;
    HVD__CHECK(copy(np, r->items[i]->mine->w.recvbuf, fb + off, bytes));
    off += bytes;
  }
  return 0;
}

/* One reduction's NCCL op (a pre-multiplied sum made for the call). */
typedef struct {
  const path *np;
  ncclComm_t comm;
  reduction rd;
  uint64_t deadline;
} reducer;

static int reducer_open(reducer *x, const path *np, ncclComm_t comm, const hvd_request *q,
                        int size, uint64_t deadline) {
  char why[512];
  *x = (reducer){np, comm, {0}, deadline};
  if (plan_reduction(q, size, &x->rd, why, sizeof why)) /* refuse() let it through */
    return hvd__err(HVD_E_PROTOCOL, "%s", why);
  if (!x->rd.premul) return 0;
  float f = (float)x->rd.scalar;
  uint16_t h = q->dtype == HVD_FLOAT16 ? hvd__float_to_half(f) : hvd__float_to_bf16(f);
  void *scalar = q->dtype == HVD_FLOAT64 ? (void *)&x->rd.scalar
                 : q->dtype == HVD_FLOAT32 ? (void *)&f : (void *)&h;
  ncclRedOp_t made;
  HVD__CHECK(settle(np, comm, np->nc->RedOpCreatePreMulSum(&made, scalar, x->rd.type,
                                                           ncclScalarHostImmediate, comm),
                    "ncclRedOpCreatePreMulSum", deadline));
  x->rd.op = made;
  return 0;
}

static void reducer_close(reducer *x) {
  if (x->rd.premul) x->np->nc->RedOpDestroy(x->rd.op, x->comm);
}

static int allreduce(const reducer *x, const void *send, void *recv, size_t count) {
  const path *np = x->np;
  return settle(np, x->comm, np->nc->AllReduce(send, recv, count, x->rd.type, x->rd.op, x->comm,
                                                np->stream),
                "ncclAllReduce", x->deadline);
}

/* Several allreduces (fused by negotiation, or a group) through the
 * fusion buffer: copies in, one ncclAllReduce, copies out, in order on
 * the stream.  One tensor runs from its buffers directly. */
static int launch_allreduce(path *np, const reducer *x, const response *r) {
  const hvd_request *q = &r->items[0]->req;
  if (r->n == 1) return allreduce(x, r->items[0]->mine->w.sendbuf, r->items[0]->mine->w.recvbuf,
                                  q->count);
  size_t esize = hvd_dtype_size((hvd_dtype)q->dtype), total = 0;
  for (int i = 0; i < r->n; i++) total += r->items[i]->req.count;
  HVD__CHECK(fusion_buffer(np, total * esize));
  char *fb = np->fusion;
  HVD__CHECK(fuse(np, r, fb, esize));
  HVD__CHECK(allreduce(x, fb, fb, total));
  return unfuse(np, r, fb, esize);
}

/* ncclReduceScatter when the count divides by the size (hvd's split is
 * then NCCL's); else an allreduce into the fusion buffer, this rank
 * keeping its share (hvd__split_count's, the host path's). */
static int launch_reducescatter(path *np, const reducer *x, const hvd_comm *c, const entry *en) {
  size_t count = en->w.req.count, esize = hvd_dtype_size((hvd_dtype)en->w.req.dtype);
  if (count % (size_t)c->size == 0)
    return settle(np, x->comm, np->nc->ReduceScatter(en->w.sendbuf, en->w.recvbuf,
                                                     count / (size_t)c->size, x->rd.type,
                                                     x->rd.op, x->comm, np->stream),
                  "ncclReduceScatter", x->deadline);
  HVD__CHECK(fusion_buffer(np, count * esize));
  HVD__CHECK(allreduce(x, en->w.sendbuf, np->fusion, count));
  size_t at = hvd__split_offset(count, c->size, c->rank) * esize;
  return copy(np, en->w.recvbuf, (char *)np->fusion + at,
              hvd__split_count(count, c->size, c->rank) * esize);
}

static int launch_broadcast(path *np, ncclComm_t comm, const hvd_request *q, void *buf,
                            uint64_t deadline) {
  size_t bytes = q->count * hvd_dtype_size((hvd_dtype)q->dtype);
  return settle(np, comm, np->nc->Broadcast(buf, buf, bytes, ncclUint8, q->root, comm, np->stream),
                "ncclBroadcast", deadline);
}

/* ---- the hierarchical allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE) ----
 * As Horovod's NCCLHierarchicalAllreduce: the tensors in the fusion
 * buffer, padded to a multiple of the host's ranks; ncclReduceScatter
 * within the host leaves each local rank one shard; that shard goes to
 * pinned host memory and hvd's host allreduce among the ranks of the same
 * local rank on the other hosts (c->cross: TCP); back to the device, and
 * ncclAllGather within the host.  Every rank ends with the same bits: each
 * shard is reduced once, by one cross allreduce, and copied to the rest. */

/* On the global communicator with its hierarchy built (the switch on,
 * hosts of one size: coll/hierarchical.c), for an allreduce whose two
 * halves compose: Sum, Min, Max, Product, and on floating-point types
 * Average and scale factors as one pre-multiplied sum.  Else the flat path. */
static int hierarchical(const hvd_comm *c, const hvd_request *q) {
  if (q->type != HVD_REQ_ALLREDUCE || !c->hierarchical || !c->local || !c->cross) return 0;
  int scaled = q->op == HVD_AVERAGE || q->prescale * q->postscale != 1.0;
  return !scaled || floating(q->dtype);
}

/* The reduction within the host: an Average becomes a sum pre-multiplied
 * by its scale over the job's size, so that the cross step only sums. */
static int host_reducer(reducer *x, const path *np, ncclComm_t comm, const hvd_request *q,
                        int size, uint64_t deadline) {
  hvd_request sum = *q;
  if (q->op == HVD_AVERAGE) sum.op = HVD_SUM, sum.prescale = q->prescale / size;
  return reducer_open(x, np, comm, &sum, size, deadline);
}

static int host_buffer(path *np, size_t bytes) {
  if (bytes <= np->host_cap) return 0;
  if (np->host) np->rt->FreeHost(np->host);
  np->host = NULL, np->host_cap = 0;
  HVD__CHECK(CUDA(np, np->rt->HostAlloc(&np->host, bytes ? bytes : 1, cudaHostAllocDefault),
                  "cudaHostAlloc (the hierarchical allreduce's shard)"));
  np->host_cap = bytes;
  return 0;
}

/* This rank's shard (count elements at dev) reduced across the hosts. */
static int cross_allreduce(path *np, ncclComm_t local, hvd_comm *cross, const hvd_request *q,
                           void *dev, size_t count, uint64_t deadline) {
  hvd_dtype dtype = (hvd_dtype)q->dtype;
  hvd_op rop = q->op == HVD_AVERAGE ? HVD_SUM : (hvd_op)q->op;
  size_t bytes = count * hvd_dtype_size(dtype);
  void *host = np->host;
  if (bytes)
    HVD__CHECK(CUDA(np, np->rt->MemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, np->stream),
                    "cudaMemcpyAsync (device to host)"));
  HVD__CHECK(wait_done(np, local, deadline));
  HVD__CHECK(hvd__coll_allreduce(cross, host, count, dtype, rop));
  if (!bytes) return 0;
  return CUDA(np, np->rt->MemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, np->stream),
              "cudaMemcpyAsync (host to device)");
}

static int launch_hierarchical(path *np, const reducer *x, hvd_comm *c, const response *r) {
  const hvd_request *q = &r->items[0]->req;
  size_t esize = hvd_dtype_size((hvd_dtype)q->dtype), total = 0;
  for (int i = 0; i < r->n; i++) total += r->items[i]->req.count;
  size_t hosts_ranks = (size_t)c->local->size, shard = (total + hosts_ranks - 1) / hosts_ranks;
  HVD__CHECK(fusion_buffer(np, shard * hosts_ranks * esize));
  HVD__CHECK(host_buffer(np, shard * esize));
  char *fb = np->fusion, *mine = fb + (size_t)c->local->rank * shard * esize;
  HVD__CHECK(fuse(np, r, fb, esize));
  /* The padding past `total` is reduced too, and never read. */
  HVD__CHECK(settle(np, x->comm, np->nc->ReduceScatter(fb, mine, shard, x->rd.type, x->rd.op,
                                                       x->comm, np->stream),
                    "ncclReduceScatter (within the host)", x->deadline));
  HVD__CHECK(cross_allreduce(np, x->comm, c->cross, q, mine, shard, x->deadline));
  HVD__CHECK(settle(np, x->comm, np->nc->AllGather(mine, fb, shard, x->rd.type, x->comm,
                                                   np->stream),
                    "ncclAllGather (within the host)", x->deadline));
  return unfuse(np, r, fb, esize);
}

/* ---- allgather and alltoall: into device memory the path allocates ----
 * As on the staged path, the result is cudaMalloc'ed device memory the
 * caller frees with cudaFree.  What each rank receives from each is
 * learned first by hvd's host collective on c (one size_t per rank, or
 * per pair); then the data moves through NCCL in one group: ncclAllGather
 * when every rank sends as much, else one ncclBroadcast per rank (as
 * Horovod does for uneven allgathers), and ncclSend/ncclRecv per peer for
 * alltoall. */

/* got[r]: elements rank r sends this rank (allgather: its whole count). */
static int exchange_counts(hvd_comm *c, int type, const entry *en, size_t *got) {
  size_t n = (size_t)c->size, mine = en->w.local_count, *ones = NULL, *per = NULL;
  void *out = NULL;
  if (type == HVD_REQ_ALLTOALL && !(ones = malloc(n * sizeof *ones)))
    return hvd__err(HVD_E_NOMEM, "allocating %zu counts", n);
  for (size_t i = 0; ones && i < n; i++) ones[i] = 1;
  per = calloc(n, sizeof *per);
  int rc = per ? 0 : hvd__err(HVD_E_NOMEM, "allocating %zu counts", n);
  if (rc == 0)
    rc = type == HVD_REQ_ALLTOALL
             ? hvd__gather(c, type, en->sendcounts, 0, ones, sizeof(size_t), &out, per)
             : hvd__gather(c, type, &mine, 1, NULL, sizeof mine, &out, per);
  if (rc == 0) memcpy(got, out, n * sizeof *got);
  free(out), free(per), free(ones);
  return rc;
}

/* One group: NCCL's calls in it, then ncclGroupEnd polled to its end. */
static int group_end(const path *np, ncclComm_t comm, int rc, uint64_t deadline) {
  int end = settle(np, comm, np->nc->GroupEnd(), "ncclGroupEnd", deadline);
  return rc < 0 ? rc : end;
}

static int queue_allgather(const path *np, ncclComm_t comm, const hvd_comm *c, const void *send,
                           char *out, const size_t *counts, size_t esize, uint64_t deadline) {
  int even = 1, rc = 0;
  for (int r = 1; r < c->size; r++) even &= counts[r] == counts[0];
  if (even)
    return counts[0] ? settle(np, comm, np->nc->AllGather(send, out, counts[0] * esize, ncclUint8,
                                                          comm, np->stream),
                              "ncclAllGather", deadline)
                     : 0;
  HVD__CHECK(settle(np, comm, np->nc->GroupStart(), "ncclGroupStart", deadline));
  size_t off = 0;
  for (int r = 0; rc == 0 && r < c->size; off += counts[r] * esize, r++)
    if (counts[r])
      rc = settle(np, comm, np->nc->Broadcast(r == c->rank ? send : out + off, out + off,
                                              counts[r] * esize, ncclUint8, r, comm, np->stream),
                  "ncclBroadcast (allgather)", deadline);
  return group_end(np, comm, rc, deadline);
}

static int queue_alltoall(const path *np, ncclComm_t comm, const hvd_comm *c, const entry *en,
                          char *out, const size_t *counts, size_t esize, uint64_t deadline) {
  const char *send = en->w.sendbuf;
  size_t soff = 0, roff = 0;
  int rc = 0;
  HVD__CHECK(settle(np, comm, np->nc->GroupStart(), "ncclGroupStart", deadline));
  for (int p = 0; rc == 0 && p < c->size; p++) {
    size_t sb = en->sendcounts[p] * esize, rb = counts[p] * esize;
    if (sb)
      rc = settle(np, comm, np->nc->Send(send + soff, sb, ncclUint8, p, comm, np->stream),
                  "ncclSend (alltoall)", deadline);
    if (rc == 0 && rb)
      rc = settle(np, comm, np->nc->Recv(out + roff, rb, ncclUint8, p, comm, np->stream),
                  "ncclRecv (alltoall)", deadline);
    soff += sb, roff += rb;
  }
  return group_end(np, comm, rc, deadline);
}

/* One allgather or alltoall, to its end: its result is the caller's then. */
static int run_gather(path *np, ncclComm_t comm, hvd_comm *c, entry *en,
                      uint64_t deadline) {
  int type = en->w.req.type;
  size_t esize = hvd_dtype_size((hvd_dtype)en->w.req.dtype);
  size_t *counts = calloc((size_t)c->size, sizeof *counts);
  if (!counts) return hvd__err(HVD_E_NOMEM, "allocating %d counts", c->size);
  void *out = NULL;
  int rc = exchange_counts(c, type, en, counts);
  size_t total = hvd__counts_sum(counts, c->size), bytes = total * esize;
  if (rc == 0 && total > SIZE_MAX / esize)
    rc = hvd__err(HVD_E_PROTOCOL, "the ranks' counts add up to more than memory holds (%zu "
                  "elements of %zu bytes)", total, esize);
  if (rc == 0 && bytes)
    rc = CUDA(np, np->rt->Malloc(&out, bytes), "cudaMalloc (the result)");
  if (rc == 0)
    rc = type == HVD_REQ_ALLTOALL
             ? queue_alltoall(np, comm, c, en, out, counts, esize, deadline)
             : queue_allgather(np, comm, c, en->w.sendbuf, out, counts, esize, deadline);
  int wrc = wait_done(np, comm, deadline); /* even after a failure: nothing may write out later */
  if (rc == 0) rc = wrc;
  if (rc == 0) {
    hvd__gather_deliver(en, out, counts, c->size);
  } else if (out && wrc == 0) {
    np->rt->Free(out);
  }
  free(counts);
  return rc;
}

/* The stream waits (on the device, not here) for the work each caller
 * queued on its own stream before handing its tensor over (hvd_work.ready). */
static int wait_ready(const path *np, const response *r) {
  for (int i = 0; i < r->n; i++) {
    void *ready = r->items[i]->mine->w.ready;
    if (ready)
      HVD__CHECK(CUDA(np, np->rt->StreamWaitEvent(np->stream, (cudaEvent_t)ready, 0),
                      "cudaStreamWaitEvent (the caller's stream)"));
  }
  return 0;
}

/* Queues r's collectives on the stream, after the callers' work. */
static int launch(path *np, ncclComm_t comm, hvd_comm *c, const response *r, int hier,
                  uint64_t deadline) {
  const hvd_request *q = &r->items[0]->req;
  HVD__CHECK(wait_ready(np, r));
  if (q->type == HVD_REQ_BROADCAST) {
    for (int i = 0; i < r->n; i++)
      HVD__CHECK(launch_broadcast(np, comm, &r->items[i]->req, r->items[i]->mine->w.recvbuf,
                                  deadline));
    return 0;
  }
  reducer x;
  HVD__CHECK(hier ? host_reducer(&x, np, comm, q, c->size, deadline)
                  : reducer_open(&x, np, comm, q, c->size, deadline));
  int rc = 0;
  if (q->type == HVD_REQ_ALLREDUCE)
    rc = hier ? launch_hierarchical(np, &x, c, r) : launch_allreduce(np, &x, r);
  for (int i = 0; rc == 0 && q->type == HVD_REQ_REDUCESCATTER && i < r->n; i++)
    rc = launch_reducescatter(np, &x, c, r->items[i]->mine);
  reducer_close(&x);
  return rc;
}

static const char *timeline_name(int type, int hier) {
  return type == HVD_REQ_BROADCAST       ? "NCCL_BROADCAST"
         : type == HVD_REQ_REDUCESCATTER ? "NCCL_REDUCESCATTER"
         : type == HVD_REQ_ALLGATHER     ? "NCCL_ALLGATHER"
         : type == HVD_REQ_ALLTOALL      ? "NCCL_ALLTOALL"
         : hier                          ? "NCCL_HIERARCHICAL_ALLREDUCE"
                                         : "NCCL_ALLREDUCE";
}

/* r's allgathers or alltoalls, one after the other, after the callers' work. */
static int run_gathers(path *np, ncclComm_t comm, hvd_comm *c, const response *r,
                       uint64_t deadline) {
  HVD__CHECK(wait_ready(np, r));
  for (int i = 0; i < r->n; i++) HVD__CHECK(run_gather(np, comm, c, r->items[i]->mine, deadline));
  return 0;
}

/* The NCCL communicator r runs on: its set's, or for the hierarchical
 * allreduce its host's, every rank of the job agreeing that it has it.
 * A host's communicator is made by its ranks at the first hierarchical
 * response, so whether one exists is alike on every rank: the branch
 * below is the same everywhere, and afterwards one agreement of the
 * whole job is all a response costs. */
static int agree(hvd__device *d, hvd_comm *c, const response *r, int hier, ncclComm_t *comm,
                 int *fatal) {
  if (!hier) return agree_on_comm(d, c, r, r->items[0]->req.process_set, comm, fatal);
  nccl_comm *k = find_comm(d->nccl, HOST_KEY, c->local);
  int rc;
  if (k) {
    rc = open_path(d, r->items[0]->mine->w.device);
    *comm = k->comm;
  } else {
    rc = agree_on_comm(d, c->local, r, HOST_KEY, comm, fatal);
    if (rc < 0 && *fatal) return rc;
  }
  return hvd__coll_agree(c, rc, "has no NCCL path within its host", fatal);
}

/* r (refuse() let it through) on c: every rank agreeing it has the path,
 * then the collectives, waited for. */
static int nccl_execute(hvd__device *d, response *r, hvd_comm *c, hvd_timeline *tl, int *fatal) {
  const hvd_request *q = &r->items[0]->req;
  int hier = hierarchical(c, q);
  ncclComm_t comm;
  HVD__CHECK(agree(d, c, r, hier, &comm, fatal));
  *fatal = 1;
  path *np = d->nccl;
  uint64_t deadline = hvd__now_ms() + DEADLINE_MS;
  for (int i = 0; i < r->n; i++)
    hvd__timeline_begin(tl, r->items[i]->req.name, timeline_name(q->type, hier), NULL);
  int rc;
  if (q->type == HVD_REQ_ALLGATHER || q->type == HVD_REQ_ALLTOALL) {
    rc = run_gathers(np, comm, c, r, deadline);
  } else {
    rc = launch(np, comm, c, r, hier, deadline);
    /* Wait even after a failed launch: what was queued must end before
     * the buffers are given back. */
    int wrc = wait_done(np, comm, deadline);
    if (rc == 0) rc = wrc;
  }
  for (int i = 0; i < r->n; i++) hvd__timeline_end(tl, r->items[i]->req.name);
  if (rc == 0) return 0;
  nccl_comm *k = hier ? find_comm(np, HOST_KEY, c->local) : find_comm(np, q->process_set, c);
  if (k) drop_comm(np, k);
  /* The engine names each tensor; a fused response's failure names the group. */
  if (r->n > 1)
    return hvd__err_prefix(rc, "%s of %d tensors ('%s', ...) through NCCL",
                           hvd__req_type_name(q->type), r->n, q->name);
  return rc;
}

const hvd__device_ops hvd__device_nccl = {"NCCL", refuse, nccl_execute, nccl_close};

#endif /* HVD_WITH_NCCL */
