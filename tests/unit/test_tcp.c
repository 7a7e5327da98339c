/*
 * test_tcp.c -- the TCP transport (transport.h), ranks as threads.
 *
 * Each test builds a small job on 127.0.0.1 with one thread per rank,
 * runs a function on every rank at once, and checks what each rank saw
 * from the main thread (ranks.h: cmocka's asserts must not run in other
 * threads, so rank threads only return and record).  Covered: ring
 * exchanges up to 16 MiB (both directions at once, far beyond the socket
 * buffers), strangers on the port before and after the job's connections
 * are made, the connections each pattern makes (one per peer it talks
 * to: ring, recursive doubling, every pair at once from both ends), a
 * send to a rank that has not entered the transport, a peer that
 * disappears before or after first contact, a peer that stops
 * answering, size and order mismatches, ABORT propagation, and watch
 * connections that cannot be made.
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
#include <unistd.h>

#include "common.h"
#include "ranks.h"
#include "transport/tcp_links.h"
#include "transport/transport.h"

#define MAX_RANKS 8
#define BIG (16u << 20)

typedef struct {
  int rank;
  hvd_tcp_config cfg;
  hvd_transport *t;
  /* what the rank saw besides its function's result (in mesh.ranks): the
   * first of two results, and bytes that came out wrong */
  int first_rc;
  char first_err[RANKS_ERR_MAX];
  long bad;
  uint64_t ms;
  int links; /* hvd__tcp_connections after the pattern */
} rank_ctx;

typedef struct {
  int size;
  hvd_secret key;
  hvd_peer_addr peers[MAX_RANKS];
  rank_ctx r[MAX_RANKS];
  thread_ranks ranks; /* each rank's result */
  pthread_barrier_t bar;
  /* parameters of the mismatch test */
  size_t send_len;
  uint32_t send_tag;
  /* of the abort test: the receiving ranks' buffer (0: 4 bytes) */
  size_t recv_len;
} mesh;

static void record_first(rank_ctx *c, int rc) {
  c->first_rc = rc;
  snprintf(c->first_err, sizeof c->first_err, "%s", rc < 0 ? hvd_last_error() : "");
}

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("\"%s\" does not contain \"%s\"", text, part);
}

/* ---- building meshes ---- */

static mesh *mesh_prepare(int size, int timeout_ms, int connect_ms) {
  mesh *m = test_calloc(1, sizeof *m);
  m->size = size;
  assert_int_equal(hvd__secret_generate(&m->key), 0);
  for (int r = 0; r < size; r++) {
    rank_ctx *c = &m->r[r];
    int fd, port;
    assert_int_equal(hvd__net_listen("127.0.0.1", 0, &fd, &port), 0);
    snprintf(m->peers[r].addr, sizeof m->peers[r].addr, "127.0.0.1");
    m->peers[r].port = port;
    c->rank = r;
    c->cfg = (hvd_tcp_config){.rank = r,
                              .size = size,
                              .key = m->key,
                              .listen_fd = fd,
                              .peers = m->peers,
                              .connect_deadline = hvd__deadline_in(connect_ms),
                              .timeout_ms = timeout_ms};
  }
  assert_int_equal(pthread_barrier_init(&m->bar, NULL, (unsigned)size), 0);
  return m;
}

static int create_rank(int rank, void *arg) {
  rank_ctx *c = &((mesh *)arg)->r[rank];
  return hvd__tcp_create(&c->cfg, &c->t);
}

static void start_create(mesh *m, int rank) { ranks_start(&m->ranks, rank, create_rank, m); }

static void join(mesh *m, int rank) { ranks_join(&m->ranks, rank); }

static void assert_created(mesh *m) {
  ranks_assert_ok(&m->ranks, m->size);
  for (int r = 0; r < m->size; r++) assert_non_null(m->r[r].t);
}

static mesh *mesh_build(int size, int timeout_ms) {
  mesh *m = mesh_prepare(size, timeout_ms, 5000);
  for (int r = 0; r < size; r++) start_create(m, r);
  for (int r = 0; r < size; r++) join(m, r);
  assert_created(m);
  return m;
}

static void mesh_free(mesh *m) {
  for (int r = 0; r < m->size; r++)
    if (m->r[r].t) m->r[r].t->ops->destroy(m->r[r].t);
  pthread_barrier_destroy(&m->bar);
  test_free(m);
}

