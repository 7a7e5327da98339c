/*
 * ops.c -- the engine's collectives through MPI (HOROVOD_CPU_OPERATIONS=mpi;
 * coll.h's hvd_coll_ops), on hvd's duplicate of the job's communicator.
 *
 * Every call is MPI's nonblocking form (MPI_Iallreduce, MPI_Iallgatherv,
 * MPI_Ibcast, MPI_Ialltoallv, MPI_Ireduce_scatter, MPI_Ibarrier), waited
 * for by testing it until HOROVOD_GLOO_TIMEOUT_SECONDS have passed, so a
 * lost or stuck rank is an error naming the tensor on every survivor,
 * never a hang; any failure breaks the communicator as hvd's own do.
 * Buffers are reduced in place (MPI_IN_PLACE).  MPI counts are ints: a
 * tensor longer than CHUNK elements goes as several calls, each the same
 * on every rank, so the bits do not depend on anything but the tensor.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "env.h"
#include "reduce.h"
#include "mpi_int.h"

#define CHUNK (1u << 30) /* elements per call */
#define KNOB "HOROVOD_GLOO_TIMEOUT_SECONDS"

/* When a collective started now must be done. */
static uint64_t deadline(void) {
  long s = 30;
  hvd__param_int(HVD_P_GLOO_TIMEOUT_SECONDS, &s); /* hvd_init checked it */
  return hvd__deadline_in(s * 1000);
}

/* Starts a collective on c: HVD_E_ABORTED if it broke earlier. */
static int begin(hvd_comm *c) {
  uint32_t tag;
  return hvd__comm_begin(c, &tag);
}

/* Waits for reqs[0..n) (started: MPI's return code rc), then breaks c on
 * failure. */
static int finish(hvd_comm *c, int rc, MPI_Request *reqs, int n, const char *what) {
  uint64_t by = deadline();
  if (rc != MPI_SUCCESS) rc = hvd__mpi_fail(rc, what);
  for (int i = 0; rc == 0 && i < n; i++) rc = hvd__mpi_wait(&reqs[i], by, what, KNOB);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}

static int too_long(hvd_comm *c, const char *what, size_t count) {
  return hvd__comm_fail(c, hvd__err(HVD_E_UNSUPPORTED, "%s: %zu elements exceed MPI's int "
                                    "counts", what, count));
}

/* Each tensor by itself, every chunk at once. */
static int mpi_allreduce(hvd_comm *c, void *const *bufs, const size_t *counts, int n,
                         hvd_dtype dtype, hvd_op op) {
  MPI_Datatype type;
  MPI_Op mop;
  HVD__CHECK(begin(c));
  int rc = hvd__mpi_op(dtype, op, &type, &mop);
  if (rc < 0) return hvd__comm_fail(c, rc);
  size_t esize = hvd_dtype_size(dtype), nreq = 0;
  for (int i = 0; i < n; i++) nreq += (counts[i] + CHUNK - 1) / CHUNK;
  MPI_Request *reqs = calloc(nreq ? nreq : 1, sizeof *reqs);
  if (!reqs) return hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "%zu MPI requests", nreq));
  int mrc = MPI_SUCCESS, started = 0;
  for (int i = 0; mrc == MPI_SUCCESS && i < n; i++)
    for (size_t off = 0; mrc == MPI_SUCCESS && off < counts[i]; off += CHUNK) {
      size_t len = counts[i] - off < CHUNK ? counts[i] - off : CHUNK;
      mrc = MPI_Iallreduce(MPI_IN_PLACE, (char *)bufs[i] + off * esize, (int)len, type, mop,
                           hvd__mpi.comm, &reqs[started]);
      if (mrc == MPI_SUCCESS) started++;
    }
  rc = finish(c, mrc, reqs, started, "MPI_Iallreduce");
  free(reqs);
  for (int i = 0; rc == 0 && op == HVD_AVERAGE && i < n; i++)
    hvd__reduce_average(bufs[i], counts[i], dtype, c->size);
  return rc;
}

static int mpi_reducescatter(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                             hvd_dtype dtype, hvd_op op) {
  MPI_Datatype type;
  MPI_Op mop;
  MPI_Request req;
  HVD__CHECK(begin(c));
  int rc = hvd__mpi_op(dtype, op, &type, &mop);
  if (rc < 0) return hvd__comm_fail(c, rc);
  if (count > INT_MAX) return too_long(c, "MPI_Ireduce_scatter", count);
  int *recv = malloc((size_t)c->size * sizeof *recv);
  if (!recv) return hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "%d counts", c->size));
  for (int r = 0; r < c->size; r++) recv[r] = (int)hvd__split_count(count, c->size, r);
  int mrc = MPI_Ireduce_scatter(sbuf, rbuf, recv, type, mop, hvd__mpi.comm, &req);
  rc = finish(c, mrc, &req, mrc == MPI_SUCCESS, "MPI_Ireduce_scatter");
  if (rc == 0 && op == HVD_AVERAGE) hvd__reduce_average(rbuf, (size_t)recv[c->rank], dtype, c->size);
  free(recv);
  return rc;
}

static int mpi_broadcast(hvd_comm *c, void *buf, size_t bytes, int root) {
  HVD__CHECK(begin(c));
  size_t nreq = (bytes + CHUNK - 1) / CHUNK;
  MPI_Request *reqs = calloc(nreq ? nreq : 1, sizeof *reqs);
  if (!reqs) return hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "%zu MPI requests", nreq));
  int mrc = MPI_SUCCESS, started = 0;
  for (size_t off = 0; mrc == MPI_SUCCESS && off < bytes; off += CHUNK) {
    size_t len = bytes - off < CHUNK ? bytes - off : CHUNK;
    mrc = MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, hvd__mpi.comm, &reqs[started]);
    if (mrc == MPI_SUCCESS) started++;
  }
  int rc = finish(c, mrc, reqs, started, "MPI_Ibcast");
  free(reqs);
  return rc;
}

