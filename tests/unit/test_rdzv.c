/*
 * test_rdzv.c -- the rendezvous codecs and client (rdzv/rdzv.h).
 *
 * Both ends decode what the other sent over the network, so besides round
 * trips every validation rule gets a payload that breaks it: ranks out of
 * range, ports 0 and 65536, names where numbers belong, oversized and
 * NUL-holding strings, trailing bytes, every truncation; then a few
 * thousand random and mutated payloads (run under ASan/UBSan).  The client
 * is driven over a socketpair with the server's reply written in advance.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdzv/rdzv.h"
#include "common.h"
#include "rng.h"

/* A small deterministic generator, so a failure replays. */
static rng gen = {0x2545f4914f6cdd1dull};

static hvd_rdzv_entry entry(uint32_t rank, uint32_t size, const char *addr, int port) {
  hvd_rdzv_entry e;
  memset(&e, 0, sizeof e);
  e.rank = rank;
  e.size = size;
  snprintf(e.hostname, sizeof e.hostname, "host-%u.example", rank);
  snprintf(e.host_id, sizeof e.host_id, "node%u/0b5e7c1d-boot", rank % 3);
  snprintf(e.iface, sizeof e.iface, "eth%u", rank % 2);
  snprintf(e.listen.addr, sizeof e.listen.addr, "%s", addr);
  e.listen.port = port;
  e.local_size = size ? size : 1;
  e.local_rank = size ? rank % size : 0;
  e.shm = (uint8_t)(rank % 2);
  return e;
}

static void assert_error_mentions(const char *words) {
  if (!strstr(hvd_last_error(), words))
    fail_msg("error \"%s\" does not mention \"%s\"", hvd_last_error(), words);
}

static void assert_entry_equal(const hvd_rdzv_entry *a, const hvd_rdzv_entry *b) {
  assert_int_equal(a->rank, b->rank);
  assert_int_equal(a->size, b->size);
  assert_string_equal(a->hostname, b->hostname);
  assert_string_equal(a->host_id, b->host_id);
  assert_string_equal(a->iface, b->iface);
  assert_string_equal(a->listen.addr, b->listen.addr);
  assert_int_equal(a->listen.port, b->listen.port);
  assert_int_equal(a->local_rank, b->local_rank);
  assert_int_equal(a->local_size, b->local_size);
  assert_int_equal(a->shm, b->shm);
}

/* The body's fields after the hostname, as raw_register() writes them. */
#define RAW_ID "id/boot"
#define RAW_IFACE "eth0"

/* An entry's body, field by field, with the placement and flag given. */
static void raw_body(hvd_writer *w, const char *host, const char *id, const char *iface,
                     const char *addr, uint16_t port, uint32_t local_rank, uint32_t local_size,
                     uint8_t shm) {
  hvd__put_str(w, host);
  hvd__put_str(w, id);
  hvd__put_str(w, iface);
  hvd__put_str(w, addr);
  hvd__put_u16(w, port);
  hvd__put_u32(w, local_rank);
  hvd__put_u32(w, local_size);
  hvd__put_u8(w, shm);
}

/* A REGISTER payload built field by field, to say what encoders refuse. */
static size_t raw_register(uint8_t *buf, size_t cap, uint32_t rank, uint32_t size,
                           const char *host, const char *addr, uint16_t port) {
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_u32(&w, rank);
  hvd__put_u32(&w, size);
  raw_body(&w, host, RAW_ID, RAW_IFACE, addr, port, 0, size ? size : 1, 1);
  assert_false(w.failed);
  return w.len;
}

/* A REGISTER of rank 0 of 2 with the body's other fields as given. */
static size_t raw_register_body(uint8_t *buf, size_t cap, const char *id, const char *iface,
                                uint32_t local_rank, uint32_t local_size, uint8_t shm) {
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_u32(&w, 0);
  hvd__put_u32(&w, 2);
  raw_body(&w, "h", id, iface, "127.0.0.1", 80, local_rank, local_size, shm);
  assert_false(w.failed);
  return w.len;
}