/* Runs fn(rank, m) on every rank at once. */
static void run_ranks(mesh *m, ranks_fn *fn) { ranks_run(&m->ranks, m->size, -1, fn, m); }

static void assert_all_ok(mesh *m) {
  ranks_assert_ok(&m->ranks, m->size);
  for (int r = 0; r < m->size; r++) assert_int_equal(m->r[r].bad, 0);
}

/* ---- data ---- */

/* Data that differs by position, sender and step, made a word at a time
 * (byte loops over 16 MiB are slow under TSan). */
static uint64_t pattern(size_t word, int rank, int step) {
  uint64_t x = (word + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 1000003u +
               (uint64_t)step * 7919u;
  return x ^ (x >> 29);
}

static void fill(uint8_t *p, size_t len, int rank, int step) {
  for (size_t w = 0; w * 8 < len; w++) {
    uint64_t v = pattern(w, rank, step);
    memcpy(p + w * 8, &v, len - w * 8 < 8 ? len - w * 8 : 8);
  }
}

static long count_bad(const uint8_t *p, size_t len, int rank, int step) {
  long bad = 0;
  for (size_t w = 0; w * 8 < len; w++) {
    uint64_t v = pattern(w, rank, step);
    bad += memcmp(p + w * 8, &v, len - w * 8 < 8 ? len - w * 8 : 8) != 0;
  }
  return bad;
}

/* One sendrecv with checked data; rbuf and sbuf hold at least len. */
static int exchange(rank_ctx *c, int to, int from, size_t len, int step, uint8_t *sbuf,
                    uint8_t *rbuf) {
  if (to >= 0) fill(sbuf, len, c->rank, step);
  memset(rbuf, 0xee, len);
  int rc = hvd__sendrecv(c->t, to, sbuf, to >= 0 ? len : 0, from, rbuf, from >= 0 ? len : 0,
                         (uint32_t)step);
  if (rc == 0 && from >= 0) c->bad += count_bad(rbuf, len, from, step);
  return rc;
}

static const size_t ring_sizes[] = {0, 1, 1000, 1 << 20, BIG};

static int ring_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  int n = m->size, rc = 0;
  uint8_t *sbuf = malloc(BIG), *rbuf = malloc(BIG);
  for (size_t i = 0; sbuf && rbuf && rc == 0 && i < HVD__ARRAY_LEN(ring_sizes); i++)
    rc = exchange(c, (rank + 1) % n, (rank + n - 1) % n, ring_sizes[i], (int)i, sbuf, rbuf);
  free(sbuf);
  free(rbuf);
  return sbuf && rbuf ? rc : HVD_E_NOMEM;
}

/* Ranks 0 and 1 swap 16 MiB over one socket (to == from) while rank 2
 * sends to 0 one way, and 0 answers with a send-only / recv-only pair. */
static int pairs_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  uint8_t *sbuf = malloc(BIG), *rbuf = malloc(BIG);
  int rc = HVD_E_NOMEM;
  if (sbuf && rbuf) {
    if (rank == 0) {
      rc = exchange(c, 1, 1, BIG, 20, sbuf, rbuf);
      if (rc == 0) rc = exchange(c, -1, 2, 5000, 21, sbuf, rbuf);
      if (rc == 0) rc = exchange(c, 2, -1, 300, 22, sbuf, rbuf);
    } else if (rank == 1) {
      rc = exchange(c, 0, 0, BIG, 20, sbuf, rbuf);
    } else {
      rc = exchange(c, 0, -1, 5000, 21, sbuf, rbuf);
      if (rc == 0) rc = exchange(c, -1, 0, 300, 22, sbuf, rbuf);
    }
  }
  free(sbuf);
  free(rbuf);
  return rc;
}

/* ---- tests ---- */

static void test_ring(void **state) {
  (void)state;
  mesh *m = mesh_build(3, 5000);
  run_ranks(m, ring_fn);
  assert_all_ok(m);
  run_ranks(m, pairs_fn);
  assert_all_ok(m);

  /* Bad arguments fail before any I/O and leave the transport usable. */
  hvd_transport *t = m->r[0].t;
  uint8_t b[4] = {0};
  assert_int_equal(hvd__sendrecv(t, 0, b, 4, 1, b, 4, 0), HVD_E_INVALID); /* to self */
  assert_int_equal(hvd__send(t, 3, b, 4, 0), HVD_E_INVALID);
  assert_int_equal(hvd__recv(t, -2, b, 4, 0), HVD_E_INVALID);
  assert_int_equal(hvd__send(t, 1, NULL, 4, 0), HVD_E_INVALID);
  run_ranks(m, ring_fn);
  assert_all_ok(m);
  mesh_free(m);
}

