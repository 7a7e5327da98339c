/*
 * test_collectives.c -- every collective, every dtype x op, against
 * references this program computes on its own.
 *
 * Run through hvdrun at several job sizes (tests.cmake).  The references
 * (reference.h) are folds of every rank's input in plain scalar code, on
 * inputs whose exact result does not depend on the order of reduction, so
 * the comparison is bitwise.  Bitwise agreement across ranks on inputs
 * where order does matter is checked separately.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, failures, checks;

#include "reference.h"

static const size_t counts[] = {0, 1, 2, 3, 7, 8, 13, 64, 1000, 4099};

/* ---- allreduce ---- */

static void allreduce_case(hvd_dtype t, hvd_op op, size_t count, int in_place, uint64_t seed) {
  size_t es = hvd_dtype_size(t);
  char *in = malloc(count * es + 1), *out = malloc(count * es + 1);
  fill(t, op, seed, rank, in, count);
  memset(out, 0xA5, count * es + 1);
  char name[64];
  snprintf(name, sizeof name, "ar.%s.%s.%zu.%d", hvd_dtype_name(t), hvd_op_name(op), count,
           in_place);
  if (in_place) {
    CALL(hvd_allreduce(in, in, count, t, op, name));
    compare("allreduce in place", t, op, seed, in, 0, count);
  } else {
    char *copy = malloc(count * es + 1);
    memcpy(copy, in, count * es);
    CALL(hvd_allreduce(in, out, count, t, op, name));
    compare("allreduce", t, op, seed, out, 0, count);
    CHECK(memcmp(copy, in, count * es) == 0, "allreduce modified sendbuf");
    CHECK((unsigned char)out[count * es] == 0xA5, "allreduce wrote past recvbuf");
    free(copy);
  }
  free(in);
  free(out);
}

static void test_allreduce(void) {
  uint64_t seed = 1;
  for (size_t a = 0; a < LEN(all_dtypes); a++)
    for (size_t b = 0; b < LEN(all_ops); b++) {
      if (all_dtypes[a] == HVD_BOOL && all_ops[b] == HVD_AVERAGE) continue;
      for (size_t c = 0; c < LEN(counts); c++)
        for (int ip = 0; ip < 2; ip++)
          allreduce_case(all_dtypes[a], all_ops[b], counts[c], ip, seed++);
    }
  /* Larger than several chunks and not divisible by the job size. */
  allreduce_case(HVD_FLOAT32, HVD_SUM, 300007, 0, seed++);
  allreduce_case(HVD_FLOAT16, HVD_AVERAGE, 300007, 1, seed++);
  allreduce_case(HVD_INT64, HVD_MAX, 200003, 1, seed++);
  allreduce_case(HVD_UINT8, HVD_PRODUCT, 1000003, 0, seed++);
}

/* Order-dependent float sums: all ranks must still agree bit for bit. */
static void test_bitwise_identical(void) {
  static const hvd_dtype types[] = {HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64};
  size_t count = 100003;
  for (size_t a = 0; a < LEN(types); a++) {
    hvd_dtype t = types[a];
    size_t es = hvd_dtype_size(t);
    char *buf = malloc(count * es);
    for (size_t i = 0; i < count; i++) {
      num v = {0, (double)(rnd(99, rank, i) % 2000001) / 1000000.0 - 1.0};
      store(t, v, buf + i * es);
    }
    CALL(hvd_allreduce(buf, buf, count, t, HVD_AVERAGE, "bitwise"));
    uint64_t h = fnv(buf, count * es), *all = NULL;
    CALL(hvd_allgather(&h, 1, HVD_INT64, (void **)&all, NULL, "hashes"));
    for (int q = 0; q < size; q++)
      CHECK(all[q] == h, "%s average differs between rank %d and rank %d", hvd_dtype_name(t),
            rank, q);
    free(all);
    free(buf);
  }
}

/* ---- broadcast ---- */

static void test_broadcast(void) {
  static const hvd_dtype types[] = {HVD_UINT8, HVD_INT32, HVD_FLOAT16, HVD_FLOAT64, HVD_BOOL};
  static const size_t bc_counts[] = {0, 1, 13, 1000, 300001};
  uint64_t seed = 5000;
  for (int root = 0; root < size; root++)
    for (size_t a = 0; a < LEN(types); a++)
      for (size_t c = 0; c < LEN(bc_counts); c++, seed++) {
        hvd_dtype t = types[a];
        size_t n = bc_counts[c], es = hvd_dtype_size(t);
        if (n > 1000 && root != size - 1) continue; /* big ones from one root suffice */
        char *buf = malloc(n * es + 1), *want = malloc(n * es + 1);
        fill(t, HVD_SUM, seed, root, want, n);
        if (rank == root) memcpy(buf, want, n * es);
        else memset(buf, 0x5A, n * es);
        CALL(hvd_broadcast(buf, n, t, root, "bcast"));
        CHECK(memcmp(buf, want, n * es) == 0, "broadcast %s count %zu from root %d differs",
              hvd_dtype_name(t), n, root);
        free(buf);
        free(want);
      }
}