static void expect_bad_register(const uint8_t *buf, size_t len, const char *words) {
  hvd_rdzv_entry e;
  assert_int_equal(hvd__rdzv_decode_register(buf, len, &e), HVD_E_PROTOCOL);
  assert_error_mentions(words);
}

/* ---- REGISTER ---- */

static void test_register_round_trip(void **state) {
  (void)state;
  const char *addrs[] = {"127.0.0.1", "10.1.2.3", "::1", "fe80::1:2:3:4"};
  for (size_t i = 0; i < HVD__ARRAY_LEN(addrs); i++) {
    hvd_rdzv_entry in = entry(3, 8, addrs[i], i == 0 ? 1 : 65535), out;
    uint8_t buf[HVD_RDZV_REGISTER_MAX];
    int len = hvd__rdzv_encode_register(&in, buf, sizeof buf);
    assert_true(len > 0);
    assert_int_equal(hvd__rdzv_decode_register(buf, (size_t)len, &out), 0);
    assert_entry_equal(&in, &out);
  }
}

static void test_register_largest_fits(void **state) {
  (void)state;
  hvd_rdzv_entry in = entry(0, 1, "1111:2222:3333:4444:5555:6666:7777:8888", 9), out;
  memset(in.hostname, 'h', HVD_HOSTNAME_MAX - 1);
  in.hostname[HVD_HOSTNAME_MAX - 1] = '\0';
  memset(in.host_id, 'i', HVD_HOST_ID_MAX - 1);
  in.host_id[HVD_HOST_ID_MAX - 1] = '\0';
  memset(in.iface, 'f', HVD_IFACE_NAME_MAX - 1);
  in.iface[HVD_IFACE_NAME_MAX - 1] = '\0';
  uint8_t buf[HVD_RDZV_REGISTER_MAX];
  int len = hvd__rdzv_encode_register(&in, buf, sizeof buf);
  assert_true(len > 0 && len <= HVD_RDZV_REGISTER_MAX);
  assert_int_equal(hvd__rdzv_decode_register(buf, (size_t)len, &out), 0);
  assert_entry_equal(&in, &out);
}

static void test_register_encode_refuses(void **state) {
  (void)state;
  uint8_t buf[HVD_RDZV_REGISTER_MAX];
  struct {
    hvd_rdzv_entry e;
    const char *words;
  } cases[] = {
      {entry(4, 4, "127.0.0.1", 80), "rank 4 is not below"},
      {entry(0, 0, "127.0.0.1", 80), "job size 0"},
      {entry(0, 2, "127.0.0.1", 0), "port 0"},
      {entry(0, 2, "127.0.0.1", 65536), "port 65536"},
      {entry(0, 2, "127.0.0.1", -1), "port -1"},
      {entry(0, 2, "localhost", 80), "not a numeric"},
      {entry(0, 2, "1.2.3", 80), "not a numeric"},
      {entry(0, 2, "", 80), "not a numeric"},
  };
  for (size_t i = 0; i < HVD__ARRAY_LEN(cases); i++) {
    assert_int_equal(hvd__rdzv_encode_register(&cases[i].e, buf, sizeof buf), HVD_E_INVALID);
    assert_error_mentions(cases[i].words);
  }
  hvd_rdzv_entry e = entry(0, 2, "127.0.0.1", 80);
  strcpy(e.hostname, "has space");
  assert_int_equal(hvd__rdzv_encode_register(&e, buf, sizeof buf), HVD_E_INVALID);
  assert_error_mentions("hostname");
  e.hostname[0] = '\0';
  assert_int_equal(hvd__rdzv_encode_register(&e, buf, sizeof buf), HVD_E_INVALID);
  e = entry(0, 2, "127.0.0.1", 80);
  e.local_rank = 2;
  assert_int_equal(hvd__rdzv_encode_register(&e, buf, sizeof buf), HVD_E_INVALID);
  assert_error_mentions("local rank 2 of 2");
  e = entry(0, 2, "127.0.0.1", 80);
  e.host_id[0] = '\0';
  assert_int_equal(hvd__rdzv_encode_register(&e, buf, sizeof buf), HVD_E_INVALID);
  assert_error_mentions("host id");
  e = entry(0, 2, "127.0.0.1", 80);
  assert_int_equal(hvd__rdzv_encode_register(&e, buf, 10), HVD_E_INVALID); /* too small */
}