/* A connected socket to port, from the test thread. */
static int dial(int port) {
  int fd;
  assert_int_equal(hvd__net_connect("127.0.0.1", port, hvd__deadline_in(2000), &fd), 0);
  return fd;
}

/* Reads whatever comes until the other end hangs up, which it must. */
static void expect_hangup(int fd) {
  uint8_t b;
  int rc;
  while ((rc = hvd__net_read_all(fd, &b, 1, hvd__deadline_in(5000))) == 0) continue;
  if (rc != HVD_E_PEER_LOST) fail_msg("expected a hang-up, got: %s", hvd_last_error());
  close(fd);
}

/* Runs the handshake as a would-be rank; it must be refused: dropped,
 * or told that the rank's connection exists (REFUSE) and closed. */
static void expect_refused(int port, const hvd_secret *key, const char *purpose, uint32_t id) {
  uint32_t peer;
  uint8_t decision = 0;
  int fd = dial(port);
  int rc = hvd__auth_connect(fd, key, purpose, id, hvd__deadline_in(5000), &peer);
  if (rc == 0) {
    assert_int_equal(hvd__net_read_all(fd, &decision, 1, hvd__deadline_in(5000)), 0);
    if (decision != HVD_LINK_REFUSE) fail_msg("rank 0 accepted a connection claiming rank %u", id);
    expect_hangup(fd);
    return;
  }
  close(fd);
}

static void test_strangers(void **state) {
  (void)state;
  mesh *m = mesh_prepare(3, 5000, 8000);
  int port0 = m->peers[0].port, port1 = m->peers[1].port;
  hvd_secret other;
  assert_int_equal(hvd__secret_generate(&other), 0);
  start_create(m, 0); /* rank 0 only accepts: it is serving at once */

  /* (a) garbage */
  int fd = dial(port0);
  uint8_t junk[100];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 151 + 7);
  assert_int_equal(hvd__net_write_all(fd, junk, sizeof junk, hvd__deadline_in(2000)), 0);
  expect_hangup(fd);
  /* (b) silence: held open while the mesh forms */
  int silent = dial(port0);
  /* (c) the wrong secret, and the right one for another purpose */
  expect_refused(port0, &other, "data", 1);
  expect_refused(port0, &m->key, "rdzv", 1);
  /* (d) a valid secret but a rank that cannot connect to rank 0 */
  expect_refused(port0, &m->key, "data", 7);
  expect_refused(port0, &m->key, "data", 0);
  /* (e) a watch connection from a rank that does not watch rank 0 (in
   * a ring of 3, ranks 1 and 2 both do: only a second one is refused) */
  expect_refused(port0, &m->key, "watch", 7);

  start_create(m, 1);
  fd = dial(port1);
  uint8_t challenge[HVD_AUTH_CHALLENGE_LEN];
  assert_int_equal(hvd__net_read_all(fd, challenge, sizeof challenge, hvd__deadline_in(5000)), 0);
  close(fd);
  start_create(m, 2);
  for (int r = 0; r < 3; r++) join(m, r);
  assert_created(m);
  expect_refused(port0, &m->key, "watch", 1); /* a second watch connection */

  run_ranks(m, ring_fn);
  assert_all_ok(m);
  /* Later strangers: garbage, the wrong secret, a duplicate of a rank
   * connected already (rank 1 talks to rank 0 in the ring): each loses
   * its own connection and the job goes on. */
  fd = dial(port1);
  assert_int_equal(hvd__net_write_all(fd, junk, sizeof junk, hvd__deadline_in(2000)), 0);
  expect_hangup(fd);
  expect_refused(port0, &other, "data", 2);
  expect_refused(port0, &m->key, "data", 1);
  run_ranks(m, ring_fn);
  assert_all_ok(m);
  mesh_free(m);
  expect_hangup(silent); /* dropped when rank 0 closed, if not before */
}

