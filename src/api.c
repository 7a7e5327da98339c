/*
 * api.c -- the public functions of hvd.h: argument checks, the one global
 * context, and error messages that say which call, which tensor and which
 * rank.
 *
 * Collectives are blocking for now and serialised by the context lock, so
 * every rank runs them in the order its threads call them.  (The engine
 * turns these into enqueue + wait.)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "coll/coll.h"
#include "env.h"
#include "reduce.h"

static struct {
  pthread_mutex_t lock;
  int initialized;
  hvd_job job;
  hvd_comm comm;
  uint64_t unnamed; /* counter for generated names */
} ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- life cycle ---- */

/* Reads every tunable once so a bad value fails hvd_init, not a later call. */
static int check_params(void) {
  for (int id = 0; id < HVD_P__COUNT; id++) {
    long l;
    int i;
    switch (hvd__params[id].kind) {
      case HVD_PK_INT: HVD__CHECK(hvd__param_int((hvd_param_id)id, &l)); break;
      case HVD_PK_BOOL: HVD__CHECK(hvd__param_bool((hvd_param_id)id, &i)); break;
      case HVD_PK_LEVEL: HVD__CHECK(hvd__param_level((hvd_param_id)id, &i)); break;
      default: break;
    }
  }
  return 0;
}

static int init_locked(void) {
  hvd_transport *xport = NULL;
  if (ctx.initialized)
    return hvd__err(HVD_E_ALREADY_INITIALIZED, "hvd_init: already initialized "
                                               "(call hvd_shutdown() first)");
  HVD__CHECK(check_params());
  HVD__CHECK(hvd__job_from_env(&ctx.job));
  hvd__log_set_rank(ctx.job.rank);
  HVD__CHECK(hvd__bootstrap(&ctx.job, &xport));
  int rc = hvd__comm_init(&ctx.comm, ctx.job.rank, ctx.job.size, xport);
  if (rc < 0) {
    hvd__comm_destroy(&ctx.comm);
    return rc;
  }
  ctx.initialized = 1;
  hvd__log(HVD_LOG_DEBUG, "initialized: rank %d of %d on %s", ctx.job.rank, ctx.job.size,
           ctx.job.hostname);
  return 0;
}

int hvd_init(void) {
  pthread_mutex_lock(&ctx.lock);
  int rc = init_locked();
  pthread_mutex_unlock(&ctx.lock);
  return rc < 0 ? hvd__err_prefix(rc, "hvd_init") : 0;
}

