/*
 * test_shm_coll.c -- the collectives over shared-memory windows
 * (coll/shm_allreduce.c, the allgather's shortcut) and the transport's
 * sync under them, in one process: each rank is a thread with its own
 * mapping of one memfd segment, as each would be a process with its own
 * mapping of the job's segment.  Small windows make every vector many
 * chunks.  Checked: results against sums computed here, the same bits on
 * every rank, allgather blocks larger than a window (the ring takes
 * over), ranks that call different collectives (a mismatch naming the
 * other rank) and a rank that never comes (a timeout naming it).  The
 * transport also carries the other algorithms: Rabenseifner's must give
 * recursive doubling's bits.  With the single-copy probe passed (threads
 * of one process may always read its memory), large vectors are reduced
 * straight from the other ranks' buffers (shm_direct.c): the same bits as
 * through the windows, whatever the ranks' piece layouts, and the windows
 * again when a rank's pieces do not fit its window; a rank that refuses
 * (HOROVOD_SHM_SINGLE_COPY=0) turns it off for all.  Vectors of at most
 * HVD_SYNC_SMALL bytes travel in the sync's record instead of a window:
 * the rank order's bits (float32, float16 rounded once), no window taken,
 * and a mismatch still named.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll/coll.h"
#include "ranks.h"
#include "reduce.h"
#include "transport/shm_seg.h"

#define MAX_RANKS 4
#define CAP (16u << 10) /* rings of 16 KiB: windows of 4 KiB */

typedef struct {
  int n;
  hvd_comm comm[MAX_RANKS];
} job;

static void job_start(job *j, int n, int timeout_ms) {
  size_t bytes = seg_bytes((size_t)n, CAP);
  int fd = memfd_create("hvd-test", 0);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
  j->n = n;
  seg_hdr *segs[MAX_RANKS];
  for (int r = 0; r < n; r++) { /* as in shm_setup.c: every pid is in before any transport */
    segs[r] = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(segs[r] != MAP_FAILED);
    if (r == 0) hvd__shm_seg_init(segs[r], n, CAP);
    atomic_store(&seg_ranks(segs[r])[r].pid, (int32_t)getpid());
  }
  for (int r = 0; r < n; r++) {
    seg_hdr *seg = segs[r];
    hvd_transport *t = NULL;
    assert_int_equal(hvd__shm_transport_new(seg, n, CAP, r, timeout_ms, NULL, &t), 0);
    assert_int_equal(hvd__comm_init(&j->comm[r], r, n, t), 0);
    j->comm[r].allreduce_algo = HVD_AR_SHM;
  }
  close(fd);
}

static void job_end(job *j) {
  for (int r = 0; r < j->n; r++) hvd__comm_destroy(&j->comm[r]);
}

/* ---- allreduce ---- */

static const size_t counts[] = {0, 1, 5, 1023, 1024, 1025, 3000, 40000};
#define MAX_COUNT 40000

/* Rank r's element i: integers, so float sums are exact in any order. */
static float value(int r, size_t i) { return (float)((int)(i % 1000) * (r + 1) - 7 * r); }

typedef struct {
  float *out[MAX_RANKS];
  int32_t *iout[MAX_RANKS];
} results;

static int allreduce_all_sizes(hvd_comm *c, int r, void *arg) {
  results *res = arg;
  size_t at = 0;
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    float *v = res->out[r] + at;
    for (size_t i = 0; i < counts[k]; i++) v[i] = value(r, i);
    HVD__CHECK(hvd__allreduce(c, v, v, counts[k], HVD_FLOAT32, k % 2 ? HVD_SUM : HVD_AVERAGE));
    int32_t *w = res->iout[r] + at;
    for (size_t i = 0; i < counts[k]; i++) w[i] = (int32_t)value(r, i);
    HVD__CHECK(hvd__allreduce(c, w, w, counts[k], HVD_INT32, HVD_MAX));
    at += counts[k];
  }
  return 0;
}

