/*
 * test_rdzv_elastic.c -- the elastic rendezvous' messages
 * (src/rdzv/rdzv_elastic.c): JOIN, PLACE and NOTICE round trips,
 * every field checked on decoding (sizes the payload cannot hold refused
 * before anything is allocated), and the worker's NOTICE reader over a
 * socket: frames split across reads, several at once, garbage, hvdrun
 * closing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "rdzv/rdzv_elastic.h"
#include "common.h"

static hvd_rdzv_entry body(const char *host, const char *addr, int port) {
  hvd_rdzv_entry e;
  memset(&e, 0, sizeof e);
  snprintf(e.hostname, sizeof e.hostname, "%s", host);
  snprintf(e.host_id, sizeof e.host_id, "%s/boot", host);
  snprintf(e.iface, sizeof e.iface, "eth0");
  snprintf(e.listen.addr, sizeof e.listen.addr, "%s", addr);
  e.listen.port = port;
  e.local_size = 1;
  e.shm = 1;
  return e;
}

static void assert_mentions(const char *words) {
  print_message("error: %s\n", hvd_last_error());
  assert_non_null(strstr(hvd_last_error(), words));
}

static void test_join_round_trip_and_checks(void **state) {
  (void)state;
  uint8_t buf[HVD_RDZV_JOIN_MAX];
  hvd_rdzv_entry e = body("h3", "10.0.0.4", 4321), got;
  uint32_t worker = 0;
  int n = hvd__rdzv_encode_join(77, &e, buf, sizeof buf);
  assert_true(n > 0);
  assert_int_equal(hvd__rdzv_decode_join(buf, (size_t)n, &worker, &got), 0);
  assert_int_equal(worker, 77);
  assert_string_equal(got.hostname, "h3");
  assert_string_equal(got.listen.addr, "10.0.0.4");
  assert_int_equal(got.listen.port, 4321);
  /* Truncated anywhere, or a byte too many. */
  for (int cut = 0; cut < n; cut++)
    assert_int_equal(hvd__rdzv_decode_join(buf, (size_t)cut, &worker, &got), HVD_E_PROTOCOL);
  buf[n] = 0;
  assert_int_equal(hvd__rdzv_decode_join(buf, (size_t)n + 1, &worker, &got), HVD_E_PROTOCOL);
  assert_mentions("trailing");
  /* A name address would make hvdrun resolve what a stranger sent. */
  hvd_rdzv_entry bad = body("h3", "evil.example", 1);
  assert_int_equal(hvd__rdzv_encode_join(1, &bad, buf, sizeof buf), HVD_E_INVALID);
}

static void table_of(hvd_rdzv_entry *t, uint32_t size) {
  for (uint32_t r = 0; r < size; r++) {
    char host[16], addr[32];
    snprintf(host, sizeof host, "h%u", r / 2);
    snprintf(addr, sizeof addr, "10.0.0.%u", r + 1);
    t[r] = body(host, addr, 5000 + (int)r);
    t[r].rank = r;
    t[r].size = size;
    t[r].local_rank = r % 2;
    t[r].local_size = 2;
  }
}

