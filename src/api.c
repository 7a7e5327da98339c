/*
 * api.c -- the public functions of hvd.h: argument checks, the one global
 * context, and error messages that say which call, which tensor and which
 * rank.
 *
 * Every collective is handed to the engine (engine/engine.h); the blocking
 * forms are enqueue + wait.  Checks that need only the arguments happen
 * here, before anything is enqueued, so a bad call fails at once on the
 * rank that made it and disturbs nobody.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_hooks.h"
#include "bootstrap/bootstrap.h"
#include "rdzv/rdzv_elastic.h"
#include "coll/coll.h"
#include "elastic_int.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "env.h"
#include "mpi_controller.h"
#include "opts.h"
#include "reduce.h"
#include "startup.h"

/* A process set the program added, kept to add it again when elastic
 * training re-forms the job. */
typedef struct {
  int id, n;
  int *ranks;
} user_pset;

static struct {
  pthread_mutex_t lock;     /* init, shutdown, the fields below */
  pthread_rwlock_t calls;   /* held for reading by every call into the engine */
  int initialized;
  hvd_job job;
  hvd_comm comm;
  hvd_engine *engine;
  /* Counters for generated names; atomic, because calls hold the read
   * lock and must not take ctx.lock (shutdown takes them the other way). */
  atomic_ullong unnamed[HVD_REQ__COUNT];
  /* Every hvd_init() numbers its engine's handles anew (1..0x7fff), so
   * that a handle from before a re-formed job is recognised as such;
   * kept across hvd_shutdown(). */
  atomic_uint epoch;
  /* The process sets the program added (under ctx.lock). */
  user_pset *psets;
  int npsets;
  /* Elastic: what hvdrun announces on the rendezvous connection (under
   * ctx.lock; fd -1 outside an elastic job). */
  hvd_rdzv_notices notices;
} ctx = {.lock = PTHREAD_MUTEX_INITIALIZER, .calls = PTHREAD_RWLOCK_INITIALIZER,
       .notices = {.fd = -1}};

/* ---- life cycle ---- */

/* Reads every tunable once so a bad value fails hvd_init, not a later call. */
static int check_params(void) {
  for (int id = 0; id < HVD_P__COUNT; id++) {
    long l;
    double d;
    int i, n;
    switch (hvd__params[id].kind) {
      case HVD_PK_INT: HVD__CHECK(hvd__param_int((hvd_param_id)id, &l)); break;
      case HVD_PK_FLOAT: HVD__CHECK(hvd__param_double((hvd_param_id)id, &d)); break;
      case HVD_PK_BOOL: HVD__CHECK(hvd__param_bool((hvd_param_id)id, &i)); break;
      case HVD_PK_LEVEL: HVD__CHECK(hvd__param_level((hvd_param_id)id, &i)); break;
      case HVD_PK_CORES: HVD__CHECK(hvd__param_cores((hvd_param_id)id, 0, &i, &n)); break;
      default: break;
    }
  }
  return 0;
}

/* hvd_init_comm(): the communicator alone says who we are. */
static void job_of_comm(hvd_job *job, const void *mpi_comm) {
  memset(job, 0, sizeof *job);
  job->control_fd = -1;
  job->rank = job->size = job->local_rank = job->local_size = -1;
  job->cross_rank = job->cross_size = -1;
  job->source = "hvd_init_comm";
  job->meet.kind = HVD_MEET_MPI;
  job->meet.launcher = "MPI";
  job->meet.mpi_comm = mpi_comm;
  hvd__own_hostname(job);
  hvd__host_id(job->host_id);
}

static int init_locked(const hvd_init_spec *spec) {
  hvd_transport *xport = NULL;
  int cpu_mpi;
  if (ctx.initialized)
    return hvd__err(HVD_E_ALREADY_INITIALIZED, "already initialized (call hvd_shutdown() first)");
  HVD__CHECK(check_params());
  HVD__CHECK(hvd__startup_cpu_operations(&cpu_mpi));
  if (spec->mpi_comm)
    job_of_comm(&ctx.job, spec->mpi_comm);
  else
    HVD__CHECK(hvd__job_from_env(&ctx.job));
  ctx.job.ranks = spec->ranks;
  ctx.job.nranks = spec->nranks;
  hvd__log_set_rank(ctx.job.rank);
  int rc = hvd__bootstrap(&ctx.job, &xport);
  ctx.job.ranks = NULL; /* the caller's */
  hvd__log_set_rank(ctx.job.rank);
  if (rc == 0) rc = hvd__startup_comm(&ctx.comm, &ctx.job, xport, cpu_mpi);
  else if (xport) xport->ops->destroy(xport);
  if (rc == 0) rc = hvd__engine_start(&ctx.comm, &ctx.engine);
  if (rc < 0) {
    hvd__comm_destroy(&ctx.comm);
    /* A rank left out of hvd_init_ranks() waits for the others only when
     * it exits; after any other failure they may be anywhere. */
    hvd__mpi_release(rc == HVD_E_INVALID ? HVD_MPI_AT_EXIT : HVD_MPI_NEVER);
    return rc;
  }
  hvd__rdzv_notices_init(&ctx.notices, ctx.job.control_fd);
  unsigned epoch = atomic_load(&ctx.epoch) % 0x7fffu + 1;
  atomic_store(&ctx.epoch, epoch);
  hvd__engine_set_epoch(ctx.engine, epoch);
  for (int t = 0; t < HVD_REQ__COUNT; t++) atomic_store(&ctx.unnamed[t], 0);
  ctx.initialized = 1;
  hvd__log(HVD_LOG_DEBUG, "initialized: rank %d of %d on %s (%s, meeting through %s)",
           ctx.job.rank, ctx.job.size, ctx.job.hostname, ctx.job.source,
           ctx.job.meet.launcher);
  return 0;
}

