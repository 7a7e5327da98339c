/*
 * test_hybrid.c -- shared memory within a host and TCP between hosts
 * (transport/hybrid.c), in one process: each rank is a thread with a TCP
 * connection to every other (loopback) and, on a host with shared
 * memory, its own mapping of that host's memfd segment.  The rings are
 * small (16 KiB), so every message is many pieces and ring steps that
 * cross hosts send one way while they receive the other way for many
 * rounds: the place a deadlock would show.  TCP's buffers are megabytes,
 * so a TCP send rarely waits; to make sure the pieces are what prevents a
 * deadlock, one test joins the hosts with a second shared-memory segment
 * of small rings in TCP's place, where every send waits.  Checked: every
 * algorithm
 * against sums computed here, the same bits on every rank, alltoall with
 * uneven counts, the hierarchical allgather over hosts whose ranks are
 * consecutive or interleaved, a host without shared memory among hosts
 * with it, and a
 * rank that gives up named by its job rank on the other host and on its
 * own (through shared memory, which numbers ranks its own way).
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
#include "transport/hybrid.h"
#include "transport/shm_seg.h"

#define MAX_RANKS 6
#define CAP (16u << 10)
#define COUNT (1u << 20) /* floats: 4 MiB, hundreds of pieces */
#define TIMEOUT_MS 10000

typedef struct {
  int n;                   /* ranks */
  int host[MAX_RANKS];     /* rank -> host */
  int shm_host[MAX_RANKS]; /* host -> has shared memory */
  hvd_secret key;
  hvd_peer_addr peers[MAX_RANKS];
  int listen_fd[MAX_RANKS];
  int seg_fd[MAX_RANKS]; /* per host */
  int wide_fd;           /* -1, or a segment of every rank standing in for TCP */
  hvd_comm comm[MAX_RANKS];
  thread_ranks t; /* the ranks' last results */
} job;

/* The host's ranks in rank order; returns how many, and r's index in *me. */
static int host_members(const job *j, int h, int r, int *members, int *me) {
  int n = 0;
  for (int q = 0; q < j->n; q++)
    if (j->host[q] == h) {
      if (q == r) *me = n;
      members[n++] = q;
    }
  return n;
}

/* A fresh segment of `size` ranks in a memfd. */
static int new_segment(int size) {
  int fd = memfd_create("hvd-test-hybrid", 0);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)seg_bytes((size_t)size, CAP)), 0);
  seg_hdr *seg = mmap(NULL, seg_bytes((size_t)size, CAP), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      0);
  assert_true(seg != MAP_FAILED);
  hvd__shm_seg_init(seg, size, CAP);
  munmap(seg, seg_bytes((size_t)size, CAP));
  return fd;
}

/* Rank `me`'s transport over the segment in fd. */
static hvd_transport *map_segment(int fd, int size, int me, const int *names) {
  hvd_transport *t = NULL;
  seg_hdr *seg = mmap(NULL, seg_bytes((size_t)size, CAP), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      0);
  assert_true(seg != MAP_FAILED);
  atomic_store(&seg_ranks(seg)[me].pid, (int32_t)getpid());
  assert_int_equal(hvd__shm_transport_new(seg, size, CAP, me, TIMEOUT_MS, names, &t), 0);
  return t;
}

static int connect_rank(int r, void *arg) {
  job *j = arg;
  hvd_tcp_config cfg = {.rank = r,
                        .size = j->n,
                        .key = j->key,
                        .listen_fd = j->listen_fd[r],
                        .peers = j->peers,
                        .connect_deadline = hvd__deadline_in(5000),
                        .timeout_ms = TIMEOUT_MS};
  hvd_transport *tcp = NULL, *shm = NULL, *x = NULL;
  int members[MAX_RANKS], me = 0, h = j->host[r];
  int n = host_members(j, h, r, members, &me);
  int rc = j->wide_fd < 0 ? hvd__tcp_create(&cfg, &tcp) : 0;
  if (j->wide_fd >= 0) {
    hvd__net_close(&j->listen_fd[r]);
    tcp = map_segment(j->wide_fd, j->n, r, NULL);
  }
  if (rc == 0 && j->shm_host[h] && n > 1) {
    shm = map_segment(j->seg_fd[h], n, me, members);
  }
  if (rc == 0) rc = hvd__hybrid_new(tcp, shm, members, &x);
  if (rc == 0) rc = hvd__comm_init(&j->comm[r], r, j->n, x);
  return rc;
}

