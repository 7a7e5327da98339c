/*
 * test_shm_ring.c -- the byte ring of the shared-memory transport
 * (transport/shm_ring.h), in one process: a producer and a consumer thread
 * stream messages much larger than the ring through it, wrapping around
 * many times; headers carry tag and length; impossible counters are
 * refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "transport/shm_ring.h"

#define CAP 4096u /* small: every message wraps */

static hvd_ring *ring_new(void) {
  hvd_ring *r = aligned_alloc(HVD_RING_LINE, hvd__ring_bytes(CAP));
  assert_non_null(r);
  hvd__ring_init(r);
  return r;
}

static void test_write_read_wrap(void **state) {
  (void)state;
  hvd_ring *r = ring_new();
  uint8_t in[CAP], out[CAP];
  for (unsigned i = 0; i < CAP; i++) in[i] = (uint8_t)(i * 7 + 1);
  /* Fill, drain part, fill again across the end of the data area. */
  assert_int_equal(hvd__ring_write(r, CAP, in, CAP), CAP);
  assert_false(hvd__ring_writable(r, CAP));
  assert_int_equal(hvd__ring_write(r, CAP, in, 1), 0);
  assert_int_equal(hvd__ring_read(r, CAP, out, 1000), 1000);
  assert_memory_equal(out, in, 1000);
  assert_int_equal(hvd__ring_write(r, CAP, in, 2000), 1000);
  assert_int_equal(hvd__ring_read(r, CAP, out, CAP), CAP);
  assert_memory_equal(out, in + 1000, CAP - 1000);
  assert_memory_equal(out + CAP - 1000, in, 1000);
  assert_false(hvd__ring_readable(r));
  assert_int_equal(hvd__ring_read(r, CAP, out, 1), 0);
  free(r);
}

static void test_impossible_counters(void **state) {
  (void)state;
  hvd_ring *r = ring_new();
  uint8_t b[16] = {0};
  atomic_store(&r->head, CAP + 1); /* a buggy peer */
  assert_int_equal(hvd__ring_read(r, CAP, b, sizeof b), -1);
  assert_int_equal(hvd__ring_write(r, CAP, b, sizeof b), -1);
  free(r);
}

static void test_header(void **state) {
  (void)state;
  hvd_ring *r = ring_new();
  hvd_ring_msg out, in;
  uint8_t payload[10] = "abcdefghi", got[10];
  uint32_t tag;
  uint64_t len;
  hvd__ring_msg_out(&out, 77, payload, sizeof payload);
  assert_int_equal(hvd__ring_push(r, CAP, &out), HVD_RING_MSG_HDR_LEN + sizeof payload);
  assert_true(hvd__ring_msg_done(&out));
  hvd__ring_msg_in(&in, got, sizeof got);
  /* The pull stops after the header so that it can be checked first. */
  assert_int_equal(hvd__ring_pull(r, CAP, &in), HVD_RING_MSG_HDR_LEN);
  assert_int_equal(hvd__ring_msg_header(&in, &tag, &len), 0);
  assert_int_equal(tag, 77);
  assert_int_equal(len, sizeof payload);
  assert_int_equal(hvd__ring_pull(r, CAP, &in), sizeof payload);
  assert_true(hvd__ring_msg_done(&in));
  assert_memory_equal(got, payload, sizeof payload);
  in.hdr[0] ^= 1;
  assert_int_equal(hvd__ring_msg_header(&in, &tag, &len), -1);
  free(r);
}

/* ---- two threads ---- */

#define MSGS 40
#define MSG_LEN(i) ((size_t)(i) * 997u + (i % 3 == 0 ? 3u * CAP : 0u)) /* 0 .. ~50 KiB */

typedef struct {
  hvd_ring *r;
  int bad;
} pair;

static uint8_t byte_at(int msg, size_t i) {
  return (uint8_t)(msg * 31 + i * 13 + (i >> 8));
}

static void *producer(void *arg) {
  pair *p = arg;
  for (int m = 0; m < MSGS; m++) {
    size_t len = MSG_LEN(m);
    uint8_t *buf = malloc(len + 1);
    for (size_t i = 0; i < len; i++) buf[i] = byte_at(m, i);
    hvd_ring_msg msg;
    hvd__ring_msg_out(&msg, (uint32_t)m, buf, len);
    while (!hvd__ring_msg_done(&msg)) {
      long n = hvd__ring_push(p->r, CAP, &msg);
      if (n < 0) p->bad = 1;
      if (n <= 0) sched_yield();
    }
    free(buf);
  }
  return NULL;
}

static void test_threads_stream_messages_larger_than_the_ring(void **state) {
  (void)state;
  pair p = {ring_new(), 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, producer, &p), 0);
  for (int m = 0; m < MSGS; m++) {
    size_t len = MSG_LEN(m);
    uint8_t *buf = malloc(len + 1);
    hvd_ring_msg msg;
    int checked = 0;
    hvd__ring_msg_in(&msg, buf, len);
    while (!hvd__ring_msg_done(&msg)) {
      long n = hvd__ring_pull(p.r, CAP, &msg);
      assert_true(n >= 0);
      if (!checked && msg.done == HVD_RING_MSG_HDR_LEN) {
        uint32_t tag;
        uint64_t got_len;
        assert_int_equal(hvd__ring_msg_header(&msg, &tag, &got_len), 0);
        assert_int_equal(tag, (uint32_t)m);
        assert_int_equal(got_len, len);
        checked = 1;
      }
      if (n == 0) sched_yield();
    }
    for (size_t i = 0; i < len; i++)
      if (buf[i] != byte_at(m, i)) fail_msg("message %d byte %zu differs", m, i);
    free(buf);
  }
  pthread_join(t, NULL);
  assert_false(p.bad);
  assert_false(hvd__ring_readable(p.r));
  free(p.r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_read_wrap),
      cmocka_unit_test(test_impossible_counters),
      cmocka_unit_test(test_header),
      cmocka_unit_test(test_threads_stream_messages_larger_than_the_ring),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