static void check_allreduce(int n) {
  job j;
  results res;
  thread_ranks t;
  size_t total = 0;
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) total += counts[k];
  for (int r = 0; r < n; r++) {
    res.out[r] = calloc(total + 1, sizeof(float));
    res.iout[r] = calloc(total + 1, sizeof(int32_t));
  }
  job_start(&j, n, 10000);
  ranks_run_comms(&t, j.comm, j.n, -1, allreduce_all_sizes, &res);
  ranks_assert_ok(&t, j.n);
  size_t at = 0;
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    for (size_t i = 0; i < counts[k]; i++) {
      float sum = 0;
      int32_t max = INT32_MIN;
      for (int q = 0; q < n; q++) {
        sum += value(q, i);
        if ((int32_t)value(q, i) > max) max = (int32_t)value(q, i);
      }
      float want = k % 2 ? sum : sum / (float)n;
      for (int r = 0; r < n; r++) {
        assert_memory_equal(&res.out[r][at + i], &want, sizeof want);
        assert_int_equal(res.iout[r][at + i], max);
      }
    }
    at += counts[k];
  }
  job_end(&j);
  for (int r = 0; r < n; r++) free(res.out[r]), free(res.iout[r]);
}

static void test_allreduce_2(void **state) {
  (void)state;
  check_allreduce(2);
}

static void test_allreduce_3(void **state) {
  (void)state;
  check_allreduce(3);
}

/* ---- allgather ---- */

/* Rank r gives r * 1500 + 1 bytes: rank 3's does not fit a window. */
static size_t gather_len(int r) { return (size_t)r * 1500 + 1; }

typedef struct {
  unsigned char *got[MAX_RANKS];
  size_t lens[MAX_RANKS][MAX_RANKS];
} gathered;

static int allgather_uneven(hvd_comm *c, int r, void *arg) {
  gathered *g = arg;
  unsigned char *mine = malloc(gather_len(r));
  for (size_t i = 0; i < gather_len(r); i++) mine[i] = (unsigned char)(r * 31 + i);
  void *out = NULL;
  int rc = hvd__allgather(c, mine, gather_len(r), 1, &out, g->lens[r]);
  g->got[r] = out;
  free(mine);
  return rc;
}

static void check_allgather(int n) {
  job j;
  gathered g;
  thread_ranks t;
  job_start(&j, n, 10000);
  ranks_run_comms(&t, j.comm, j.n, -1, allgather_uneven, &g);
  ranks_assert_ok(&t, j.n);
  for (int r = 0; r < n; r++) {
    size_t at = 0;
    for (int q = 0; q < n; q++) {
      assert_int_equal(g.lens[r][q], gather_len(q));
      for (size_t i = 0; i < gather_len(q); i++)
        assert_int_equal(g.got[r][at + i], (unsigned char)(q * 31 + i));
      at += gather_len(q);
    }
    free(g.got[r]);
  }
  job_end(&j);
}

static void test_allgather_fits(void **state) {
  (void)state;
  check_allgather(3); /* at most 3001 + 8 bytes: every block fits */
}

static void test_allgather_too_big(void **state) {
  (void)state;
  check_allgather(4); /* rank 3's 4501 bytes go round the ring */
}

/* ---- Rabenseifner = recursive doubling, bit for bit ---- */

#define RANDOM_COUNT 1001

typedef struct {
  float v[2][MAX_RANKS][RANDOM_COUNT]; /* [algorithm][rank] */
} two_runs;

/* Floats whose sum depends on the order of addition. */
static float random_value(int r, size_t i) {
  uint32_t x = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
  x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
  return (float)(int32_t)x / 3.0e5f;
}