/* hosts[r]: rank r's host; shm: which hosts have shared memory (bits);
 * wide: join the hosts with shared memory of small rings, not TCP. */
static void job_start(job *j, int n, const int *hosts, unsigned shm, int wide) {
  memset(j, 0, sizeof *j);
  j->n = n;
  assert_int_equal(hvd__secret_generate(&j->key), 0);
  for (int r = 0; r < n; r++) j->host[r] = hosts[r];
  for (int h = 0; h < MAX_RANKS; h++) {
    int members[MAX_RANKS], me, size = host_members(j, h, -1, members, &me);
    j->shm_host[h] = (shm >> h) & 1;
    j->seg_fd[h] = -1;
    if (j->shm_host[h] && size >= 2) j->seg_fd[h] = new_segment(size);
  }
  j->wide_fd = wide ? new_segment(n) : -1;
  for (int r = 0; r < n; r++) {
    assert_int_equal(hvd__net_listen("127.0.0.1", 0, &j->listen_fd[r], &j->peers[r].port), 0);
    snprintf(j->peers[r].addr, sizeof j->peers[r].addr, "127.0.0.1");
  }
  ranks_run(&j->t, n, -1, connect_rank, j);
  ranks_assert_ok(&j->t, n);
  for (int h = 0; h < MAX_RANKS; h++)
    if (j->seg_fd[h] >= 0) close(j->seg_fd[h]);
  if (j->wide_fd >= 0) close(j->wide_fd);
}

static void job_end(job *j) {
  for (int r = 0; r < j->n; r++) hvd__comm_destroy(&j->comm[r]);
}

static void run_ranks(job *j, ranks_comm_fn *fn, void *arg) {
  ranks_run_comms(&j->t, j->comm, j->n, -1, fn, arg);
}

static void assert_all_ok(const job *j) { ranks_assert_ok(&j->t, j->n); }

/* ---- the collectives ---- */

/* Rank r's element i: integers, so float sums are exact in any order. */
static float value(int r, size_t i) { return (float)((int)(i % 1000) * (r + 1) - 7 * r); }

typedef struct {
  float *out[MAX_RANKS];
} results;

static int allreduce_big(hvd_comm *c, int r, void *arg) {
  float *v = ((results *)arg)->out[r];
  for (size_t i = 0; i < COUNT; i++) v[i] = value(r, i);
  return hvd__allreduce(c, v, v, COUNT, HVD_FLOAT32, HVD_SUM);
}

static void check_allreduce(job *j, hvd_ar_algo algo) {
  results res;
  for (int r = 0; r < j->n; r++) {
    res.out[r] = malloc(COUNT * sizeof(float));
    j->comm[r].allreduce_algo = (int)algo;
  }
  run_ranks(j, allreduce_big, &res);
  assert_all_ok(j);
  for (size_t i = 0; i < COUNT; i++) {
    float want = 0;
    for (int r = 0; r < j->n; r++) want += value(r, i);
    if (res.out[0][i] != want)
      fail_msg("%s: element %zu is %g, not %g", hvd__allreduce_algo_name(algo), i, res.out[0][i],
               want);
  }
  for (int r = 1; r < j->n; r++) assert_memory_equal(res.out[r], res.out[0], COUNT * sizeof(float));
  for (int r = 0; r < j->n; r++) free(res.out[r]);
}

/* Rank r sends (r + 1) * (q + 1) * 5000 bytes to rank q: uneven, and some
 * blocks many pieces long. */
static size_t block(int from, int to) { return (size_t)(from + 1) * (size_t)(to + 1) * 5000; }