static void test_place_round_trip_and_checks(void **state) {
  (void)state;
  static uint8_t buf[1 << 16];
  hvd_rdzv_entry t[4], *got = NULL;
  table_of(t, 4);
  hvd_rdzv_place p = {3, 2, 4, 1, 2}, q;
  int n = hvd__rdzv_encode_place(&p, t, buf, sizeof buf);
  assert_true(n > 20);
  assert_int_equal(hvd__rdzv_decode_place(buf, (size_t)n, &q, &got), 0);
  assert_memory_equal(&p, &q, sizeof p);
  for (int r = 0; r < 4; r++) {
    assert_string_equal(got[r].listen.addr, t[r].listen.addr);
    assert_int_equal(got[r].local_rank, r % 2);
  }
  free(got);
  for (int cut = 0; cut < n; cut++) {
    assert_int_equal(hvd__rdzv_decode_place(buf, (size_t)cut, &q, &got), HVD_E_PROTOCOL);
    assert_null(got);
  }
  /* A size the payload cannot hold: refused, nothing allocated for it. */
  uint8_t huge[40] = {0};
  hvd_writer w = {huge, sizeof huge, 0, 0};
  hvd__put_u32(&w, 1);
  hvd__put_u32(&w, 0);
  hvd__put_u32(&w, 0xfffffff0u);
  hvd__put_u32(&w, 0);
  hvd__put_u32(&w, 1);
  assert_int_equal(hvd__rdzv_decode_place(huge, sizeof huge, &q, &got), HVD_E_PROTOCOL);
  assert_mentions("cannot fit");
  /* Ranks out of range. */
  hvd_rdzv_place bad[] = {{1, 4, 4, 0, 1}, {1, 0, 4, 2, 2}, {0, 0, 4, 0, 1}, {1, 0, 4, 0, 5}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(hvd__rdzv_encode_place(&bad[i], t, buf, sizeof buf), HVD_E_INVALID);
}

static void test_notice_round_trip_and_checks(void **state) {
  (void)state;
  uint8_t buf[HVD_RDZV_NOTICE_LEN + 1];
  hvd_rdzv_notice n = {0x123456789ull, 1, 0}, got;
  assert_int_equal(hvd__rdzv_encode_notice(&n, buf, sizeof buf), HVD_RDZV_NOTICE_LEN);
  assert_int_equal(hvd__rdzv_decode_notice(buf, HVD_RDZV_NOTICE_LEN, &got), 0);
  assert_true(got.stamp == n.stamp && got.added == 1 && got.removed == 0);
  buf[8] = 2;
  assert_int_equal(hvd__rdzv_decode_notice(buf, HVD_RDZV_NOTICE_LEN, &got), HVD_E_PROTOCOL);
  assert_int_equal(hvd__rdzv_decode_notice(buf, HVD_RDZV_NOTICE_LEN - 1, &got), HVD_E_PROTOCOL);
}

/* A NOTICE frame, header and payload. */
static size_t notice_frame(uint8_t *out, uint64_t stamp, int added, int removed) {
  hvd_rdzv_notice n = {stamp, (uint8_t)added, (uint8_t)removed};
  hvd_frame f = {HVD_FRAME_RDZV_NOTICE, 0, HVD_RDZV_NOTICE_LEN};
  hvd__frame_encode(&f, out);
  hvd__rdzv_encode_notice(&n, out + HVD_FRAME_HDR_LEN, HVD_RDZV_NOTICE_LEN);
  return HVD_FRAME_HDR_LEN + HVD_RDZV_NOTICE_LEN;
}

static void test_notices_over_a_socket(void **state) {
  (void)state;
  int sv[2];
  uint8_t frames[3 * 64];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  hvd_rdzv_notices n;
  hvd__rdzv_notices_init(&n, sv[0]);
  assert_int_equal(hvd__rdzv_notices_poll(&n), 0); /* nothing yet: no wait */
  assert_int_equal(n.last.stamp, 0);
  size_t len = notice_frame(frames, 5, 1, 0);
  len += notice_frame(frames + len, 7, 0, 1);
  len += notice_frame(frames + len, 6, 0, 0);
  /* The first byte by byte, the rest at once. */
  for (size_t i = 0; i < 34; i++) {
    assert_int_equal(write(sv[1], frames + i, 1), 1);
    assert_int_equal(hvd__rdzv_notices_poll(&n), 0);
  }
  assert_int_equal(n.last.stamp, 5);
  assert_int_equal(write(sv[1], frames + 34, len - 34), (ssize_t)(len - 34));
  assert_int_equal(hvd__rdzv_notices_poll(&n), 0);
  assert_int_equal(n.last.stamp, 7); /* the newest, not the last to arrive */
  assert_true(n.added && n.removed);
  /* hvdrun goes: the channel closes quietly. */
  close(sv[1]);
  assert_int_equal(hvd__rdzv_notices_poll(&n), 0);
  assert_int_equal(n.fd, -1);
  /* Garbage: refused, and the channel closed. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  hvd__rdzv_notices_init(&n, sv[0]);
  uint8_t junk[HVD_FRAME_HDR_LEN];
  memset(junk, 0x41, sizeof junk);
  assert_int_equal(write(sv[1], junk, sizeof junk), (ssize_t)sizeof junk);
  assert_int_equal(hvd__rdzv_notices_poll(&n), HVD_E_PROTOCOL);
  assert_int_equal(n.fd, -1);
  close(sv[1]);
  /* A frame of another type. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  hvd__rdzv_notices_init(&n, sv[0]);
  hvd_frame f = {HVD_FRAME_RDZV_TABLE, 0, 4};
  hvd__frame_encode(&f, junk);
  assert_int_equal(write(sv[1], junk, sizeof junk), (ssize_t)sizeof junk);
  assert_int_equal(hvd__rdzv_notices_poll(&n), HVD_E_PROTOCOL);
  assert_mentions("not a NOTICE");
  close(sv[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_join_round_trip_and_checks),
      cmocka_unit_test(test_place_round_trip_and_checks),
      cmocka_unit_test(test_notice_round_trip_and_checks),
      cmocka_unit_test(test_notices_over_a_socket),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