static int reduce_both_ways(hvd_comm *c, int r, void *arg) {
  two_runs *runs = arg;
  static const hvd_ar_algo algos[2] = {HVD_AR_RECURSIVE_DOUBLING, HVD_AR_RABENSEIFNER};
  for (int a = 0; a < 2; a++) {
    float *v = runs->v[a][r];
    for (size_t i = 0; i < RANDOM_COUNT; i++) v[i] = random_value(r, i);
    c->allreduce_algo = algos[a];
    HVD__CHECK(hvd__allreduce(c, v, v, RANDOM_COUNT, HVD_FLOAT32, HVD_AVERAGE));
  }
  return 0;
}

static void test_rabenseifner_is_recursive_doubling(void **state) {
  (void)state;
  for (int n = 2; n <= MAX_RANKS; n++) {
    job j;
    thread_ranks t;
    two_runs *runs = calloc(1, sizeof *runs);
    job_start(&j, n, 10000);
    ranks_run_comms(&t, j.comm, j.n, -1, reduce_both_ways, runs);
    ranks_assert_ok(&t, j.n);
    for (int r = 0; r < n; r++) {
      assert_memory_equal(runs->v[0][r], runs->v[1][r], sizeof runs->v[0][r]);
      assert_memory_equal(runs->v[1][r], runs->v[1][0], sizeof runs->v[1][r]);
    }
    job_end(&j);
    free(runs);
  }
}

/* ---- single copy: straight from the other ranks' buffers ---- */

typedef struct {
  int wanted[MAX_RANKS];
  int on[MAX_RANKS];
  char why[MAX_RANKS][512];
} probe_run;

static int probe(hvd_comm *c, int r, void *arg) {
  probe_run *p = arg;
  /* rank 0's minimum applies: theirs are ignored */
  p->on[r] = hvd__shm_single_copy_probe(c->xport, p->wanted[r], r ? 1 : 256 << 10, p->why[r],
                                        sizeof p->why[r]);
  return p->on[r] < 0 ? p->on[r] : 0;
}

/* job_start, then every rank probes; refuse: the rank that says no (-1:
 * none).  Returns whether single copy came on. */
static int job_start_probed(job *j, int n, int refuse) {
  probe_run p;
  thread_ranks t;
  job_start(j, n, 10000);
  for (int r = 0; r < n; r++) p.wanted[r] = r != refuse;
  ranks_run_comms(&t, j->comm, j->n, -1, probe, &p);
  ranks_assert_ok(&t, j->n);
  for (int r = 0; r < n; r++) {
    assert_int_equal(p.on[r], p.on[0]);
    assert_int_equal(j->comm[r].xport->ops->caps.peer_read != NULL, p.on[r]);
    if (p.on[r]) assert_int_equal(j->comm[r].xport->peer_read_min, 256 << 10);
    if (!p.on[r]) assert_non_null(strstr(p.why[r], "HOROVOD_SHM_SINGLE_COPY=0"));
  }
  return p.on[0];
}

#define DIRECT_COUNT 300001 /* float32: 1.2 MB, uneven slices */

typedef struct {
  hvd_dtype dtype;
  hvd_op op;
  size_t count;
  int many_pieces; /* rank 1 cuts its vector into more pieces than a window holds */
  unsigned char *v[MAX_RANKS];
} direct_case;

/* Rank r's vector as pieces of its own (seg 0 holds them all; the shm
 * allreduce reduces the concatenation): rank 0 one piece, the others
 * pieces of sizes that differ from rank to rank. */
static int reduce_in_pieces(hvd_comm *c, int r, void *arg) {
  direct_case *dc = arg;
  size_t es = hvd_dtype_size(dc->dtype), total = dc->count * es;
  hvd_piece *p = calloc(1000, sizeof *p);
  hvd_pieces segs[MAX_RANKS] = {{p, 0}};
  size_t step = dc->many_pieces && r == 1 ? total / 400 + 1 : total / (size_t)(3 + 5 * r) + 7;
  for (size_t at = 0; at < total; at += step)
    p[segs[0].n++] = (hvd_piece){(char *)dc->v[r] + at, total - at < step ? total - at : step};
  for (int s = 1; s < c->size; s++) segs[s] = (hvd_pieces){p, 0};
  int rc = hvd__allreduce_pieces(c, HVD_AR_SHM, segs, dc->dtype, dc->op);
  free(p);
  return rc;
}