static void test_register_decode_refuses(void **state) {
  (void)state;
  uint8_t buf[1024];
  size_t n;
  n = raw_register(buf, sizeof buf, 2, 2, "h", "127.0.0.1", 80);
  expect_bad_register(buf, n, "rank 2 is not below the job size 2");
  n = raw_register(buf, sizeof buf, 0xffffffffu, 4, "h", "127.0.0.1", 80);
  expect_bad_register(buf, n, "not below");
  n = raw_register(buf, sizeof buf, 0, 0, "h", "127.0.0.1", 80);
  expect_bad_register(buf, n, "job size 0");
  n = raw_register(buf, sizeof buf, 0, 2, "h", "127.0.0.1", 0);
  expect_bad_register(buf, n, "port 0");
  n = raw_register(buf, sizeof buf, 0, 2, "h", "evil.example.com", 80);
  expect_bad_register(buf, n, "not a numeric");
  n = raw_register(buf, sizeof buf, 0, 2, "h", "127.0.0.1 ", 80);
  expect_bad_register(buf, n, "not a numeric");
  n = raw_register(buf, sizeof buf, 0, 2, "", "127.0.0.1", 80);
  expect_bad_register(buf, n, "hostname");
  n = raw_register(buf, sizeof buf, 0, 2, "a\033[2Jb", "127.0.0.1", 80);
  expect_bad_register(buf, n, "hostname");

  char longer[HVD_HOSTNAME_MAX + 1];
  memset(longer, 'x', HVD_HOSTNAME_MAX);
  longer[HVD_HOSTNAME_MAX] = '\0';
  n = raw_register(buf, sizeof buf, 0, 2, longer, "127.0.0.1", 80);
  expect_bad_register(buf, n, "'hostname'");
  n = raw_register(buf, sizeof buf, 0, 2, "h",
                   "1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa:bbbb:cccc:dddd", 80);
  expect_bad_register(buf, n, "'addr'");
  /* the rest of the body */
  n = raw_register_body(buf, sizeof buf, "", RAW_IFACE, 0, 2, 1);
  expect_bad_register(buf, n, "host id is empty");
  n = raw_register_body(buf, sizeof buf, "a b", RAW_IFACE, 0, 2, 1);
  expect_bad_register(buf, n, "host id");
  n = raw_register_body(buf, sizeof buf, RAW_ID, "eth\n0", 0, 2, 1);
  expect_bad_register(buf, n, "interface name");
  n = raw_register_body(buf, sizeof buf, RAW_ID, "0123456789abcdef", 0, 2, 1);
  expect_bad_register(buf, n, "'iface'");
  n = raw_register_body(buf, sizeof buf, RAW_ID, "", 0, 2, 1); /* may be empty */
  hvd_rdzv_entry e;
  assert_int_equal(hvd__rdzv_decode_register(buf, n, &e), 0);
  n = raw_register_body(buf, sizeof buf, RAW_ID, RAW_IFACE, 2, 2, 1);
  expect_bad_register(buf, n, "local rank 2 of 2 does not fit a job of 2");
  n = raw_register_body(buf, sizeof buf, RAW_ID, RAW_IFACE, 0, 3, 1);
  expect_bad_register(buf, n, "local rank 0 of 3");
  n = raw_register_body(buf, sizeof buf, RAW_ID, RAW_IFACE, 0, 0, 1);
  expect_bad_register(buf, n, "local rank 0 of 0");
  n = raw_register_body(buf, sizeof buf, RAW_ID, RAW_IFACE, 0, 2, 2);
  expect_bad_register(buf, n, "shm flag 2");
}