static int lost_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  uint8_t s[8] = {0}, r[8];
  int rc = hvd__sendrecv(c->t, 1 - rank, s, 8, 1 - rank, r, 8, 0);
  if (rank == 1 || rc < 0) { /* rank 1 leaves after one exchange */
    c->t->ops->destroy(c->t);
    c->t = NULL;
    return rc;
  }
  uint8_t *sbuf = calloc(1, BIG), *rbuf = malloc(BIG);
  record_first(c, sbuf && rbuf ? hvd__sendrecv(c->t, 1, sbuf, BIG, 1, rbuf, BIG, 1) : HVD_E_NOMEM);
  free(sbuf);
  free(rbuf);
  return hvd__sendrecv(c->t, 1, s, 8, 1, r, 8, 2);
}

static void test_peer_lost(void **state) {
  (void)state;
  mesh *m = mesh_build(2, 5000);
  run_ranks(m, lost_fn);
  assert_int_equal(m->ranks.rc[1], 0);
  assert_int_equal(m->r[0].first_rc, HVD_E_PEER_LOST);
  assert_contains(m->r[0].first_err, "rank 1 lost");
  /* Broken for good, and says why. */
  assert_int_equal(m->ranks.rc[0], HVD_E_ABORTED);
  assert_contains(m->ranks.err[0], "rank 1 lost");
  mesh_free(m);
}

/* Rank 0 waits on rank 1, which does nothing until rank 0 gave up. */
static int silent_recv_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  int rc = 0;
  if (rank == 0) {
    uint8_t b[4];
    uint64_t start = hvd__now_ms();
    rc = hvd__recv(c->t, 1, b, sizeof b, 9);
    c->ms = hvd__now_ms() - start;
  }
  pthread_barrier_wait(&m->bar);
  return rc;
}

/* Rank 0 sends far more than the socket buffers hold; rank 1 never reads. */
static int silent_send_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  int rc = 0;
  if (rank == 0) {
    size_t len = 64u << 20;
    uint8_t *b = calloc(1, len);
    uint64_t start = hvd__now_ms();
    rc = b ? hvd__send(c->t, 1, b, len, 4) : HVD_E_NOMEM;
    c->ms = hvd__now_ms() - start;
    free(b);
  }
  pthread_barrier_wait(&m->bar);
  return rc;
}

static void test_timeout(void **state) {
  (void)state;
  mesh *m = mesh_build(2, 500);
  run_ranks(m, silent_recv_fn);
  assert_int_equal(m->ranks.rc[0], HVD_E_TIMEOUT);
  assert_contains(m->ranks.err[0], "rank 1 sent nothing");
  assert_contains(m->ranks.err[0], "0.5 s");
  assert_contains(m->ranks.err[0], "#9");
  assert_true(m->r[0].ms >= 450 && m->r[0].ms < 3000);
  mesh_free(m);

  m = mesh_build(2, 500);
  run_ranks(m, silent_send_fn);
  assert_int_equal(m->ranks.rc[0], HVD_E_TIMEOUT);
  assert_contains(m->ranks.err[0], "rank 1 is not receiving");
  assert_true(m->r[0].ms >= 450 && m->r[0].ms < 5000);
  mesh_free(m);
}

static int mismatch_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  uint8_t b[404] = {0};
  int rc = 0;
  if (rank == 1) rc = hvd__send(c->t, 0, b, m->send_len, m->send_tag);
  if (rank == 0) rc = hvd__recv(c->t, 1, b, 404, 12);
  pthread_barrier_wait(&m->bar); /* rank 1 stays connected until rank 0 has seen it */
  return rc;
}

static void test_mismatch(void **state) {
  (void)state;
  mesh *m = mesh_build(2, 5000);
  m->send_len = 400;
  m->send_tag = 12;
  run_ranks(m, mismatch_fn);
  assert_int_equal(m->ranks.rc[1], 0);
  assert_int_equal(m->ranks.rc[0], HVD_E_MISMATCH);
  assert_contains(m->ranks.err[0],
                  "rank 1 sent 400 bytes for collective #12, this rank expected 404 bytes");
  mesh_free(m);

  m = mesh_build(2, 5000);
  m->send_len = 404;
  m->send_tag = 13;
  run_ranks(m, mismatch_fn);
  assert_int_equal(m->ranks.rc[0], HVD_E_MISMATCH);
  assert_contains(m->ranks.err[0], "rank 1 is at collective #13, this rank at #12");
  mesh_free(m);
}