static void fill_random(direct_case *dc, int n) {
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < dc->count; i++) {
      float x = random_value(r, i);
      unsigned char *at = dc->v[r] + i * hvd_dtype_size(dc->dtype);
      if (dc->dtype == HVD_FLOAT32) memcpy(at, &x, 4);
      else if (dc->dtype == HVD_FLOAT64) {
        double d = (double)x * 1.000001;
        memcpy(at, &d, 8);
      } else {
        uint16_t h = dc->dtype == HVD_FLOAT16 ? hvd__float_to_half(x / 100.0f)
                                              : hvd__float_to_bf16(x);
        memcpy(at, &h, 2);
      }
    }
}

/* The bytes of every rank after a run over a job probed with `single`. */
static void run_case(direct_case *dc, int n, int single, unsigned char **out) {
  job j;
  thread_ranks t;
  size_t bytes = dc->count * hvd_dtype_size(dc->dtype);
  if (single) assert_int_equal(job_start_probed(&j, n, -1), 1);
  else job_start(&j, n, 10000);
  fill_random(dc, n);
  ranks_run_comms(&t, j.comm, j.n, -1, reduce_in_pieces, dc);
  ranks_assert_ok(&t, j.n);
  for (int r = 0; r < n; r++) {
    /* the direct path ran (it alone reads into peer_buf), unless rank
     * 1's pieces overflowed its window */
    if (single && !dc->many_pieces) assert_non_null(j.comm[r].peer_buf);
    out[r] = malloc(bytes);
    memcpy(out[r], dc->v[r], bytes);
  }
  job_end(&j);
}

/* -1 if a and b hold the same bytes, else the first that differs (cmocka
 * would print every difference of a megabyte). */