/* At the process's exit, when hvd initialised MPI (hvd__mpi_on_exit). */
static int shutdown_at_exit(void) {
  if (!hvd_is_initialized()) return 0;
  hvd_shutdown();
  return 1;
}

int hvd__init(const hvd_init_spec *spec) {
  hvd__mpi_on_exit(shutdown_at_exit);
  pthread_mutex_lock(&ctx.lock);
  int rc = init_locked(spec);
  pthread_mutex_unlock(&ctx.lock);
  return rc < 0 ? hvd__err_prefix(rc, "hvd_init") : 0;
}

int hvd_init(void) {
  hvd_init_spec spec = {NULL, 0, NULL};
  return hvd__init(&spec);
}

int hvd_init_ranks(const int *ranks, int n) {
  if (!ranks || n < 1)
    return hvd__err(HVD_E_INVALID, "hvd_init_ranks: %s", ranks ? "no ranks" : "ranks is NULL");
  hvd_init_spec spec = {ranks, n, NULL};
  return hvd__init(&spec);
}

int hvd_mpi_built(void) { return hvd__mpi_built(); }
int hvd_mpi_enabled(void) { return hvd__mpi_enabled(); }
int hvd_mpi_threads_supported(void) { return hvd__mpi_threads_supported(); }

const char *hvd__transport_name(void) {
  pthread_mutex_lock(&ctx.lock);
  const char *name = ctx.initialized && ctx.comm.xport ? ctx.comm.xport->ops->name : "none";
  pthread_mutex_unlock(&ctx.lock);
  return name;
}

uint64_t hvd__steps(void) {
  pthread_mutex_lock(&ctx.lock);
  uint64_t n = ctx.initialized ? ctx.comm.steps : 0;
  pthread_mutex_unlock(&ctx.lock);
  return n;
}

int hvd__peer_read_on(void) {
  pthread_mutex_lock(&ctx.lock);
  int on = ctx.initialized && ctx.comm.xport && ctx.comm.xport->ops->caps.peer_read;
  if (on && ctx.comm.peer_buf) on = 2;
  pthread_mutex_unlock(&ctx.lock);
  return on;
}

int hvd__hier_counts(uint32_t *local, uint32_t *cross) {
  pthread_mutex_lock(&ctx.lock);
  int on = ctx.initialized && ctx.comm.local;
  if (on) *local = ctx.comm.local->seq, *cross = ctx.comm.cross->seq;
  pthread_mutex_unlock(&ctx.lock);
  return on ? 0 : -1;
}

static void forget_psets(void) {
  for (int i = 0; i < ctx.npsets; i++) free(ctx.psets[i].ranks);
  free(ctx.psets);
  ctx.psets = NULL;
  ctx.npsets = 0;
}

/* Leaves the job; ctx.lock held. */
static void shutdown_locked(void) {
  if (ctx.initialized) {
    /* Stopping fails whatever is pending, which wakes every waiter; then
     * no call is left inside the engine and it can go. */
    hvd__engine_stop(ctx.engine);
    pthread_rwlock_wrlock(&ctx.calls);
    hvd__engine_free(ctx.engine);
    ctx.engine = NULL;
    ctx.initialized = 0;
    pthread_rwlock_unlock(&ctx.calls);
    int broken = ctx.comm.broken;
    hvd__comm_destroy(&ctx.comm);
    hvd__mpi_release(broken ? HVD_MPI_NEVER : HVD_MPI_FINALIZE);
    hvd__rdzv_notices_close(&ctx.notices);
  }
}

int hvd_shutdown(void) {
  pthread_mutex_lock(&ctx.lock);
  shutdown_locked();
  forget_psets();
  pthread_mutex_unlock(&ctx.lock);
  return 0;
}

int hvd_is_initialized(void) {
  pthread_mutex_lock(&ctx.lock);
  int v = ctx.initialized;
  pthread_mutex_unlock(&ctx.lock);
  return v;
}

/* ---- who am I ---- */

static int job_field(const int *field, const char *fn) {
  pthread_mutex_lock(&ctx.lock);
  int v = ctx.initialized ? *field : HVD_E_NOT_INITIALIZED;
  pthread_mutex_unlock(&ctx.lock);
  if (v < 0) hvd__err(v, "%s: called before hvd_init()", fn);
  return v;
}

int hvd_rank(void) { return job_field(&ctx.job.rank, "hvd_rank"); }
int hvd_size(void) { return job_field(&ctx.job.size, "hvd_size"); }
int hvd_local_rank(void) { return job_field(&ctx.job.local_rank, "hvd_local_rank"); }
int hvd_local_size(void) { return job_field(&ctx.job.local_size, "hvd_local_size"); }
int hvd_cross_rank(void) { return job_field(&ctx.job.cross_rank, "hvd_cross_rank"); }
int hvd_cross_size(void) { return job_field(&ctx.job.cross_size, "hvd_cross_size"); }

/* ---- the engine, entered under the read lock ---- */

/* Holds the read lock on success; the caller ends with leave(). */
static int enter(const char *what) {
  pthread_rwlock_rdlock(&ctx.calls);
  if (ctx.engine) return 0;
  pthread_rwlock_unlock(&ctx.calls);
  return hvd__err(HVD_E_NOT_INITIALIZED, "%s: called before hvd_init()", what);
}

static void leave(void) { pthread_rwlock_unlock(&ctx.calls); }

int hvd__tune_history(hvd_tune_change *out, int cap) {
  HVD__CHECK(enter("hvd__tune_history"));
  int n = hvd__engine_tune_history(ctx.engine, out, cap);
  leave();
  return n;
}