/* Rank 1 and every other rank make their connection (an abort reaches
 * the peers connected; the others learn when they first connect). */
static int greet_rank1(rank_ctx *c, int size) {
  uint8_t s[4] = {0}, r[4];
  int rc = 0;
  for (int p = 0; rc == 0 && p < size; p++)
    if (p != c->rank && (c->rank == 1 || p == 1)) rc = hvd__sendrecv(c->t, p, s, 4, p, r, 4, 99);
  return rc;
}

/* Rank 1 gives up because of rank 2 (or of nobody: lost_rank -1).  The
 * others wait for data: the ABORT comes instead, read with the header
 * into the start of a small buffer, whole or in part, or after the
 * header alone into a large one (recv_len). */
static int abort_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  size_t len = m->recv_len ? m->recv_len : 4;
  uint8_t *b = calloc(1, len);
  int rc = b ? greet_rank1(c, m->size) : HVD_E_NOMEM;
  if (rc < 0) {
    free(b);
    return rc;
  }
  if (rank == 1) {
    int lost = m->size == 3 ? 2 : -1;
    c->t->ops->abort(c->t, lost, lost >= 0 ? "connection closed by peer" : "shutting down");
    c->t->ops->abort(c->t, lost, "again"); /* idempotent */
    rc = hvd__send(c->t, 0, b, len, 0);
  } else {
    rc = hvd__recv(c->t, 1, b, len, 0);
  }
  free(b);
  return rc;
}

static void test_abort(void **state) {
  (void)state;
  mesh *m = mesh_build(3, 5000);
  run_ranks(m, abort_fn);
  assert_int_equal(m->ranks.rc[0], HVD_E_PEER_LOST);
  assert_contains(m->ranks.err[0], "rank 2 lost (reported by rank 1: connection closed by peer)");
  assert_int_equal(m->ranks.rc[2], HVD_E_PEER_LOST);
  assert_contains(m->ranks.err[2], "rank 1 gave up on this rank: connection closed by peer");
  assert_int_equal(m->ranks.rc[1], HVD_E_ABORTED);
  assert_contains(m->ranks.err[1], "connection closed by peer");
  mesh_free(m);

  m = mesh_build(2, 5000);
  run_ranks(m, abort_fn);
  assert_int_equal(m->ranks.rc[0], HVD_E_PEER_LOST);
  assert_contains(m->ranks.err[0], "rank 1 aborted: shutting down");
  mesh_free(m);

  /* A buffer longer than the whole ABORT frame (read with the header),
   * and one too long to be read with it. */
  static const size_t lens[] = {4096, 1u << 20};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    m = mesh_build(2, 5000);
    m->recv_len = lens[i];
    run_ranks(m, abort_fn);
    assert_int_equal(m->ranks.rc[0], HVD_E_PEER_LOST);
    assert_contains(m->ranks.err[0], "rank 1 aborted: shutting down");
    mesh_free(m);
  }
}

/* How rank 1 goes before anyone connected to it (unconnected_fn). */
enum { CLOSES, ABORTS_AND_CLOSES, ABORTS };

/* Rank 1 goes before anyone connected to it (m->send_tag says how); then
 * rank 0 exchanges with it and rank 2 receives from it. */
static int unconnected_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  uint8_t b[4] = {0}, r[4];
  int rc = 0;
  if (rank == 1 && m->send_tag != CLOSES) c->t->ops->abort(c->t, -1, "shutting down");
  if (rank == 1 && m->send_tag != ABORTS) {
    c->t->ops->destroy(c->t);
    c->t = NULL;
  }
  pthread_barrier_wait(&m->bar);
  if (rank == 0) rc = hvd__sendrecv(c->t, 1, b, sizeof b, 1, r, sizeof r, 5);
  if (rank == 2) rc = hvd__recv(c->t, 1, b, sizeof b, 5);
  pthread_barrier_wait(&m->bar); /* an aborted rank 1 closes only now */
  return rc;
}

/* A closed rank refuses the others' first contact, which names it; an
 * aborted one that has not closed yet tells them why, as it told the
 * ranks connected (without it they would blame rank 1 for a hang-up). */
