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
 * recursive doubling's bits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll/coll.h"
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
  for (int r = 0; r < n; r++) {
    seg_hdr *seg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(seg != MAP_FAILED);
    if (r == 0) hvd__shm_seg_init(seg, n, CAP);
    atomic_store(&seg_ranks(seg)[r].pid, (int32_t)getpid());
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

/* Runs fn(rank's comm, rank, arg) on a thread per rank (`skip`: a rank
 * that does not take part, -1 for none); rcs[r] gets its result. */
typedef int rank_fn(hvd_comm *c, int rank, void *arg);

typedef struct {
  hvd_comm *c;
  int rank, rc;
  rank_fn *fn;
  void *arg;
  char err[512];
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  a->rc = a->fn(a->c, a->rank, a->arg);
  snprintf(a->err, sizeof a->err, "%s", a->rc ? hvd_last_error() : "");
  return NULL;
}

static void run_ranks(job *j, rank_fn *fn, void *arg, int skip, thread_arg *out) {
  pthread_t th[MAX_RANKS];
  for (int r = 0; r < j->n; r++) {
    out[r] = (thread_arg){&j->comm[r], r, 0, fn, arg, ""};
    if (r != skip) assert_int_equal(pthread_create(&th[r], NULL, thread_main, &out[r]), 0);
  }
  for (int r = 0; r < j->n; r++)
    if (r != skip) pthread_join(th[r], NULL);
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
  thread_arg t[MAX_RANKS];
  size_t total = 0;
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) total += counts[k];
  for (int r = 0; r < n; r++) {
    res.out[r] = calloc(total + 1, sizeof(float));
    res.iout[r] = calloc(total + 1, sizeof(int32_t));
  }
  job_start(&j, n, 10000);
  run_ranks(&j, allreduce_all_sizes, &res, -1, t);
  for (int r = 0; r < n; r++) assert_int_equal(t[r].rc, 0);
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
  thread_arg t[MAX_RANKS];
  job_start(&j, n, 10000);
  run_ranks(&j, allgather_uneven, &g, -1, t);
  for (int r = 0; r < n; r++) {
    assert_int_equal(t[r].rc, 0);
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
    thread_arg t[MAX_RANKS];
    two_runs *runs = calloc(1, sizeof *runs);
    job_start(&j, n, 10000);
    run_ranks(&j, reduce_both_ways, runs, -1, t);
    for (int r = 0; r < n; r++) {
      assert_int_equal(t[r].rc, 0);
      assert_memory_equal(runs->v[0][r], runs->v[1][r], sizeof runs->v[0][r]);
      assert_memory_equal(runs->v[1][r], runs->v[1][0], sizeof runs->v[1][r]);
    }
    job_end(&j);
    free(runs);
  }
}

/* ---- failures ---- */

/* Rank 1 allreduces twice as many elements as the others. */
static int allreduce_uneven(hvd_comm *c, int r, void *arg) {
  (void)arg;
  float v[200] = {0};
  return hvd__allreduce(c, v, v, r == 1 ? 200 : 100, HVD_FLOAT32, HVD_SUM);
}

static void test_mismatch_names_the_rank(void **state) {
  (void)state;
  job j;
  thread_arg t[MAX_RANKS];
  job_start(&j, 3, 10000);
  run_ranks(&j, allreduce_uneven, NULL, -1, t);
  for (int r = 0; r < 3; r++) assert_int_equal(t[r].rc, HVD_E_MISMATCH);
  assert_non_null(strstr(t[0].err, "rank 1 is at collective #1, allreduce of 800 bytes"));
  assert_non_null(strstr(t[1].err, "this rank at #1, allreduce of 800 bytes of float32"));
  job_end(&j);
}

static void test_absent_rank_times_out(void **state) {
  (void)state;
  job j;
  thread_arg t[MAX_RANKS];
  job_start(&j, 2, 300);
  run_ranks(&j, allreduce_uneven, NULL, 1, t);
  assert_int_equal(t[0].rc, HVD_E_TIMEOUT);
  assert_non_null(strstr(t[0].err, "rank 1 did not reach the shared-memory barrier"));
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
      cmocka_unit_test(test_mismatch_names_the_rank),
      cmocka_unit_test(test_absent_rank_times_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