static void test_register_nul_in_string(void **state) {
  (void)state;
  uint8_t buf[256];
  size_t n = raw_register(buf, sizeof buf, 0, 2, "abc", "127.0.0.1", 80);
  buf[4 + 4 + 2 + 1] = '\0'; /* "a\0c" */
  expect_bad_register(buf, n, "'hostname'");
  n = raw_register(buf, sizeof buf, 0, 2, "abc", "127.0.0.1", 80);
  buf[4 + 4 + 2 + 3 + 2 + strlen(RAW_ID) + 2 + strlen(RAW_IFACE) + 2 + 3] = '\0'; /* "127\0..." */
  expect_bad_register(buf, n, "'addr'");
}

static void test_register_truncated_and_trailing(void **state) {
  (void)state;
  uint8_t buf[HVD_RDZV_REGISTER_MAX + 8];
  hvd_rdzv_entry e = entry(1, 2, "127.0.0.1", 4242);
  int len = hvd__rdzv_encode_register(&e, buf, sizeof buf);
  assert_true(len > 0);
  for (int cut = 0; cut < len; cut++) expect_bad_register(buf, (size_t)cut, "truncated");
  buf[len] = 0;
  expect_bad_register(buf, (size_t)len + 1, "1 trailing bytes");
}

static void test_register_oversized_length(void **state) {
  (void)state;
  static uint8_t big[HVD_FRAME_CONTROL_MAX + 1];
  expect_bad_register(big, sizeof big, "exceeds");
}

/* ---- TABLE ---- */

static void make_table(hvd_rdzv_entry *t, uint32_t size) {
  for (uint32_t r = 0; r < size; r++)
    t[r] = entry(r, size, r % 2 ? "::1" : "127.0.0.1", (int)(20000 + r));
}

static void test_table_round_trip(void **state) {
  (void)state;
  for (uint32_t size = 1; size <= 9; size += 4) {
    hvd_rdzv_entry in[9], out[9];
    uint8_t buf[4096];
    make_table(in, size);
    int len = hvd__rdzv_encode_table(in, size, buf, sizeof buf);
    assert_true(len > 0);
    assert_int_equal(hvd__rdzv_decode_table(buf, (size_t)len, size, out), 0);
    for (uint32_t r = 0; r < size; r++) assert_entry_equal(&in[r], &out[r]);
  }
}

static void test_table_refuses(void **state) {
  (void)state;
  hvd_rdzv_entry t[4], out[4];
  uint8_t buf[4096];
  make_table(t, 4);
  int len = hvd__rdzv_encode_table(t, 4, buf, sizeof buf);
  assert_true(len > 0);
  /* size mismatch, both ways */
  assert_int_equal(hvd__rdzv_decode_table(buf, (size_t)len, 3, out), HVD_E_PROTOCOL);
  assert_error_mentions("lists 4 ranks, this job has 3");
  assert_int_equal(hvd__rdzv_decode_table(buf, (size_t)len, 5, out), HVD_E_PROTOCOL);
  /* every truncation, and a trailing byte */
  for (int cut = 0; cut < len; cut++)
    assert_int_equal(hvd__rdzv_decode_table(buf, (size_t)cut, 4, out), HVD_E_PROTOCOL);
  buf[len] = 7;
  assert_int_equal(hvd__rdzv_decode_table(buf, (size_t)len + 1, 4, out), HVD_E_PROTOCOL);
  assert_error_mentions("trailing");
  /* the encoder refuses a slot that holds the wrong rank, or a bad entry */
  t[2].rank = 1;
  assert_int_equal(hvd__rdzv_encode_table(t, 4, buf, sizeof buf), HVD_E_INVALID);
  make_table(t, 4);
  t[3].listen.port = 0;
  assert_int_equal(hvd__rdzv_encode_table(t, 4, buf, sizeof buf), HVD_E_INVALID);
  make_table(t, 4);
  assert_int_equal(hvd__rdzv_encode_table(t, 4, buf, 20), HVD_E_INVALID);
}