int hvd__cycle_counts(uint64_t *fast, uint64_t *full) {
  HVD__CHECK(enter("hvd__cycle_counts"));
  hvd__engine_cycle_counts(ctx.engine, fast, full, NULL);
  leave();
  return 0;
}

int hvd__watch_count(uint64_t *watched) {
  HVD__CHECK(enter("hvd__watch_count"));
  *watched = hvd__engine_watched(ctx.engine);
  leave();
  return 0;
}

int hvd__rider_count(uint64_t *rode) {
  uint64_t fast, full;
  HVD__CHECK(enter("hvd__rider_count"));
  hvd__engine_cycle_counts(ctx.engine, &fast, &full, rode);
  leave();
  return 0;
}

/* ---- describing and checking a call ---- */

static const hvd_opts default_opts = HVD_OPTS_INIT;

/* Fills the common fields of a zeroed request (every caller's is zeroed
 * with what holds it); a NULL name gets "<op>.noname.<n>", which matches
 * across ranks that make the same unnamed calls in order. */
static int describe(hvd_request *req, int type, const char *name, const hvd_opts *o) {
  req->type = (uint8_t)type;
  req->prescale = o->prescale_factor;
  req->postscale = o->postscale_factor;
  req->process_set = o->process_set;
  req->on_device = o->device == HVD_DEVICE_CPU ? HVD_MEM_HOST : (uint8_t)hvd__device_path(type);
  if (!name) {
    unsigned long long k = atomic_fetch_add(&ctx.unnamed[type], 1) + 1;
    snprintf(req->name, sizeof req->name, "%s.noname.%llu", hvd__req_type_name(type),
             k);
  } else if (!name[0] || strlen(name) >= sizeof req->name) {
    return hvd__err(HVD_E_INVALID, "tensor name must be 1 to %zu bytes", sizeof req->name - 1);
  } else {
    strcpy(req->name, name);
  }
  if (o->device < HVD_DEVICE_CPU)
    return hvd__err(HVD_E_INVALID, "opts->device is %d: HVD_DEVICE_CPU (%d) or a CUDA device "
                    "ordinal", o->device, HVD_DEVICE_CPU);
  return 0;
}

/* This rank's rank and the size of the call's process set. */
static int set_position(const hvd_request *req, int *rank, int *size) {
  HVD__CHECK(hvd__engine_pset_info(ctx.engine, req->process_set, rank, size));
  if (*rank < 0)
    return hvd__err(HVD_E_INVALID, "this rank is not a member of process set %d",
                    req->process_set);
  return 0;
}

/* count elements of esize bytes at p: NULL only when empty, size fits. */
static int check_buffer(const char *what, const void *p, size_t count, size_t esize) {
  if (count && !p) return hvd__err(HVD_E_INVALID, "%s is NULL with count %zu", what, count);
  if (esize && count > SIZE_MAX / esize)
    return hvd__err(HVD_E_INVALID, "%s: count %zu overflows the address space", what, count);
  return 0;
}

static int check_dtype(hvd_dtype dtype) {
  if (hvd__dtype_valid((int)dtype)) return 0;
  return hvd__err(HVD_E_INVALID, "unknown dtype %d", (int)dtype);
}

static int check_disjoint(const void *a, const void *b, size_t bytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  if (a == b || !bytes || x + bytes <= y || y + bytes <= x) return 0;
  return hvd__err(HVD_E_INVALID, "sendbuf and recvbuf overlap without being equal");
}

static int check_reduction(hvd_request *req, hvd_dtype dtype, hvd_op op) {
  HVD__CHECK(hvd__reduce_check(dtype, op));
  HVD__CHECK(hvd__scale_check(dtype, req->prescale));
  HVD__CHECK(hvd__scale_check(dtype, req->postscale));
  req->dtype = (uint8_t)dtype;
  req->op = (uint8_t)op;
  return 0;
}

/* opts->shape, a shape of `count` elements, into the request. */
static int copy_shape(hvd_request *req, const hvd_opts *o, size_t count) {
  char why[160];
  if (o->ndims < 0 || o->ndims > HVD_MAX_DIMS)
    return hvd__err(HVD_E_INVALID, "opts->ndims is %d (0 to %d)", o->ndims, HVD_MAX_DIMS);
  if (hvd__shape_check(o->shape, (uint32_t)o->ndims, count, why, sizeof why) < 0)
    return hvd__err(HVD_E_INVALID, "opts->shape: %s", why);
  req->ndims = (uint32_t)o->ndims;
  memcpy(req->shape, o->shape, (size_t)o->ndims * sizeof *o->shape);
  return 0;
}

/* The shape the request negotiates: opts->shape, or [count]. */
static int set_shape(hvd_request *req, const hvd_opts *o) {
  if (o->shape && o->ndims != 0) return copy_shape(req, o, req->count);
  req->ndims = 1;
  req->shape[0] = (int64_t)req->count;
  return 0;
}

/* Allgather, alltoall: the dimensions after the first, negotiated, from
 * opts->shape, a shape of `sent` elements (what this rank sends); none
 * when the caller gave none.  The first dimension is each rank's own: it
 * is kept as 0 (request.h). */
static int set_rows(hvd_request *req, const hvd_opts *o, size_t sent) {
  req->ndims = 0;
  if (!o->shape || o->ndims == 0) return 0;
  HVD__CHECK(copy_shape(req, o, sent));
  req->shape[0] = 0;
  return 0;
}