/* An element of esize bytes as an MPI datatype. */
static MPI_Datatype element(size_t esize) {
  switch (esize) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

/* ints counts[] and displs[] (in elements) of u64 counts, and the total. */
static int int_layout(hvd_comm *c, const uint64_t *in, int *counts, int *displs, size_t *total,
                      const char *what) {
  size_t sum = 0;
  for (int r = 0; r < c->size; r++) {
    if (in[r] > INT_MAX || sum > INT_MAX) return too_long(c, what, (size_t)in[r] + sum);
    counts[r] = (int)in[r];
    displs[r] = (int)sum;
    sum += in[r];
  }
  *total = sum;
  return 0;
}

/* Arrays of n ints (and u64s) for counts and displacements. */
typedef struct {
  uint64_t *u64;
  int *counts, *displs, *counts2, *displs2;
} layout;

static int layout_new(hvd_comm *c, layout *l) {
  size_t n = (size_t)c->size;
  l->u64 = calloc(n, sizeof *l->u64);
  l->counts = calloc(4 * n, sizeof *l->counts);
  if (!l->u64 || !l->counts) {
    free(l->u64);
    free(l->counts);
    return hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "counts of %d ranks", c->size));
  }
  l->displs = l->counts + n;
  l->counts2 = l->counts + 2 * n;
  l->displs2 = l->counts + 3 * n;
  return 0;
}

static void layout_free(layout *l) {
  free(l->u64);
  free(l->counts);
}

static int mpi_allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                         size_t *counts) {
  layout l;
  MPI_Request req;
  uint64_t mine = count;
  size_t total = 0;
  *rbuf = NULL;
  HVD__CHECK(begin(c));
  HVD__CHECK(layout_new(c, &l));
  int mrc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, l.u64, 1, MPI_UINT64_T, hvd__mpi.comm, &req);
  int rc = finish(c, mrc, &req, mrc == MPI_SUCCESS, "MPI_Iallgather of the counts");
  if (rc == 0) rc = int_layout(c, l.u64, l.counts, l.displs, &total, "MPI_Iallgatherv");
  char *out = rc == 0 && total ? malloc(total * esize) : NULL;
  if (rc == 0 && total && !out)
    rc = hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "%zu bytes of allgather", total * esize));
  if (rc == 0) {
    if (count) memcpy(out + (size_t)l.displs[c->rank] * esize, sbuf, count * esize);
    mrc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out ? out : (void *)&mine,
                          l.counts, l.displs, element(esize), hvd__mpi.comm, &req);
    rc = finish(c, mrc, &req, mrc == MPI_SUCCESS, "MPI_Iallgatherv");
  }
  for (int r = 0; rc == 0 && r < c->size; r++) counts[r] = (size_t)l.u64[r];
  if (rc == 0) *rbuf = out;
  else free(out);
  layout_free(&l);
  return rc;
}

static int mpi_alltoall(hvd_comm *c, const void *sbuf, const size_t *scounts, size_t esize,
                        void **rbuf, size_t *rcounts) {
  layout l;
  MPI_Request req;
  size_t stotal = 0, rtotal = 0;
  *rbuf = NULL;
  HVD__CHECK(begin(c));
  HVD__CHECK(layout_new(c, &l));
  uint64_t *mine = malloc((size_t)c->size * sizeof *mine);
  int rc = mine ? 0 : hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "counts of %d ranks", c->size));
  for (int r = 0; rc == 0 && r < c->size; r++) mine[r] = scounts[r];
  if (rc == 0) rc = int_layout(c, mine, l.counts, l.displs, &stotal, "MPI_Ialltoallv");
  int mrc = MPI_SUCCESS;
  if (rc == 0) {
    mrc = MPI_Ialltoall(mine, 1, MPI_UINT64_T, l.u64, 1, MPI_UINT64_T, hvd__mpi.comm, &req);
    rc = finish(c, mrc, &req, mrc == MPI_SUCCESS, "MPI_Ialltoall of the counts");
  }
  if (rc == 0) rc = int_layout(c, l.u64, l.counts2, l.displs2, &rtotal, "MPI_Ialltoallv");
  char *out = rc == 0 && rtotal ? malloc(rtotal * esize) : NULL;
  if (rc == 0 && rtotal && !out)
    rc = hvd__comm_fail(c, hvd__err(HVD_E_NOMEM, "%zu bytes of alltoall", rtotal * esize));
  if (rc == 0) {
    MPI_Datatype e = element(esize);
    mrc = MPI_Ialltoallv(sbuf, l.counts, l.displs, e, out, l.counts2, l.displs2, e,
                         hvd__mpi.comm, &req);
    rc = finish(c, mrc, &req, mrc == MPI_SUCCESS, "MPI_Ialltoallv");
  }
  for (int r = 0; rc == 0 && r < c->size; r++) rcounts[r] = (size_t)l.u64[r];
  if (rc == 0) *rbuf = out;
  else free(out);
  free(mine);
  layout_free(&l);
  return rc;
}

static int mpi_barrier(hvd_comm *c) {
  MPI_Request req;
  HVD__CHECK(begin(c));
  int mrc = MPI_Ibarrier(hvd__mpi.comm, &req);
  return finish(c, mrc, &req, mrc == MPI_SUCCESS, "MPI_Ibarrier");
}

const hvd_coll_ops hvd__mpi_coll_ops = {
    "mpi",         mpi_allreduce, mpi_reducescatter, mpi_broadcast,
    mpi_allgather, mpi_alltoall,  mpi_barrier,
};