static int alltoall_uneven(hvd_comm *c, int r, void *arg) {
  (void)arg;
  size_t scounts[MAX_RANKS], rcounts[MAX_RANKS], total = 0;
  for (int q = 0; q < c->size; q++) total += scounts[q] = block(r, q);
  unsigned char *s = malloc(total), *got = NULL;
  for (size_t i = 0, at = 0; (int)i < c->size; at += scounts[i++])
    memset(s + at, (int)(r * 16 + (int)i), scounts[i]);
  int rc = hvd__alltoall(c, s, scounts, 1, (void **)&got, rcounts);
  for (int q = 0, at = 0; rc == 0 && q < c->size; at += (int)rcounts[q++]) {
    if (rcounts[q] != block(q, r)) rc = hvd__err(HVD_E_INVALID, "count from %d", q);
    for (size_t i = 0; rc == 0 && i < rcounts[q]; i++)
      if (got[at + (int)i] != (unsigned char)(q * 16 + r))
        rc = hvd__err(HVD_E_INVALID, "byte %zu from rank %d", i, q);
  }
  free(s);
  free(got);
  return rc;
}

static int broadcast_big(hvd_comm *c, int r, void *arg) {
  (void)arg;
  unsigned char *b = malloc(1 << 20);
  for (int i = 0; i < (1 << 20); i++) b[i] = r == 2 ? (unsigned char)(i * 7) : 0;
  int rc = hvd__broadcast(c, b, 1 << 20, 2);
  for (int i = 0; rc == 0 && i < (1 << 20); i++)
    if (b[i] != (unsigned char)(i * 7)) rc = hvd__err(HVD_E_INVALID, "byte %d", i);
  free(b);
  return rc;
}

static void check_all(const int *hosts, int n, unsigned shm, int wide) {
  job j;
  job_start(&j, n, hosts, shm, wide);
  const hvd_ar_algo algos[] = {HVD_AR_RING, HVD_AR_RECURSIVE_DOUBLING, HVD_AR_RABENSEIFNER};
  for (size_t a = 0; a < HVD__ARRAY_LEN(algos); a++) check_allreduce(&j, algos[a]);
  run_ranks(&j, alltoall_uneven, NULL);
  assert_all_ok(&j);
  run_ranks(&j, broadcast_big, NULL);
  assert_all_ok(&j);
  assert_string_equal(j.comm[0].xport->ops->name, "shm+tcp");
  job_end(&j);
}

static void test_pieces_never_deadlock(void **state) {
  (void)state;
  check_all((int[]){0, 0, 1, 1}, 4, 0x3, 1);
  check_all((int[]){0, 1, 2, 0, 0, 1}, 6, 0x7, 1);
}

static void test_two_hosts_of_two(void **state) {
  (void)state;
  check_all((int[]){0, 0, 1, 1}, 4, 0x3, 0);
}

static void test_hosts_interleaved_and_uneven(void **state) {
  (void)state;
  /* host 0: ranks 0, 3, 4; host 1: ranks 1, 5; host 2: rank 2 alone */
  check_all((int[]){0, 1, 2, 0, 0, 1}, 6, 0x7, 0);
}

static void test_a_host_without_shared_memory(void **state) {
  (void)state;
  check_all((int[]){0, 0, 1, 1, 2, 2}, 6, 0x5, 0); /* host 1 over TCP among itself */
}

/* ---- the hierarchical allgather ---- */

/* Rank r's place among hosts[] (hosts numbered 0..C-1, their ranks in
 * rank order), as the launcher would give it. */
static hvd_place place_of(const job *j, int r) {
  int members[MAX_RANKS], me = 0, hosts = 0;
  int L = host_members(j, j->host[r], r, members, &me);
  for (int q = 0; q < j->n; q++)
    if (j->host[q] + 1 > hosts) hosts = j->host[q] + 1;
  return (hvd_place){me, L, j->host[r], hosts};
}

/* Rank r's block: 0 elements for rank 1, else (r + 1) * 3000 doubles
 * (several pieces of the 16 KiB rings). */