static long first_difference(const unsigned char *a, const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

static void direct_equals_windows(int n, hvd_dtype dtype, hvd_op op, size_t count, int many) {
  direct_case dc = {dtype, op, count, many, {0}};
  unsigned char *windows[MAX_RANKS], *direct[MAX_RANKS];
  size_t bytes = count * hvd_dtype_size(dtype);
  for (int r = 0; r < n; r++) dc.v[r] = malloc(bytes);
  run_case(&dc, n, 0, windows);
  run_case(&dc, n, 1, direct);
  for (int r = 0; r < n; r++) {
    long d = first_difference(direct[r], windows[r], bytes);
    if (d >= 0) printf("n %d, %s, rank %d: byte %ld differs\n", n, hvd_dtype_name(dtype), r, d);
    assert_int_equal(d, -1);
    assert_int_equal(first_difference(direct[r], direct[0], bytes), -1);
  }
  for (int r = 0; r < n; r++) {
    free(windows[r]);
    free(direct[r]);
    free(dc.v[r]);
  }
}

static void test_direct_same_bits_as_windows(void **state) {
  (void)state;
  for (int n = 2; n <= MAX_RANKS; n++) {
    direct_equals_windows(n, HVD_FLOAT32, HVD_SUM, DIRECT_COUNT, 0);
    direct_equals_windows(n, HVD_FLOAT32, HVD_AVERAGE, DIRECT_COUNT / 3, 0);
  }
  direct_equals_windows(2, HVD_FLOAT32, HVD_SUM, 3 * DIRECT_COUNT, 0); /* slices over 1 MiB */
  direct_equals_windows(3, HVD_FLOAT16, HVD_SUM, DIRECT_COUNT, 0);
  direct_equals_windows(4, HVD_BFLOAT16, HVD_AVERAGE, DIRECT_COUNT, 0);
  direct_equals_windows(3, HVD_FLOAT64, HVD_MIN, DIRECT_COUNT / 2, 0);
}

static void test_direct_falls_back_when_pieces_overflow(void **state) {
  (void)state;
  direct_equals_windows(3, HVD_FLOAT32, HVD_SUM, DIRECT_COUNT, 1);
}

static void test_probe_refused_by_one_rank(void **state) {
  (void)state;
  job j;
  assert_int_equal(job_start_probed(&j, 3, 2), 0);
  job_end(&j);
}

/* ---- vectors that travel in the sync itself (HVD_SYNC_SMALL) ---- */

#define SMALL_MAX (HVD_SYNC_SMALL / 2 + 4) /* float16 elements: past the limit */

typedef struct {
  uint16_t h[MAX_RANKS][SMALL_MAX + 1][SMALL_MAX]; /* [rank][count][i] */
  float f[MAX_RANKS][SMALL_MAX + 1][SMALL_MAX];
  unsigned char g[MAX_RANKS][MAX_RANKS * (HVD_SYNC_SMALL + 1)];
  uint64_t windows[MAX_RANKS][2]; /* windows taken by the small and the next collective */
} small_runs;

/* Every count from 1 to past the limit, float32 Sum and float16 Average,
 * values whose sum depends on the order; then an allgather of
 * HVD_SYNC_SMALL-byte blocks, and one a byte larger (through a window). */
static int small_vectors(hvd_comm *c, int r, void *arg) {
  small_runs *s = arg;
  for (int n = 1; n <= SMALL_MAX; n++) {
    float v[SMALL_MAX];
    for (int i = 0; i < n; i++) v[i] = random_value(r, (size_t)(n * 100 + i));
    hvd__float_to_half_n(s->h[r][n], v, (size_t)n);
    memcpy(s->f[r][n], v, sizeof v);
    HVD__CHECK(hvd__allreduce(c, s->f[r][n], s->f[r][n], (size_t)n, HVD_FLOAT32, HVD_SUM));
    HVD__CHECK(hvd__allreduce(c, s->h[r][n], s->h[r][n], (size_t)n, HVD_FLOAT16, HVD_AVERAGE));
  }
  for (int b = 0; b < 2; b++) {
    size_t bytes = HVD_SYNC_SMALL + (size_t)b;
    unsigned char *mine = s->g[r] + (size_t)r * bytes;
    for (size_t i = 0; i < bytes; i++) mine[i] = (unsigned char)(r * 53 + i + b);
    uint64_t before = c->shm_chunks;
    HVD__CHECK(hvd__allgather_equal(c, mine, bytes, s->g[r]));
    s->windows[r][b] = c->shm_chunks - before;
    for (int q = 0; q < c->size; q++)
      for (size_t i = 0; i < bytes; i++)
        if (s->g[r][(size_t)q * bytes + i] != (unsigned char)(q * 53 + i + b))
          return hvd__err(HVD_E_MISMATCH, "allgather of %zu: rank %d's byte %zu", bytes, q, i);
  }
  return 0;
}

/* The reference: rank 0's value, then rank 1's, ... (the shm order),
 * float16 summed in float32 and rounded once. */
static void small_reference(int ranks, int n, float *f, uint16_t *h) {
  for (int i = 0; i < n; i++) {
    float sum = 0, hsum = 0;
    for (int q = 0; q < ranks; q++) {
      float x = random_value(q, (size_t)(n * 100 + i));
      uint16_t xh;
      hvd__float_to_half_n(&xh, &x, 1);
      float back;
      hvd__half_to_float_n(&back, &xh, 1);
      sum = q ? sum + x : x;
      hsum = q ? hsum + back : back;
    }
    f[i] = sum;
    hsum /= (float)ranks;
    hvd__float_to_half_n(&h[i], &hsum, 1);
  }
}

static void test_small_vectors_in_the_sync(void **state) {
  (void)state;
  small_runs *s = calloc(1, sizeof *s);
  for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
    job j;
    thread_ranks t;
    job_start(&j, ranks, 10000);
    ranks_run_comms(&t, j.comm, j.n, -1, small_vectors, s);
    ranks_assert_ok(&t, j.n);
    for (int r = 0; r < ranks; r++) {
      assert_int_equal(s->windows[r][0], 0); /* in the sync: no window */
      assert_int_equal(s->windows[r][1], 1);
    }
    for (int n = 1; n <= SMALL_MAX; n++) {
      float f[SMALL_MAX];
      uint16_t h[SMALL_MAX];
      small_reference(ranks, n, f, h);
      for (int r = 0; r < ranks; r++) {
        assert_memory_equal(s->f[r][n], f, (size_t)n * sizeof f[0]);
        assert_memory_equal(s->h[r][n], h, (size_t)n * sizeof h[0]);
      }
    }
    job_end(&j);
  }
  free(s);
}