/* ---- enqueueing ----
 * Every async call is: enter, describe the request, find this rank in the
 * process set, check and fill in what is particular to the collective
 * (a prepare function), enqueue, leave -- and on failure prefix the
 * message with the call and the tensor. */

/* A call's arguments, whichever collective it is. */
typedef struct {
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  hvd_dtype dtype;
  hvd_op op;
  int root;
  void **out;
  size_t *out_counts;
  const size_t *sendcounts;
} call_args;

/* Checks a's fields for this collective and fills in w (whose request
 * already has its name, kind and options); rank/size: in the set. */
typedef int (*prepare_fn)(hvd_work *w, const call_args *a, int rank, int size);

static hvd_handle fail_call(const char *what, const hvd_request *req, int rc) {
  if (req->name[0])
    return hvd__err_prefix(rc, "%s '%s' on rank %d", what, req->name, ctx.job.rank);
  return hvd__err_prefix(rc, "%s on rank %d", what, ctx.job.rank);
}

/* The elements an allgather or alltoall sends (prep_alltoall checked
 * that sendcounts' sum does not overflow). */
static size_t sent_count(int type, const call_args *a, int size) {
  if (type != HVD_REQ_ALLTOALL) return a->count;
  size_t total = 0;
  for (int i = 0; i < size; i++) total += a->sendcounts[i];
  return total;
}

/* Describes, places and prepares one work (already zeroed). */
static int prepare(hvd_work *w, int type, const char *name, const hvd_opts *o, prepare_fn prep,
                   const call_args *a) {
  int rank, size;
  HVD__CHECK(describe(&w->req, type, name, o));
  w->device = o->device;
  w->stream = o->stream;
  HVD__CHECK(set_position(&w->req, &rank, &size));
  HVD__CHECK(prep(w, a, rank, size));
  if (hvd__request_has_rows(type)) return set_rows(&w->req, o, sent_count(type, a, size));
  return hvd__request_has_shape(type) ? set_shape(&w->req, o) : 0;
}

/* One collective: enqueued for a handle (an async call), or with `run`
 * run to its end in one trip into the engine (a blocking call: 0 or the
 * error, which is the enqueue's, prefixed as the async call's, or the
 * operation's, as hvd_wait gives it). */
static hvd_handle submit_one(const char *what, int type, const char *name, const hvd_opts *opts,
                             prepare_fn prep, const call_args *a, int run) {
  hvd_opts o;
  hvd_work w;
  memset(&w, 0, sizeof w);
  int rc = hvd__opts_read(opts, &o), queued = 0;
  if (rc < 0) return hvd__err_prefix(rc, "%s", what);
  HVD__CHECK(enter(what));
  hvd_handle h = prepare(&w, type, name, &o, prep, a);
  if (h == 0 && run) h = hvd__engine_run(ctx.engine, &w, 1, NULL, &queued);
  else if (h == 0) h = hvd__engine_enqueue(ctx.engine, &w, 1, o.callback, o.callback_arg, 0);
  leave();
  return h < 0 && !queued ? fail_call(what, &w.req, (int)h) : h;
}

/* sendbuf -> recvbuf of `in` and `out` elements (reducing collectives). */
static int prep_reduction(hvd_work *w, const call_args *a, size_t out) {
  HVD__CHECK(check_reduction(&w->req, a->dtype, a->op));
  size_t esize = hvd_dtype_size(a->dtype);
  HVD__CHECK(check_buffer("sendbuf", a->sendbuf, a->count, esize));
  HVD__CHECK(check_buffer("recvbuf", a->recvbuf, out, esize));
  HVD__CHECK(check_disjoint(a->sendbuf, a->recvbuf, out * esize));
  w->req.count = a->count;
  w->sendbuf = a->sendbuf;
  w->recvbuf = a->recvbuf;
  return 0;
}

static int prep_allreduce(hvd_work *w, const call_args *a, int rank, int size) {
  HVD__UNUSED(rank);
  if (a->op == HVD_ADASUM) HVD__CHECK(hvd__adasum_check(a->dtype, size));
  return prep_reduction(w, a, a->count);
}

static int prep_reducescatter(hvd_work *w, const call_args *a, int rank, int size) {
  if (a->op == HVD_ADASUM)
    return hvd__err(HVD_E_UNSUPPORTED, "reducescatter does not support Adasum");
  return prep_reduction(w, a, hvd__split_count(a->count, size, rank));
}

static int prep_broadcast(hvd_work *w, const call_args *a, int rank, int size) {
  HVD__UNUSED(rank);
  HVD__CHECK(check_dtype(a->dtype));
  HVD__CHECK(check_buffer("buf", a->recvbuf, a->count, hvd_dtype_size(a->dtype)));
  if (a->root < 0 || a->root >= size)
    return hvd__err(HVD_E_INVALID, "root_rank %d is not a rank of this set of size %d", a->root,
                    size);
  w->req.dtype = (uint8_t)a->dtype;
  w->req.count = a->count;
  w->req.root = a->root;
  w->recvbuf = a->recvbuf;
  return 0;
}

/* The malloc()ed-result collectives: *out starts NULL. */
static int prep_result(hvd_work *w, const call_args *a, size_t sent) {
  HVD__CHECK(check_dtype(a->dtype));
  if (!a->out) return hvd__err(HVD_E_INVALID, "recvbuf (void **) is NULL");
  HVD__CHECK(check_buffer("sendbuf", a->sendbuf, sent, hvd_dtype_size(a->dtype)));
  w->req.dtype = (uint8_t)a->dtype;
  w->sendbuf = a->sendbuf;
  w->out = a->out;
  w->out_counts = a->out_counts;
  return 0;
}