static void test_table_bad_entries(void **state) {
  (void)state;
  hvd_rdzv_entry out[2];
  uint8_t buf[256];
  struct {
    const char *addr;
    uint16_t port;
    const char *host, *words;
  } cases[] = {
      {"127.0.0.1", 0, "h", "port 0"},
      {"my-host", 80, "h", "not a numeric"},
      {"127.0.0.1", 80, "", "hostname"},
  };
  for (size_t i = 0; i < HVD__ARRAY_LEN(cases); i++) {
    hvd_writer w = {buf, sizeof buf, 0, 0};
    hvd__put_u32(&w, 2);
    raw_body(&w, "ok", RAW_ID, RAW_IFACE, "127.0.0.1", 1000, 0, 2, 1);
    raw_body(&w, cases[i].host, RAW_ID, RAW_IFACE, cases[i].addr, cases[i].port, 1, 2, 0);
    assert_false(w.failed);
    assert_int_equal(hvd__rdzv_decode_table(buf, w.len, 2, out), HVD_E_PROTOCOL);
    assert_error_mentions(cases[i].words);
  }
}

/* ---- ERROR ---- */

static void test_error_round_trip(void **state) {
  (void)state;
  uint8_t buf[128];
  char reason[64];
  int len = hvd__rdzv_encode_error("rank 2 is already registered", buf, sizeof buf);
  assert_true(len > 0);
  assert_int_equal(hvd__rdzv_decode_error(buf, (size_t)len, reason, sizeof reason), 0);
  assert_string_equal(reason, "rank 2 is already registered");
  /* control characters are not printed as they came */
  len = hvd__rdzv_encode_error("a\033[2Jb\n", buf, sizeof buf);
  assert_int_equal(hvd__rdzv_decode_error(buf, (size_t)len, reason, sizeof reason), 0);
  assert_string_equal(reason, "a?[2Jb?");
  /* too long for the caller's buffer, trailing bytes, truncation */
  len = hvd__rdzv_encode_error("0123456789", buf, sizeof buf);
  assert_int_equal(hvd__rdzv_decode_error(buf, (size_t)len, reason, 8), HVD_E_PROTOCOL);
  assert_int_equal(hvd__rdzv_decode_error(buf, (size_t)len + 1, reason, sizeof reason),
                   HVD_E_PROTOCOL);
  assert_int_equal(hvd__rdzv_decode_error(buf, (size_t)len - 1, reason, sizeof reason),
                   HVD_E_PROTOCOL);
}

/* ---- fuzz ---- */

/* Whatever a decoder accepts must satisfy the rules it promises. */
static void assert_sane(const hvd_rdzv_entry *e) {
  assert_true(e->size >= 1 && e->rank < e->size);
  assert_true(e->listen.port >= 1 && e->listen.port <= 65535);
  assert_true(strlen(e->hostname) >= 1 && strlen(e->hostname) < HVD_HOSTNAME_MAX);
  assert_true(strlen(e->host_id) >= 1 && strlen(e->host_id) < HVD_HOST_ID_MAX);
  assert_true(strlen(e->iface) < HVD_IFACE_NAME_MAX);
  assert_true(e->local_size >= 1 && e->local_size <= e->size && e->local_rank < e->local_size);
  assert_true(e->shm <= 1);
}

static void test_fuzz_random(void **state) {
  (void)state;
  uint8_t buf[512];
  hvd_rdzv_entry out[4];
  char reason[64];
  for (int i = 0; i < 20000; i++) {
    size_t len = (size_t)(rng_next(&gen) % sizeof buf);
    for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)rng_next(&gen);
    if (hvd__rdzv_decode_register(buf, len, &out[0]) == 0) assert_sane(&out[0]);
    uint32_t size = (uint32_t)(1 + rng_next(&gen) % 4);
    if (hvd__rdzv_decode_table(buf, len, size, out) == 0)
      for (uint32_t r = 0; r < size; r++) assert_sane(&out[r]);
    hvd__rdzv_decode_error(buf, len, reason, sizeof reason);
  }
}