/* Rank 1 allreduces twice as many elements as the others: *arg floats
 * (100 when NULL). */
static int allreduce_uneven(hvd_comm *c, int r, void *arg) {
  size_t n = arg ? *(const size_t *)arg : 100;
  float v[200] = {0};
  return hvd__allreduce(c, v, v, r == 1 ? 2 * n : n, HVD_FLOAT32, HVD_SUM);
}

/* Every one of 3 ranks fails with a mismatch when rank 1 allreduces 2n
 * floats and the others n: rank 0 names rank 1 and its collective, rank 1
 * names its own (both given as "allreduce of B bytes"). */
static void mismatch_names_the_rank(size_t n, const char *theirs, const char *ours) {
  job j;
  thread_ranks t;
  job_start(&j, 3, 10000);
  ranks_run_comms(&t, j.comm, j.n, -1, allreduce_uneven, &n);
  for (int r = 0; r < 3; r++) assert_int_equal(t.rc[r], HVD_E_MISMATCH);
  assert_non_null(strstr(t.err[0], theirs));
  assert_non_null(strstr(t.err[1], ours));
  job_end(&j);
}

/* 4 and 8 floats: both fit a sync. */
static void test_small_mismatch_names_the_rank(void **state) {
  (void)state;
  mismatch_names_the_rank(4, "rank 1 is at collective #1, allreduce of 32 bytes",
                          "this rank at #1, allreduce of 32 bytes of float32");
}

/* ---- failures ---- */

static void test_mismatch_names_the_rank(void **state) {
  (void)state;
  mismatch_names_the_rank(100, "rank 1 is at collective #1, allreduce of 800 bytes",
                          "this rank at #1, allreduce of 800 bytes of float32");
}

static void test_absent_rank_times_out(void **state) {
  (void)state;
  job j;
  thread_ranks t;
  job_start(&j, 2, 300);
  ranks_run_comms(&t, j.comm, j.n, 1, allreduce_uneven, NULL);
  assert_int_equal(t.rc[0], HVD_E_TIMEOUT);
  assert_non_null(strstr(t.err[0], "rank 1 did not reach the shared-memory barrier"));
  /* Rank 0 told everyone: rank 1's allreduce, the one rank 0 gave up
   * on, fails at once although rank 0 had arrived. */
  float v[100] = {0};
  assert_int_equal(hvd__allreduce(&j.comm[1], v, v, 100, HVD_FLOAT32, HVD_SUM), HVD_E_PEER_LOST);
  assert_non_null(strstr(hvd_last_error(), "rank 0 gave up on this rank"));
  job_end(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allreduce_2),
      cmocka_unit_test(test_allreduce_3),
      cmocka_unit_test(test_allgather_fits),
      cmocka_unit_test(test_allgather_too_big),
      cmocka_unit_test(test_rabenseifner_is_recursive_doubling),
      cmocka_unit_test(test_direct_same_bits_as_windows),
      cmocka_unit_test(test_direct_falls_back_when_pieces_overflow),
      cmocka_unit_test(test_probe_refused_by_one_rank),
      cmocka_unit_test(test_small_vectors_in_the_sync),
      cmocka_unit_test(test_small_mismatch_names_the_rank),
      cmocka_unit_test(test_mismatch_names_the_rank),
      cmocka_unit_test(test_absent_rank_times_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