static int prep_allgather(hvd_work *w, const call_args *a, int rank, int size) {
  HVD__UNUSED(rank);
  HVD__UNUSED(size);
  w->local_count = a->count;
  return prep_result(w, a, a->count);
}

static int prep_alltoall(hvd_work *w, const call_args *a, int rank, int size) {
  HVD__UNUSED(rank);
  if (!a->sendcounts) return hvd__err(HVD_E_INVALID, "sendcounts is NULL");
  size_t total = 0;
  for (int i = 0; i < size; i++) {
    if (a->sendcounts[i] > SIZE_MAX - total)
      return hvd__err(HVD_E_INVALID, "sendcounts overflow at rank %d", i);
    total += a->sendcounts[i];
  }
  w->sendcounts = a->sendcounts;
  return prep_result(w, a, total);
}

/* Each collective's call, async (run 0) or blocking (run 1). */
static hvd_handle allreduce(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype,
                            hvd_op op, const char *name, const hvd_opts *opts, int run) {
  call_args a = {.sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype, .op = op};
  return submit_one("allreduce", HVD_REQ_ALLREDUCE, name, opts, prep_allreduce, &a, run);
}

hvd_handle hvd_allreduce_async_opts(const void *sendbuf, void *recvbuf, size_t count,
                                    hvd_dtype dtype, hvd_op op, const char *name,
                                    const hvd_opts *opts) {
  return allreduce(sendbuf, recvbuf, count, dtype, op, name, opts, 0);
}

hvd_handle hvd_allreduce_async(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype,
                               hvd_op op, const char *name) {
  return hvd_allreduce_async_opts(sendbuf, recvbuf, count, dtype, op, name, NULL);
}

/* What a group's member i is, for its collective. */
typedef struct {
  const void *const *sendbufs;
  void *const *recvbufs;  /* reducing collectives */
  void **outs;            /* allgather */
  size_t *out_counts;     /* allgather: set size per member, or NULL */
  const size_t *counts;
  hvd_dtype dtype;
  hvd_op op;
} group_args;

static call_args member_args(const group_args *g, int i, int size) {
  call_args a = {.sendbuf = g->sendbufs[i], .count = g->counts[i], .dtype = g->dtype,
                 .op = g->op};
  if (g->recvbufs) a.recvbuf = g->recvbufs[i];
  if (g->outs) a.out = &g->outs[i];
  if (g->out_counts) a.out_counts = g->out_counts + (size_t)i * (size_t)size;
  return a;
}

/* Grouped collectives: n members named "<name>.<i>", negotiated and run
 * as one unit (the engine holds the group until every member is ready on
 * every rank).  A group has no shape: each member's is [count].  Async,
 * or with `run` blocking, as submit_one. */
static hvd_handle submit_group(const char *what, int type, prepare_fn prep, const group_args *g,
                               int n, const char *name, const hvd_opts *opts, int run) {
  hvd_opts o, member_opts;
  hvd_request group;
  int rank = 0, size = 0, queued = 0;
  int rc = hvd__opts_read(opts, &o);
  if (rc < 0) return hvd__err_prefix(rc, "%s", what);
  member_opts = o;
  member_opts.shape = NULL;
  member_opts.ndims = 0;
  memset(&group, 0, sizeof group);
  HVD__CHECK(enter(what));
  hvd_work *w = n >= 1 && n <= 1024 ? calloc((size_t)n, sizeof *w) : NULL;
  rc = describe(&group, type, name, &o);
  if (rc == 0 && (n < 1 || n > 1024 || !g->sendbufs || (!g->recvbufs && !g->outs) || !g->counts))
    rc = hvd__err(HVD_E_INVALID, "a group needs 1 to 1024 tensors and non-NULL arrays (n = %d)", n);
  if (rc == 0 && !w) rc = hvd__err(HVD_E_NOMEM, "allocating %d tensors", n);
  if (rc == 0) rc = set_position(&group, &rank, &size);
  for (int i = 0; rc == 0 && i < n; i++) {
    char member[HVD_NAME_MAX + 16];
    call_args a = member_args(g, i, size);
    snprintf(member, sizeof member, "%s.%d", group.name, i);
    rc = prepare(&w[i], type, member, &member_opts, prep, &a);
    w[i].req.group_size = (uint32_t)n;
    w[i].req.group_index = (uint32_t)i;
  }
  hvd_handle h = rc < 0 ? rc
                 : run  ? hvd__engine_run(ctx.engine, w, n, NULL, &queued)
                        : hvd__engine_enqueue(ctx.engine, w, n, o.callback, o.callback_arg, 0);
  leave();
  free(w);
  return h < 0 && !queued ? fail_call(what, &group, (int)h) : h;
}

static hvd_handle grouped_allreduce(const void *const *sendbufs, void *const *recvbufs,
                                    const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                                    const char *name, const hvd_opts *opts, int run) {
  group_args g = {.sendbufs = sendbufs, .recvbufs = recvbufs, .counts = counts, .dtype = dtype,
                  .op = op};
  return submit_group("grouped_allreduce", HVD_REQ_ALLREDUCE, prep_allreduce, &g, n, name, opts,
                      run);
}

hvd_handle hvd_grouped_allreduce_async(const void *const *sendbufs, void *const *recvbufs,
                                       const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                                       const char *name, const hvd_opts *opts) {
  return grouped_allreduce(sendbufs, recvbufs, counts, n, dtype, op, name, opts, 0);
}

hvd_handle hvd_grouped_allgather_async(const void *const *sendbufs, const size_t *counts, int n,
                                       hvd_dtype dtype, void **recvbufs, size_t *recvcounts,
                                       const char *name, const hvd_opts *opts) {
  group_args g = {.sendbufs = sendbufs, .outs = recvbufs, .out_counts = recvcounts,
                  .counts = counts, .dtype = dtype};
  return submit_group("grouped_allgather", HVD_REQ_ALLGATHER, prep_allgather, &g, n, name, opts,
                      0);
}