static void test_abort_unconnected(void **state) {
  (void)state;
  for (uint32_t how = CLOSES; how <= ABORTS; how++) {
    mesh *m = mesh_build(3, 5000);
    m->send_tag = how;
    run_ranks(m, unconnected_fn);
    assert_int_equal(m->ranks.rc[1], 0);
    for (int r = 0; r < 3; r += 2) {
      assert_int_equal(m->ranks.rc[r], HVD_E_PEER_LOST);
      assert_contains(m->ranks.err[r],
                      how == ABORTS ? "rank 1 aborted: shutting down" : "rank 1 lost");
      if (how != ABORTS) assert_contains(m->ranks.err[r], "refused");
    }
    mesh_free(m);
  }
}

/* ---- connections on first use ---- */

/* The patterns the collectives use, small: each rank then records the
 * connections it holds. */
static int ring_links_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  int n = m->size, rc = 0;
  uint8_t s[512], r[512];
  for (int step = 0; rc == 0 && step < 3; step++)
    rc = exchange(c, (rank + 1) % n, (rank + n - 1) % n, sizeof s, step, s, r);
  c->links = hvd__tcp_connections(c->t);
  return rc;
}

/* Recursive doubling: at step k every rank swaps with rank ^ 2^k. */
static int doubling_links_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  int rc = 0;
  uint8_t s[512], r[512];
  for (int k = 1; rc == 0 && k < m->size; k <<= 1)
    rc = exchange(c, rank ^ k, rank ^ k, sizeof s, k, s, r);
  c->links = hvd__tcp_connections(c->t);
  return rc;
}

/* Every pair at once from both ends (pairwise alltoall's schedule, rank
 * ^ k): each first contact is simultaneous, and each pair must end with
 * one connection, the same at both ends (the data says so). */
static int all_pairs_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  int rc = 0;
  uint8_t s[512], r[512];
  for (int round = 0; round < 2; round++)
    for (int k = 1; rc == 0 && k < m->size; k++)
      rc = exchange(c, rank ^ k, rank ^ k, sizeof s, k + 10 * round, s, r);
  c->links = hvd__tcp_connections(c->t);
  return rc;
}

static void links_case(int size, ranks_fn *fn, int expect) {
  mesh *m = mesh_build(size, 5000);
  run_ranks(m, fn);
  assert_all_ok(m);
  for (int r = 0; r < size; r++)
    if (m->r[r].links != expect)
      fail_msg("np %d: rank %d holds %d connections, expected %d", size, r, m->r[r].links, expect);
  mesh_free(m);
}

static void test_links(void **state) {
  (void)state;
  links_case(8, ring_links_fn, 2);     /* ring: the two neighbours */
  links_case(2, ring_links_fn, 1);     /* ... one at np 2 */
  links_case(8, doubling_links_fn, 3); /* recursive doubling: log2 n */
  links_case(4, doubling_links_fn, 2);
  links_case(8, all_pairs_fn, 7); /* alltoall: n - 1, one per pair */
  mesh *m = mesh_build(3, 5000);  /* nothing used: no data connection */
  for (int r = 0; r < 3; r++) assert_int_equal(hvd__tcp_connections(m->r[r].t), 0);
  mesh_free(m);
}

/* Ranks 0 and 2 send in_flight bytes to rank 1 while rank 1 has not
 * entered the transport: its links thread accepts them, and the sends
 * complete.  Then rank 1 reads both. */
static int in_flight_fn(int rank, void *arg) {
  mesh *m = arg;
  rank_ctx *c = &m->r[rank];
  size_t len = c->t->in_flight;
  uint8_t *s = malloc(len), *r = malloc(len);
  int rc = s && r ? 0 : HVD_E_NOMEM;
  if (rc == 0 && rank != 1) rc = exchange(c, 1, -1, len, 30 + rank, s, r);
  pthread_barrier_wait(&m->bar);
  for (int p = 0; rc == 0 && rank == 1 && p < 3; p += 2) rc = exchange(c, -1, p, len, 30 + p, s, r);
  free(s);
  free(r);
  return rc;
}

static void test_in_flight(void **state) {
  (void)state;
  mesh *m = mesh_build(3, 5000);
  run_ranks(m, in_flight_fn);
  assert_all_ok(m);
  mesh_free(m);
}