int hvd_shutdown(void) {
  pthread_mutex_lock(&ctx.lock);
  if (ctx.initialized) hvd__comm_destroy(&ctx.comm);
  ctx.initialized = 0;
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

/* ---- collectives ----
 * Each public collective is: describe the call, lock, check, run, and on
 * failure prefix the message with the description. */

typedef struct {
  const char *op;        /* "allreduce", ... */
  char name[160];        /* the tensor name, or a generated one */
} call;

static void describe(call *cl, const char *op, const char *name) {
  cl->op = op;
  if (name)
    snprintf(cl->name, sizeof cl->name, "%s", name);
  else
    snprintf(cl->name, sizeof cl->name, "%s.noname.%llu", op,
             (unsigned long long)++ctx.unnamed);
}

static int begin(call *cl, const char *op, const char *name) {
  pthread_mutex_lock(&ctx.lock);
  describe(cl, op, name);
  if (!ctx.initialized)
    return hvd__err(HVD_E_NOT_INITIALIZED, "called before hvd_init()");
  return 0;
}

static int end(call *cl, int rc) {
  int rank = ctx.job.rank;
  pthread_mutex_unlock(&ctx.lock);
  if (rc < 0) hvd__err_prefix(rc, "%s '%s' on rank %d", cl->op, cl->name, rank);
  return rc < 0 ? rc : 0;
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

static int allreduce_checks(const void *s, void *r, size_t count, hvd_dtype dtype, hvd_op op) {
  HVD__CHECK(hvd__reduce_check(dtype, op));
  size_t esize = hvd_dtype_size(dtype);
  HVD__CHECK(check_buffer("sendbuf", s, count, esize));
  HVD__CHECK(check_buffer("recvbuf", r, count, esize));
  return check_disjoint(s, r, count * esize);
}

int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype, hvd_op op,
                  const char *name) {
  call cl;
  int rc = begin(&cl, "allreduce", name);
  if (rc == 0) rc = allreduce_checks(sendbuf, recvbuf, count, dtype, op);
  if (rc == 0) rc = hvd__allreduce(&ctx.comm, sendbuf, recvbuf, count, dtype, op);
  return end(&cl, rc);
}

static int reducescatter_checks(const void *s, void *r, size_t count, hvd_dtype dtype,
                                hvd_op op) {
  HVD__CHECK(hvd__reduce_check(dtype, op));
  size_t esize = hvd_dtype_size(dtype);
  HVD__CHECK(check_buffer("sendbuf", s, count, esize));
  size_t own = hvd__split_count(count, ctx.comm.size, ctx.comm.rank);
  HVD__CHECK(check_buffer("recvbuf", r, own, esize));
  return check_disjoint(s, r, own * esize);
}

int hvd_reducescatter(const void *sendbuf, void *recvbuf, size_t count, hvd_dtype dtype,
                      hvd_op op, const char *name) {
  call cl;
  int rc = begin(&cl, "reducescatter", name);
  if (rc == 0) rc = reducescatter_checks(sendbuf, recvbuf, count, dtype, op);
  if (rc == 0) rc = hvd__reducescatter(&ctx.comm, sendbuf, recvbuf, count, dtype, op);
  return end(&cl, rc);
}

size_t hvd_reducescatter_count(size_t count, int rank) {
  pthread_mutex_lock(&ctx.lock);
  size_t n = 0;
  if (ctx.initialized && rank >= 0 && rank < ctx.comm.size)
    n = hvd__split_count(count, ctx.comm.size, rank);
  pthread_mutex_unlock(&ctx.lock);
  return n;
}

int hvd_broadcast(void *buf, size_t count, hvd_dtype dtype, int root_rank, const char *name) {
  call cl;
  int rc = begin(&cl, "broadcast", name);
  if (rc == 0) rc = check_dtype(dtype);
  if (rc == 0) rc = check_buffer("buf", buf, count, hvd_dtype_size(dtype));
  if (rc == 0 && (root_rank < 0 || root_rank >= ctx.comm.size))
    rc = hvd__err(HVD_E_INVALID, "root_rank %d is not a rank of this job of size %d",
                  root_rank, ctx.comm.size);
  if (rc == 0) rc = hvd__broadcast(&ctx.comm, buf, count * hvd_dtype_size(dtype), root_rank);
  return end(&cl, rc);
}

int hvd_allgather(const void *sendbuf, size_t count, hvd_dtype dtype, void **recvbuf,
                  size_t *recvcounts, const char *name) {
  call cl;
  int rc = begin(&cl, "allgather", name);
  if (rc == 0) rc = check_dtype(dtype);
  if (rc == 0) rc = check_buffer("sendbuf", sendbuf, count, hvd_dtype_size(dtype));
  if (rc == 0 && !recvbuf) rc = hvd__err(HVD_E_INVALID, "recvbuf (void **) is NULL");
  if (rc == 0) {
    *recvbuf = NULL;
    rc = hvd__allgather(&ctx.comm, sendbuf, count, hvd_dtype_size(dtype), recvbuf, recvcounts);
  }
  return end(&cl, rc);
}

static int alltoall_checks(const void *s, const size_t *scounts, hvd_dtype dtype,
                           void **recvbuf) {
  HVD__CHECK(check_dtype(dtype));
  if (!scounts) return hvd__err(HVD_E_INVALID, "sendcounts is NULL");
  if (!recvbuf) return hvd__err(HVD_E_INVALID, "recvbuf (void **) is NULL");
  size_t total = 0;
  for (int i = 0; i < ctx.comm.size; i++) {
    if (scounts[i] > SIZE_MAX - total)
      return hvd__err(HVD_E_INVALID, "sendcounts overflow at rank %d", i);
    total += scounts[i];
  }
  return check_buffer("sendbuf", s, total, hvd_dtype_size(dtype));
}

int hvd_alltoall(const void *sendbuf, const size_t *sendcounts, hvd_dtype dtype, void **recvbuf,
                 size_t *recvcounts, const char *name) {
  call cl;
  int rc = begin(&cl, "alltoall", name);
  if (rc == 0) rc = alltoall_checks(sendbuf, sendcounts, dtype, recvbuf);
  if (rc == 0) {
    *recvbuf = NULL;
    rc = hvd__alltoall(&ctx.comm, sendbuf, sendcounts, hvd_dtype_size(dtype), recvbuf,
                       recvcounts);
  }
  return end(&cl, rc);
}

int hvd_barrier(void) {
  call cl;
  int rc = begin(&cl, "barrier", "barrier");
  if (rc == 0) rc = hvd__barrier(&ctx.comm);
  return end(&cl, rc);
}