hvd_handle hvd_grouped_reducescatter_async(const void *const *sendbufs, void *const *recvbufs,
                                           const size_t *counts, int n, hvd_dtype dtype,
                                           hvd_op op, const char *name, const hvd_opts *opts) {
  group_args g = {.sendbufs = sendbufs, .recvbufs = recvbufs, .counts = counts, .dtype = dtype,
                  .op = op};
  return submit_group("grouped_reducescatter", HVD_REQ_REDUCESCATTER, prep_reducescatter, &g, n,
                      name, opts, 0);
}

static hvd_handle broadcast(void *buf, size_t count, hvd_dtype dtype, int root_rank,
                            const char *name, const hvd_opts *opts, int run) {
  call_args a = {.recvbuf = buf, .count = count, .dtype = dtype, .root = root_rank};
  return submit_one("broadcast", HVD_REQ_BROADCAST, name, opts, prep_broadcast, &a, run);
}

hvd_handle hvd_broadcast_async_opts(void *buf, size_t count, hvd_dtype dtype, int root_rank,
                                    const char *name, const hvd_opts *opts) {
  return broadcast(buf, count, dtype, root_rank, name, opts, 0);
}

hvd_handle hvd_broadcast_async(void *buf, size_t count, hvd_dtype dtype, int root_rank,
                               const char *name) {
  return hvd_broadcast_async_opts(buf, count, dtype, root_rank, name, NULL);
}

static hvd_handle allgather(const void *sendbuf, size_t count, hvd_dtype dtype, void **recvbuf,
                            size_t *recvcounts, const char *name, const hvd_opts *opts, int run) {
  call_args a = {.sendbuf = sendbuf, .count = count, .dtype = dtype, .out = recvbuf,
                 .out_counts = recvcounts};
  return submit_one("allgather", HVD_REQ_ALLGATHER, name, opts, prep_allgather, &a, run);
}

hvd_handle hvd_allgather_async(const void *sendbuf, size_t count, hvd_dtype dtype,
                               void **recvbuf, size_t *recvcounts, const char *name,
                               const hvd_opts *opts) {
  return allgather(sendbuf, count, dtype, recvbuf, recvcounts, name, opts, 0);
}

static hvd_handle alltoall(const void *sendbuf, const size_t *sendcounts, hvd_dtype dtype,
                           void **recvbuf, size_t *recvcounts, const char *name,
                           const hvd_opts *opts, int run) {
  call_args a = {.sendbuf = sendbuf, .sendcounts = sendcounts, .dtype = dtype, .out = recvbuf,
                 .out_counts = recvcounts};
  return submit_one("alltoall", HVD_REQ_ALLTOALL, name, opts, prep_alltoall, &a, run);
}

hvd_handle hvd_alltoall_async(const void *sendbuf, const size_t *sendcounts, hvd_dtype dtype,
                              void **recvbuf, size_t *recvcounts, const char *name,
                              const hvd_opts *opts) {
  return alltoall(sendbuf, sendcounts, dtype, recvbuf, recvcounts, name, opts, 0);
}

static hvd_handle reducescatter(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype,
                                hvd_op op, const char *name, const hvd_opts *opts, int run) {
  call_args a = {.sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype, .op = op};
  return submit_one("reducescatter", HVD_REQ_REDUCESCATTER, name, opts, prep_reducescatter, &a,
                    run);
}

hvd_handle hvd_reducescatter_async(const void *sendbuf, void *recvbuf, size_t count,
                                   hvd_dtype dtype, hvd_op op, const char *name,
                                   const hvd_opts *opts) {
  return reducescatter(sendbuf, recvbuf, count, dtype, op, name, opts, 0);
}

/* ---- timeline ---- */

/* Every rank hands its engine the timeline it writes for path (NULL:
 * none, which stops the one it may be writing). */
static int set_timeline(const char *what, const char *path, int mark_cycles) {
  hvd_timeline *tl = NULL;
  HVD__CHECK(enter(what));
  int rc = 0;
  if (path && !path[0]) rc = hvd__err(HVD_E_INVALID, "the path is empty");
  /* The timeline being written is closed before the new one is opened:
   * two descriptors on one path would write over each other. */
  if (rc == 0 && path) rc = hvd__engine_set_timeline(ctx.engine, NULL);
  if (rc == 0 && path) rc = hvd__timeline_open_for_rank(path, ctx.job.rank, mark_cycles, &tl);
  if (rc == 0) rc = hvd__engine_set_timeline(ctx.engine, tl);
  leave();
  return rc < 0 ? hvd__err_prefix(rc, "%s", what) : 0;
}

int hvd_start_timeline(const char *path, int mark_cycles) {
  if (!path) return hvd__err(HVD_E_INVALID, "hvd_start_timeline: path is NULL");
  return set_timeline("hvd_start_timeline", path, mark_cycles);
}

int hvd_stop_timeline(void) { return set_timeline("hvd_stop_timeline", NULL, 0); }

/* ---- completion ---- */

/* A handle from an earlier hvd_init(): its job is gone. */
static int stale(hvd_handle h, const char *what) {
  unsigned epoch = (unsigned)((uint64_t)h >> 48);
  if (h <= 0 || epoch == 0 || epoch == atomic_load(&ctx.epoch)) return 0;
  return hvd__err(HVD_E_ABORTED, "%s: handle %lld belongs to an earlier job: the job was "
                  "re-formed since (hvd_shutdown/hvd_init, or a change of membership)",
                  what, (long long)h);
}