static size_t gather_len(int r) { return r == 1 ? 0 : (size_t)(r + 1) * 3000; }

static int gather_in_rank_order(hvd_comm *c, int r, void *arg) {
  const job *j = arg;
  c->place = place_of(j, r);
  c->hier_allgather = 1;
  int rc = hvd__hier_setup(c);
  if (rc == 0 && !c->local) rc = hvd__err(HVD_E_INVALID, "no hierarchy was built");
  size_t n = gather_len(r), counts[MAX_RANKS];
  double *mine = malloc((n ? n : 1) * sizeof *mine), *all = NULL;
  for (size_t i = 0; i < n; i++) mine[i] = r * 1e6 + (double)i;
  if (rc == 0) rc = hvd__allgather_tensor(c, mine, n, sizeof *mine, (void **)&all, counts);
  for (int q = 0, at = 0; rc == 0 && q < c->size; q++) {
    if (counts[q] != gather_len(q)) rc = hvd__err(HVD_E_INVALID, "count of rank %d", q);
    for (size_t i = 0; rc == 0 && i < gather_len(q); i++, at++)
      if (all[at] != q * 1e6 + (double)i)
        rc = hvd__err(HVD_E_INVALID, "rank %d's element %zu is %g", q, i, all[at]);
  }
  free(mine);
  free(all);
  return rc;
}

/* Within hosts, across, then within again, put in rank order: hosts whose
 * ranks are consecutive (nothing to reorder) and interleaved ones. */
static void test_hierarchical_allgather(void **state) {
  (void)state;
  const int layouts[][MAX_RANKS] = {{0, 0, 1, 1}, {0, 1, 0, 1}, {0, 1, 2, 2, 1, 0}};
  const int sizes[] = {4, 4, 6};
  for (size_t k = 0; k < HVD__ARRAY_LEN(sizes); k++) {
    job j;
    job_start(&j, sizes[k], layouts[k], 0x7, 0);
    run_ranks(&j, gather_in_rank_order, &j);
    assert_all_ok(&j);
    job_end(&j);
  }
}

/* ---- a rank that gives up ---- */

/* Rank 3 gives up before any connection is made (they are made on first
 * use): the ranks that first connect to a rank already aborting read its
 * ABORT from the links (tcp_links.h), not a hang-up that would name it. */
static int give_up_or_reduce(hvd_comm *c, int r, void *arg) {
  (void)arg;
  if (r == 3) {
    c->xport->ops->abort(c->xport, -1, "rank 3's test gives up");
    return 0;
  }
  float *v = calloc(COUNT, sizeof(float));
  int rc = hvd__allreduce(c, v, v, COUNT, HVD_FLOAT32, HVD_SUM);
  free(v);
  return rc;
}

static void test_lost_rank_is_named_by_its_job_rank(void **state) {
  (void)state;
  job j;
  job_start(&j, 4, (int[]){0, 0, 1, 1}, 0x3, 0);
  for (int r = 0; r < j.n; r++) j.comm[r].allreduce_algo = HVD_AR_RING;
  run_ranks(&j, give_up_or_reduce, NULL);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(j.t.rc[r], HVD_E_PEER_LOST);
    if (!strstr(j.t.err[r], "rank 3"))
      fail_msg("rank %d's error does not name rank 3: %s", r, j.t.err[r]);
  }
  /* rank 2 shares memory with rank 3, where rank 3 is number 1 */
  if (!strstr(j.t.err[2], "rank 3 aborted: rank 3's test gives up"))
    fail_msg("rank 2: %s", j.t.err[2]);
  job_end(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_hosts_of_two),
      cmocka_unit_test(test_hosts_interleaved_and_uneven),
      cmocka_unit_test(test_a_host_without_shared_memory),
      cmocka_unit_test(test_pieces_never_deadlock),
      cmocka_unit_test(test_hierarchical_allgather),
      cmocka_unit_test(test_lost_rank_is_named_by_its_job_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