static void test_fuzz_mutations(void **state) {
  (void)state;
  hvd_rdzv_entry t[3], out[3];
  uint8_t valid[1024], buf[1024];
  make_table(t, 3);
  int tlen = hvd__rdzv_encode_table(t, 3, valid, sizeof valid);
  int rlen = hvd__rdzv_encode_register(&t[1], valid + tlen, sizeof valid - (size_t)tlen);
  assert_true(tlen > 0 && rlen > 0);
  for (int i = 0; i < 20000; i++) {
    int is_table = i % 2;
    size_t len = (size_t)(is_table ? tlen : rlen);
    memcpy(buf, is_table ? valid : valid + tlen, len);
    for (int flips = 1 + (int)(rng_next(&gen) % 3); flips > 0; flips--)
      buf[rng_next(&gen) % len] = (uint8_t)rng_next(&gen);
    if (is_table ? hvd__rdzv_decode_table(buf, len, 3, out) == 0
                 : hvd__rdzv_decode_register(buf, len, out) == 0)
      assert_sane(&out[0]);
  }
}

/* ---- client, over a socketpair ---- */

/* The server's reply: one frame of `type` holding payload[0..len). */
static void put_reply(int fd, uint8_t type, uint32_t tag, const uint8_t *payload, size_t len) {
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  hvd_frame f = {type, tag, len};
  hvd__frame_encode(&f, hdr);
  assert_int_equal(write(fd, hdr, sizeof hdr), sizeof hdr);
  if (len) assert_int_equal(write(fd, payload, len), (ssize_t)len);
}

/* Registers entry `me` with the reply already waiting; checks what the
 * client sent.  Returns hvd__rdzv_register's result. */
static int register_against(int fds[2], const hvd_rdzv_entry *me, hvd_rdzv_entry *table,
                            int timeout_ms) {
  int rc = hvd__rdzv_register(fds[0], me, hvd__deadline_in(timeout_ms), table);
  uint8_t got[HVD_FRAME_HDR_LEN + HVD_RDZV_REGISTER_MAX];
  ssize_t n = read(fds[1], got, sizeof got);
  hvd_frame f;
  hvd_rdzv_entry sent;
  assert_true(n > HVD_FRAME_HDR_LEN);
  assert_int_equal(hvd__frame_decode(got, &f), 0);
  assert_int_equal(f.type, HVD_FRAME_RDZV_REGISTER);
  assert_int_equal(f.len, (uint64_t)n - HVD_FRAME_HDR_LEN);
  assert_int_equal(hvd__rdzv_decode_register(got + HVD_FRAME_HDR_LEN, f.len, &sent), 0);
  assert_entry_equal(&sent, me);
  return rc;
}

static void socket_pair(int fds[2]) {
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
}

static void test_client_gets_table(void **state) {
  (void)state;
  int fds[2];
  hvd_rdzv_entry t[3], out[3];
  uint8_t payload[1024];
  make_table(t, 3);
  int len = hvd__rdzv_encode_table(t, 3, payload, sizeof payload);
  socket_pair(fds);
  put_reply(fds[1], HVD_FRAME_RDZV_TABLE, 0, payload, (size_t)len);
  assert_int_equal(register_against(fds, &t[2], out, 2000), 0);
  for (int r = 0; r < 3; r++) assert_entry_equal(&t[r], &out[r]);
  close(fds[0]);
  close(fds[1]);
}

static void test_client_refused(void **state) {
  (void)state;
  int fds[2];
  hvd_rdzv_entry me = entry(1, 2, "127.0.0.1", 5000), out[2];
  uint8_t payload[128];
  int len = hvd__rdzv_encode_error("rank 1 is already registered", payload, sizeof payload);
  socket_pair(fds);
  put_reply(fds[1], HVD_FRAME_RDZV_ERROR, 0, payload, (size_t)len);
  assert_int_equal(register_against(fds, &me, out, 2000), HVD_E_ENV);
  assert_error_mentions("rank 1 is already registered");
  close(fds[0]);
  close(fds[1]);
}