int hvd_poll(hvd_handle h) {
  HVD__CHECK(stale(h, "hvd_poll"));
  HVD__CHECK(enter("hvd_poll"));
  int rc = hvd__engine_poll(ctx.engine, h);
  leave();
  return rc;
}

int hvd_wait(hvd_handle h) {
  if (h < 0) return (int)h; /* the enqueue failed; its message is already set */
  HVD__CHECK(stale(h, "hvd_wait"));
  HVD__CHECK(enter("hvd_wait"));
  int rc = hvd__engine_wait(ctx.engine, h, NULL);
  leave();
  return rc;
}

/* ---- blocking forms: enqueue + wait ---- */

int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype, hvd_op op,
                  const char *name) {
  return (int)allreduce(sendbuf, recvbuf, count, dtype, op, name, NULL, 1);
}

int hvd_grouped_allreduce(const void *const *sendbufs, void *const *recvbufs,
                          const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                          const char *name) {
  return (int)grouped_allreduce(sendbufs, recvbufs, counts, n, dtype, op, name, NULL, 1);
}

int hvd_broadcast(void *buf, size_t count, hvd_dtype dtype, int root_rank, const char *name) {
  return (int)broadcast(buf, count, dtype, root_rank, name, NULL, 1);
}

int hvd_allgather(const void *sendbuf, size_t count, hvd_dtype dtype, void **recvbuf,
                  size_t *recvcounts, const char *name) {
  return (int)allgather(sendbuf, count, dtype, recvbuf, recvcounts, name, NULL, 1);
}

int hvd_alltoall(const void *sendbuf, const size_t *sendcounts, hvd_dtype dtype, void **recvbuf,
                 size_t *recvcounts, const char *name) {
  return (int)alltoall(sendbuf, sendcounts, dtype, recvbuf, recvcounts, name, NULL, 1);
}

int hvd_reducescatter(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype,
                      hvd_op op, const char *name) {
  return (int)reducescatter(sendbuf, recvbuf, count, dtype, op, name, NULL, 1);
}

size_t hvd_reducescatter_count(size_t count, int rank) {
  int size = hvd_size();
  return (size > 0 && rank >= 0 && rank < size) ? hvd__split_count(count, size, rank) : 0;
}

/* Negotiated like a tensor, so barriers, joins and collectives interleave
 * in one order on every rank. */
static int control(int type, const char *what, uint64_t count, int32_t root, const int *ranks,
                   int64_t *value) {
  hvd_work w;
  memset(&w, 0, sizeof w);
  HVD__CHECK(enter(what));
  int rc = describe(&w.req, type, NULL, &default_opts);
  w.req.count = count;
  w.req.root = root;
  w.ranks = ranks;
  int queued = 0;
  if (rc == 0) rc = hvd__engine_run(ctx.engine, &w, 1, value, &queued);
  leave();
  return rc < 0 && !queued ? (int)fail_call(what, &w.req, rc) : rc;
}

int hvd_barrier(void) { return control(HVD_REQ_BARRIER, "barrier", 0, 0, NULL, NULL); }

int hvd_join(void) {
  HVD__CHECK(enter("hvd_join"));
  int rc = hvd__engine_join(ctx.engine);
  leave();
  return rc;
}

/* ---- process sets ---- */

static int by_value(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static int remember_pset(int id, const int *ranks, int n) {
  pthread_mutex_lock(&ctx.lock);
  user_pset *p = realloc(ctx.psets, (size_t)(ctx.npsets + 1) * sizeof *p);
  int *copy = p ? malloc((size_t)n * sizeof *copy) : NULL;
  if (p) ctx.psets = p;
  if (copy) {
    memcpy(copy, ranks, (size_t)n * sizeof *copy);
    ctx.psets[ctx.npsets++] = (user_pset){id, n, copy};
  }
  pthread_mutex_unlock(&ctx.lock);
  return copy ? 0 : hvd__err(HVD_E_NOMEM, "remembering process set %d", id);
}

static void forget_pset(int id) {
  pthread_mutex_lock(&ctx.lock);
  for (int i = 0; i < ctx.npsets; i++) {
    if (ctx.psets[i].id != id) continue;
    free(ctx.psets[i].ranks);
    ctx.psets[i] = ctx.psets[--ctx.npsets];
    break;
  }
  pthread_mutex_unlock(&ctx.lock);
}

int hvd_add_process_set(const int *ranks, int n) {
  int size = hvd_size();
  if (size < 0) return size;
  if (!ranks || n < 1 || n > size)
    return hvd__err(HVD_E_INVALID, "a process set needs 1 to %d ranks (n = %d)", size, n);
  int *sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) return hvd__err(HVD_E_NOMEM, "allocating %d ranks", n);
  memcpy(sorted, ranks, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, by_value);
  int rc = 0;
  for (int i = 0; rc == 0 && i < n; i++)
    if (sorted[i] < 0 || sorted[i] >= size || (i && sorted[i] == sorted[i - 1]))
      rc = hvd__err(HVD_E_INVALID, "process set rank %d is %s", sorted[i],
                    sorted[i] < 0 || sorted[i] >= size ? "not a rank of the job" : "repeated");
  int64_t id = 0;
  if (rc == 0)
    rc = control(HVD_REQ_PSET_ADD, "add_process_set", (uint64_t)n,
                 (int32_t)hvd__ranks_hash(sorted, n), sorted, &id);
  if (rc == 0) rc = remember_pset((int)id, sorted, n);
  free(sorted);
  return rc < 0 ? rc : (int)id;
}