/* ---- allgather ---- */

static size_t gather_count(int who, size_t base) { return (size_t)(who * 7 + 3) % 11 + base; }

static void allgather_case(hvd_dtype t, size_t base, uint64_t seed) {
  size_t es = hvd_dtype_size(t), mine = gather_count(rank, base);
  char *in = malloc(mine * es + 1);
  fill(t, HVD_SUM, seed, rank, in, mine);
  void *out = NULL;
  size_t *rc = calloc((size_t)size, sizeof *rc);
  CALL(hvd_allgather(in, mine, t, &out, rc, "gather"));
  size_t off = 0;
  for (int q = 0; q < size; q++) {
    size_t n = gather_count(q, base);
    CHECK(rc[q] == n, "allgather: rank %d's count is %zu, expected %zu", q, rc[q], n);
    char *want = malloc(n * es + 1);
    fill(t, HVD_SUM, seed, q, want, n);
    CHECK(n == 0 || memcmp((char *)out + off * es, want, n * es) == 0,
          "allgather %s base %zu: rank %d's block differs", hvd_dtype_name(t), base, q);
    off += n;
    free(want);
  }
  free(out);
  free(rc);
  free(in);
}

static void test_allgather(void) {
  static const size_t bases[] = {0, 1, 100, 100000};
  uint64_t seed = 9000;
  for (size_t a = 0; a < LEN(all_dtypes); a++)
    for (size_t b = 0; b < LEN(bases); b++)
      if (bases[b] < 100000 || all_dtypes[a] == HVD_FLOAT32)
        allgather_case(all_dtypes[a], bases[b], seed++);
  /* Nobody sends anything: the result is empty, not an error. */
  void *out = (void *)1;
  CALL(hvd_allgather(NULL, 0, HVD_FLOAT32, &out, NULL, "empty"));
  CHECK(out == NULL, "allgather of nothing returned a buffer");
}

/* ---- alltoall ---- */

static size_t a2a_count(int from, int to, size_t base) {
  return (size_t)(from + 2 * to) % 5 + base;
}

static void alltoall_case(hvd_dtype t, size_t base, uint64_t seed) {
  size_t es = hvd_dtype_size(t), total = 0;
  size_t *sc = calloc((size_t)size, sizeof *sc), *rc = calloc((size_t)size, sizeof *rc);
  for (int d = 0; d < size; d++) total += sc[d] = a2a_count(rank, d, base);
  char *in = malloc(total * es + 1), *p = in;
  for (int d = 0; d < size; d++, p += sc[d - 1] * es)
    fill(t, HVD_SUM, seed, rank * size + d, p, sc[d]);
  void *out = NULL;
  CALL(hvd_alltoall(in, sc, t, &out, rc, "a2a"));
  size_t off = 0;
  for (int q = 0; q < size; q++) {
    size_t n = a2a_count(q, rank, base);
    CHECK(rc[q] == n, "alltoall: from rank %d got count %zu, expected %zu", q, rc[q], n);
    char *want = malloc(n * es + 1);
    fill(t, HVD_SUM, seed, q * size + rank, want, n);
    CHECK(n == 0 || memcmp((char *)out + off * es, want, n * es) == 0,
          "alltoall %s base %zu: block from rank %d differs", hvd_dtype_name(t), base, q);
    off += n;
    free(want);
  }
  free(out);
  free(in);
  free(sc);
  free(rc);
}

static void test_alltoall(void) {
  static const size_t bases[] = {0, 3, 70000};
  uint64_t seed = 12000;
  for (size_t a = 0; a < LEN(all_dtypes); a++)
    for (size_t b = 0; b < LEN(bases); b++)
      if (bases[b] < 70000 || all_dtypes[a] == HVD_INT16)
        alltoall_case(all_dtypes[a], bases[b], seed++);
}

/* ---- reducescatter ---- */

static void reducescatter_case(hvd_dtype t, hvd_op op, size_t count, uint64_t seed) {
  size_t es = hvd_dtype_size(t);
  size_t own = hvd_reducescatter_count(count, rank), first = 0;
  for (int q = 0; q < rank; q++) first += hvd_reducescatter_count(count, q);
  size_t want_own = count / (size_t)size + ((size_t)rank < count % (size_t)size);
  CHECK(own == want_own, "reducescatter_count(%zu, %d) = %zu, expected %zu", count, rank, own,
        want_own);
  char *in = malloc(count * es + 1), *out = malloc(own * es + 1);
  fill(t, op, seed, rank, in, count);
  CALL(hvd_reducescatter(in, out, count, t, op, "rs"));
  compare("reducescatter", t, op, seed, out, first, own);
  free(in);
  free(out);
}