static void test_client_bad_replies(void **state) {
  (void)state;
  hvd_rdzv_entry t[2], out[2];
  uint8_t payload[512];
  make_table(t, 2);
  int len = hvd__rdzv_encode_table(t, 2, payload, sizeof payload);
  hvd_rdzv_entry other = t[1];
  other.listen.port = 1; /* the table lists rank 1 elsewhere */
  struct {
    uint8_t type;
    uint32_t tag;
    size_t len;
    const hvd_rdzv_entry *me;
    const char *words;
  } cases[] = {
      {HVD_FRAME_DATA, 0, (size_t)len, &t[1], "not a TABLE"},
      {HVD_FRAME_RDZV_TABLE, 5, (size_t)len, &t[1], "tag 5"},
      {HVD_FRAME_RDZV_TABLE, 0, (size_t)len - 1, &t[1], "truncated"},
      {HVD_FRAME_RDZV_TABLE, 0, (size_t)len, &other, "it registered"},
  };
  for (size_t i = 0; i < HVD__ARRAY_LEN(cases); i++) {
    int fds[2];
    socket_pair(fds);
    put_reply(fds[1], cases[i].type, cases[i].tag, payload, cases[i].len);
    assert_int_equal(register_against(fds, cases[i].me, out, 2000), HVD_E_PROTOCOL);
    assert_error_mentions(cases[i].words);
    close(fds[0]);
    close(fds[1]);
  }
}

static void test_client_oversized_reply(void **state) {
  (void)state;
  int fds[2];
  hvd_rdzv_entry me = entry(0, 2, "127.0.0.1", 5000), out[2];
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  hvd_frame f = {HVD_FRAME_RDZV_TABLE, 0, (uint64_t)1 << 40}; /* no giant allocation */
  hvd__frame_encode(&f, hdr);
  socket_pair(fds);
  assert_int_equal(write(fds[1], hdr, sizeof hdr), sizeof hdr);
  assert_int_equal(register_against(fds, &me, out, 2000), HVD_E_PROTOCOL);
  assert_error_mentions("exceeds");
  close(fds[0]);
  close(fds[1]);
}

static void test_client_server_gone_or_silent(void **state) {
  (void)state;
  int fds[2];
  hvd_rdzv_entry me = entry(0, 2, "127.0.0.1", 5000), out[2];
  socket_pair(fds);
  uint64_t t0 = hvd__now_ms();
  assert_int_equal(register_against(fds, &me, out, 200), HVD_E_TIMEOUT);
  assert_true(hvd__now_ms() - t0 < 2000);
  shutdown(fds[1], SHUT_WR);
  assert_int_equal(hvd__rdzv_register(fds[0], &me, hvd__deadline_in(2000), out),
                   HVD_E_PEER_LOST);
  close(fds[0]);
  close(fds[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_round_trip),
      cmocka_unit_test(test_register_largest_fits),
      cmocka_unit_test(test_register_encode_refuses),
      cmocka_unit_test(test_register_decode_refuses),
      cmocka_unit_test(test_register_nul_in_string),
      cmocka_unit_test(test_register_truncated_and_trailing),
      cmocka_unit_test(test_register_oversized_length),
      cmocka_unit_test(test_table_round_trip),
      cmocka_unit_test(test_table_refuses),
      cmocka_unit_test(test_table_bad_entries),
      cmocka_unit_test(test_error_round_trip),
      cmocka_unit_test(test_fuzz_random),
      cmocka_unit_test(test_fuzz_mutations),
      cmocka_unit_test(test_client_gets_table),
      cmocka_unit_test(test_client_refused),
      cmocka_unit_test(test_client_bad_replies),
      cmocka_unit_test(test_client_oversized_reply),
      cmocka_unit_test(test_client_server_gone_or_silent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