static void test_mesh_timeout(void **state) {
  (void)state;
  /* Rank 2 never shows up: both others time out naming it. */
  mesh *m = mesh_prepare(3, 5000, 500);
  uint64_t start = hvd__now_ms();
  start_create(m, 0);
  start_create(m, 1);
  join(m, 0);
  join(m, 1);
  assert_true(hvd__now_ms() - start < 3000);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(m->ranks.rc[r], HVD_E_TIMEOUT);
    assert_null(m->r[r].t);
    assert_contains(m->ranks.err[r], "rank 2 never connected");
  }
  close(m->r[2].cfg.listen_fd);
  mesh_free(m);

  /* Rank 0 listens but never answers: rank 1 times out connecting to it. */
  m = mesh_prepare(2, 5000, 500);
  start_create(m, 1);
  join(m, 1);
  assert_int_equal(m->ranks.rc[1], HVD_E_TIMEOUT);
  assert_contains(m->ranks.err[1], "rank 0");
  close(m->r[0].cfg.listen_fd);
  mesh_free(m);
}

/* ---- the socket layer underneath (net.h) ---- */

/* Listens on addr, connects to it by `dial_as`, accepts; 0 if this host
 * cannot listen there (no IPv6). */
static int net_pair(const char *addr, const char *dial_as, int fds[2], char peer[]) {
  int lfd, port;
  if (hvd__net_listen(addr, 0, &lfd, &port) < 0) return 0;
  assert_int_equal(hvd__net_connect(dial_as, port, hvd__deadline_in(2000), &fds[0]), 0);
  assert_int_equal(hvd__net_accept(lfd, hvd__deadline_in(2000), &fds[1], peer), 0);
  hvd__net_close(&lfd);
  assert_int_equal(lfd, -1);
  return 1;
}

static void test_net(void **state) {
  (void)state;
  char peer[HVD_NET_ADDR_MAX], local[HVD_NET_ADDR_MAX];
  uint8_t msg[5] = "hello", got[5];
  int fds[2];

  if (net_pair("::1", "::1", fds, peer)) { /* IPv6, where the host has it */
    assert_string_equal(peer, "::1");
    assert_int_equal(hvd__net_local_addr(fds[0], local), 0);
    assert_string_equal(local, "::1");
    assert_int_equal(hvd__net_write_all(fds[0], msg, 5, hvd__deadline_in(2000)), 0);
    assert_int_equal(hvd__net_read_all(fds[1], got, 5, hvd__deadline_in(2000)), 0);
    assert_memory_equal(got, msg, 5);
    hvd__net_close(&fds[0]);
    hvd__net_close(&fds[1]);
  }

  /* Any address, reached by name. */
  assert_int_equal(net_pair(NULL, "localhost", fds, peer), 1);
  /* A closed peer is HVD_E_PEER_LOST both ways, and never a SIGPIPE. */
  hvd__net_close(&fds[1]);
  assert_int_equal(hvd__net_read_all(fds[0], got, 5, hvd__deadline_in(2000)), HVD_E_PEER_LOST);
  assert_contains(hvd_last_error(), "connection closed by peer");
  static uint8_t big[1 << 20];
  int rc = 0;
  for (int i = 0; i < 64 && rc == 0; i++)
    rc = hvd__net_write_all(fds[0], big, sizeof big, hvd__deadline_in(2000));
  assert_int_equal(rc, HVD_E_PEER_LOST);
  hvd__net_close(&fds[0]);

  /* Nobody listening: retried until the deadline, then said so. */
  int lfd, port;
  assert_int_equal(hvd__net_listen("127.0.0.1", 0, &lfd, &port), 0);
  hvd__net_close(&lfd);
  uint64_t start = hvd__now_ms();
  assert_int_equal(hvd__net_connect("127.0.0.1", port, hvd__deadline_in(300), &fds[0]),
                   HVD_E_TIMEOUT);
  assert_true(hvd__now_ms() - start >= 250);
  assert_contains(hvd_last_error(), "Connection refused (retried for");
  assert_int_equal(fds[0], -1);

  assert_int_equal(hvd__net_connect("127.0.0.1", 70000, hvd__deadline_in(300), &fds[0]),
                   HVD_E_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring),
      cmocka_unit_test(test_strangers),
      cmocka_unit_test(test_peer_lost),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_abort),
      cmocka_unit_test(test_mesh_timeout),
      cmocka_unit_test(test_net),
      cmocka_unit_test(test_abort_unconnected),
      cmocka_unit_test(test_links),
      cmocka_unit_test(test_in_flight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