int hvd_remove_process_set(int process_set) {
  if (process_set <= 0)
    return hvd__err(HVD_E_INVALID, "process set %d cannot be removed", process_set);
  int rc = control(HVD_REQ_PSET_REMOVE, "remove_process_set", 0, process_set, NULL, NULL);
  if (rc == 0) forget_pset(process_set);
  return rc;
}

static int pset_query(int id, int want_rank, int *out) {
  int rank, size;
  HVD__CHECK(enter("process set query"));
  int rc = hvd__engine_pset_info(ctx.engine, id, &rank, &size);
  leave();
  if (rc < 0) return rc;
  *out = want_rank ? rank : size;
  return 0;
}

int hvd_process_set_rank(int process_set) {
  int rank;
  HVD__CHECK(pset_query(process_set, 1, &rank));
  if (rank < 0) return hvd__err(HVD_E_INVALID, "this rank is not in process set %d", process_set);
  return rank;
}

int hvd_process_set_size(int process_set) {
  int size;
  HVD__CHECK(pset_query(process_set, 0, &size));
  return size;
}

int hvd_process_set_included(int process_set) {
  int rank;
  HVD__CHECK(pset_query(process_set, 1, &rank));
  return rank >= 0;
}

/* ---- elastic training: the next job (elastic_int.h) ---- */

int hvd__elastic_poll_updates(hvd__elastic_update *u) {
  memset(u, 0, sizeof *u);
  pthread_mutex_lock(&ctx.lock);
  int rc = ctx.initialized ? hvd__rdzv_notices_poll(&ctx.notices) : 0;
  u->stamp = ctx.notices.last.stamp;
  u->added = ctx.notices.added;
  u->removed = ctx.notices.removed;
  pthread_mutex_unlock(&ctx.lock);
  if (rc < 0) hvd__log(HVD_LOG_WARNING, "hvdrun's notices: %s; none will be heard", hvd_last_error());
  return 0;
}

static int by_pset_id(const void *a, const void *b) {
  return ((const user_pset *)a)->id - ((const user_pset *)b)->id;
}

/* Adds set p again with its id, over its ranks below size. */
static int add_again(const user_pset *p, int size) {
  int *ranks = malloc((size_t)p->n * sizeof *ranks), n = 0;
  if (!ranks) return hvd__err(HVD_E_NOMEM, "adding process set %d again", p->id);
  for (int i = 0; i < p->n; i++)
    if (p->ranks[i] < size) ranks[n++] = p->ranks[i];
  int rc = 0;
  if (n == 0) {
    hvd__log(HVD_LOG_WARNING, "process set %d is left without ranks in a job of %d: not "
             "added again", p->id, size);
  } else if ((rc = enter("add_process_set")) == 0) {
    hvd__engine_set_next_pset_id(ctx.engine, p->id);
    leave();
    int64_t id = 0;
    rc = control(HVD_REQ_PSET_ADD, "add_process_set", (uint64_t)n,
                 (int32_t)hvd__ranks_hash(ranks, n), ranks, &id);
  }
  free(ranks);
  return rc;
}

/* A copy of the program's sets (ctx.lock held), or NULL. */
static user_pset *copy_psets(int n) {
  user_pset *sets = calloc((size_t)n, sizeof *sets);
  for (int i = 0; sets && i < n; i++) {
    sets[i] = ctx.psets[i];
    sets[i].ranks = malloc((size_t)sets[i].n * sizeof *sets[i].ranks);
    if (!sets[i].ranks) {
      while (i-- > 0) free(sets[i].ranks);
      free(sets);
      return NULL;
    }
    memcpy(sets[i].ranks, ctx.psets[i].ranks, (size_t)sets[i].n * sizeof *sets[i].ranks);
  }
  return sets;
}

/* One try at the next job. */
static int reform_once(void) {
  pthread_mutex_lock(&ctx.lock);
  shutdown_locked();
  hvd_init_spec spec = {NULL, 0, NULL}; /* elastic jobs are hvdrun's: from the environment */
  int rc = init_locked(&spec), size = ctx.job.size, n = ctx.npsets;
  user_pset *sets = rc == 0 && n ? copy_psets(n) : NULL;
  pthread_mutex_unlock(&ctx.lock);
  if (rc < 0) return hvd__err_prefix(rc, "forming the next job");
  if (n && !sets) return hvd__err(HVD_E_NOMEM, "adding %d process sets again", n);
  if (n) qsort(sets, (size_t)n, sizeof *sets, by_pset_id);
  for (int i = 0; rc == 0 && i < n; i++) rc = add_again(&sets[i], size);
  for (int i = 0; i < n; i++) free(sets[i].ranks);
  free(sets);
  return rc;
}

int hvd__elastic_recoverable(int rc) {
  return rc == HVD_E_PEER_LOST || rc == HVD_E_TIMEOUT || rc == HVD_E_ABORTED ||
         rc == HVD_E_PROTOCOL;
}

int hvd_elastic_host_updates(uint64_t *stamp, int *added, int *removed) {
  hvd__elastic_update u;
  if (!stamp || !added || !removed)
    return hvd__err(HVD_E_INVALID, "hvd_elastic_host_updates: NULL argument");
  HVD__CHECK(hvd__elastic_poll_updates(&u));
  *stamp = u.stamp;
  *added = u.added;
  *removed = u.removed;
  return 0;
}

int hvd_elastic_reset(void) { return hvd__elastic_reform(); }

int hvd__elastic_reform(void) {
  int rc;
  while ((rc = reform_once()) < 0 && hvd__elastic_recoverable(rc))
    hvd__log(HVD_LOG_INFO, "elastic: forming the next job failed (%s); again", hvd_last_error());
  return rc;
}