static void test_reducescatter(void) {
  static const hvd_dtype types[] = {HVD_FLOAT32, HVD_INT32, HVD_FLOAT16, HVD_BFLOAT16,
                                    HVD_UINT8, HVD_FLOAT64};
  static const hvd_op ops[] = {HVD_SUM, HVD_AVERAGE, HVD_MIN, HVD_MAX};
  size_t rs_counts[] = {0, 1, (size_t)size - 1, (size_t)size + 1, 13, 1000, 300001};
  uint64_t seed = 15000;
  for (size_t a = 0; a < LEN(types); a++)
    for (size_t b = 0; b < LEN(ops); b++)
      for (size_t c = 0; c < LEN(rs_counts); c++)
        if (rs_counts[c] < 300001 || (a == 0 && b == 0))
          reducescatter_case(types[a], ops[b], rs_counts[c], seed++);
}

/* ---- barrier ---- */

static void test_barrier(void) {
  for (int i = 0; i < 20; i++) CALL(hvd_barrier());
  /* No rank may leave before the last one arrived (a lower bound only). */
  int late = size - 1;
  CALL(hvd_barrier());
  double t0 = now();
  if (rank == late) sleep_ms(300);
  CALL(hvd_barrier());
  double waited = now() - t0;
  CHECK(waited >= 0.25, "barrier returned after %.3f s, before rank %d arrived", waited, late);
}

/* ---- identity ---- */

/* The first of a launcher's variables that is set: hvdrun's, Open MPI's,
 * SLURM's (any may be NULL); NULL if none. */
static const char *said(const char *hvdrun, const char *ompi, const char *slurm) {
  const char *names[3] = {hvdrun, ompi, slurm};
  for (int i = 0; i < 3; i++)
    if (names[i] && getenv(names[i])) return getenv(names[i]);
  return NULL;
}

static void test_identity(void) {
  CHECK(hvd_is_initialized() == 1, "hvd_is_initialized() after hvd_init()");
  const char *r = said("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID");
  const char *s = said("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS");
  if (r) CHECK(rank == atoi(r), "hvd_rank() %d but the launcher said %s", rank, r);
  if (s) CHECK(size == atoi(s), "hvd_size() %d but the launcher said %s", size, s);
  if (!s) CHECK(size == 1 && rank == 0, "a process started alone is rank 0 of 1");
  /* Where hvdrun placed this rank; without its word, one host. */
  const char *names[4] = {"HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
                          "HOROVOD_CROSS_SIZE"};
  int got[4] = {hvd_local_rank(), hvd_local_size(), hvd_cross_rank(), hvd_cross_size()};
  int alone[4] = {rank, size, 0, 1};
  for (int i = 0; i < 4 && (getenv("HOROVOD_SIZE") || !s); i++) {
    const char *v = getenv(names[i]);
    int want = v ? atoi(v) : alone[i];
    CHECK(got[i] == want, "%s: hvd says %d, expected %d", names[i], got[i], want);
  }
  /* Where mpirun or srun placed it. */
  const char *lr = said(NULL, "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID");
  const char *ls = said(NULL, "OMPI_COMM_WORLD_LOCAL_SIZE", NULL);
  if (!getenv("HOROVOD_SIZE") && lr) CHECK(got[0] == atoi(lr), "local rank %d, launcher %s", got[0], lr);
  if (!getenv("HOROVOD_SIZE") && ls) CHECK(got[1] == atoi(ls), "local size %d, launcher %s", got[1], ls);
  /* Everyone sees a distinct rank. */
  int *ranks = NULL;
  CALL(hvd_allgather(&rank, 1, HVD_INT32, (void **)&ranks, NULL, "ranks"));
  for (int q = 0; q < size; q++) CHECK(ranks[q] == q, "allgather of ranks: slot %d holds %d", q, ranks[q]);
  free(ranks);
}

int main(void) {
  CALL(hvd_init());
  rank = hvd_rank();
  size = hvd_size();
  test_identity();
  test_allreduce();
  test_bitwise_identical();
  test_broadcast();
  test_allgather();
  test_alltoall();
  test_reducescatter();
  test_barrier();
  CALL(hvd_shutdown());
  CHECK(hvd_is_initialized() == 0, "hvd_is_initialized() after hvd_shutdown()");
  return report_checks("test_collectives", rank, size, checks, failures);
}
