/*
 * test_message.c -- the negotiation message codec (message.h).
 *
 * Every message is decoded from another process's bytes, so besides round
 * trips these tests break a valid encoding in every way the decoder must
 * catch: each bad field, a cut at every byte, a trailing byte, lying
 * counts, and 20000 random mutations.  Each must fail with HVD_E_PROTOCOL,
 * leave the message empty and leak nothing (run under ASan/UBSan).  Any
 * mutation that still decodes must re-encode to the very same bytes: one
 * message, one encoding.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/message.h"
#include "rng.h"

#define CAPACITY 1024

/* A small deterministic generator, so a failure replays. */
static rng gen = {0x2545f4914f6cdd1dull};

static hvd_request make(const char *name, int type, int dtype, uint64_t count) {
  hvd_request r;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "%s", name);
  r.type = (uint8_t)type;
  r.dtype = (uint8_t)dtype;
  r.op = HVD_AVERAGE;
  r.count = count;
  if (hvd__request_has_shape(type)) { /* the shape of a plain vector */
    r.ndims = 1;
    r.shape[0] = (int64_t)count;
  }
  r.prescale = 1.0;
  r.postscale = 0.25;
  return r;
}

/* A message using every part of the format; free with hvd__msg_free. */
static void sample(hvd_msg *m) {
  memset(m, 0, sizeof *m);
  m->flags = HVD_MSG_JOINED;
  static const uint32_t bits[] = {0, 5, 9, 1000};
  for (size_t i = 0; i < HVD__ARRAY_LEN(bits); i++) assert_int_equal(hvd__msg_set_bit(m, bits[i]), 0);
  m->nreq = 3;
  m->reqs = calloc(m->nreq, sizeof *m->reqs);
  m->reqs[0] = make("layer1.weight", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 1u << 20);
  m->reqs[0].ndims = 3; /* [64, 0x4000, 1] */
  m->reqs[0].shape[0] = 64;
  m->reqs[0].shape[1] = 0x4000;
  m->reqs[0].shape[2] = 1;
  m->reqs[0].group_size = 2;
  m->reqs[0].group_index = 1;
  m->reqs[1] = make("params", HVD_REQ_BROADCAST, HVD_BFLOAT16, 0x7edcba9876543210ull);
  m->reqs[1].root = -7;
  m->reqs[1].process_set = 3;
  m->reqs[1].prescale = -0.0;
  m->reqs[1].postscale = NAN;
  m->reqs[2] = make("embeddings", HVD_REQ_ALLGATHER, HVD_BOOL, 0);
  m->reqs[2].on_device = 1;
  m->nfail = 2;
  m->fails = calloc(m->nfail, sizeof *m->fails);
  snprintf(m->fails[0], HVD_NAME_MAX, "stuck.tensor");
  memset(m->fails[1], 'f', HVD_NAME_MAX - 1); /* the longest name */
  m->flags |= HVD_MSG_SETTINGS;
  m->settings = (hvd_msg_settings){64u << 20, 2.5, 1, 0};
}

static void encode(const hvd_msg *m, uint8_t **buf, size_t *len) {
  assert_int_equal(hvd__msg_encode(m, buf, len), 0);
}

static void expect_same(const hvd_msg *a, const hvd_msg *b) {
  assert_int_equal(a->flags, b->flags);
  assert_int_equal(a->nbits, b->nbits);
  if (a->nbits) assert_memory_equal(a->bits, b->bits, (a->nbits + 7) / 8);
  assert_int_equal(a->nreq, b->nreq);
  for (uint32_t i = 0; i < a->nreq; i++) assert_true(hvd__request_equal(&a->reqs[i], &b->reqs[i]));
  assert_int_equal(a->nfail, b->nfail);
  for (uint32_t i = 0; i < a->nfail; i++) assert_string_equal(a->fails[i], b->fails[i]);
  if (a->flags & HVD_MSG_SETTINGS) assert_memory_equal(&a->settings, &b->settings, sizeof a->settings);
}

static void expect_empty(const hvd_msg *m) {
  assert_int_equal(m->flags | m->nbits | m->nreq | m->nfail, 0);
  assert_null(m->bits);
  assert_null(m->reqs);
  assert_null(m->fails);
}

/* Decoding fails with HVD_E_PROTOCOL, a message holding `words`, and
 * nothing left allocated. */
static void expect_bad(const uint8_t *buf, size_t len, uint32_t max_bits, const char *words) {
  hvd_msg m;
  hvd__err_clear();
  assert_int_equal(hvd__msg_decode(buf, len, max_bits, &m), HVD_E_PROTOCOL);
  expect_empty(&m);
  if (words && !strstr(hvd_last_error(), words))
    fail_msg("'%s' is not in \"%s\"", words, hvd_last_error());
}

/* ---- round trips ---- */

static void test_round_trip(void **state) {
  (void)state;
  hvd_msg in, out;
  sample(&in);
  uint8_t *buf;
  size_t len;
  encode(&in, &buf, &len);
  assert_int_equal(hvd__msg_decode(buf, len, CAPACITY, &out), 0);
  expect_same(&in, &out);
  assert_true(signbit(out.reqs[1].prescale));
  assert_true(isnan(out.reqs[1].postscale));
  assert_int_equal(out.reqs[1].root, -7);
  assert_int_equal(out.reqs[2].on_device, 1);
  for (uint32_t i = 0; i < 1100; i++)
    assert_int_equal(hvd__msg_bit(&out, i), i == 0 || i == 5 || i == 9 || i == 1000);
  hvd__msg_free(&out);
  hvd__msg_free(&in);
  expect_empty(&in);
  free(buf);
}

static void test_round_trip_empty(void **state) {
  (void)state;
  hvd_msg in, out;
  memset(&in, 0, sizeof in);
  in.flags = HVD_MSG_SHUTDOWN;
  uint8_t *buf;
  size_t len;
  encode(&in, &buf, &len);
  assert_int_equal(len, 16); /* flags, nbits, nreq, nfail */
  assert_int_equal(hvd__msg_decode(buf, len, 0, &out), 0);
  expect_same(&in, &out);
  hvd__msg_free(&out);
  free(buf);
}

static void test_round_trip_many_requests(void **state) {
  (void)state;
  hvd_msg in, out;
  memset(&in, 0, sizeof in);
  in.nreq = 5000;
  in.reqs = calloc(in.nreq, sizeof *in.reqs);
  for (uint32_t i = 0; i < in.nreq; i++) {
    char name[64];
    snprintf(name, sizeof name, "model.layer%u.grad", (unsigned)i);
    int type = (int)(rng_next(&gen) % HVD_REQ__COUNT);
    int counted = type != HVD_REQ_ALLGATHER && type != HVD_REQ_ALLTOALL;
    int dtype = (int)(rng_next(&gen) % (HVD_BOOL + 1));
    in.reqs[i] = make(name, type, dtype, counted ? rng_next(&gen) >> 2 : 0);
    in.reqs[i].op = (uint8_t)(rng_next(&gen) % (HVD_PRODUCT + 1));
    in.reqs[i].root = (int32_t)rng_next(&gen);
    in.reqs[i].process_set = (int32_t)rng_next(&gen);
    in.reqs[i].prescale = (double)(int64_t)rng_next(&gen) / 3.0;
  }
  for (uint32_t i = 0; i < CAPACITY; i += 3) assert_int_equal(hvd__msg_set_bit(&in, i), 0);
  uint8_t *buf;
  size_t len;
  encode(&in, &buf, &len);
  assert_int_equal(hvd__msg_decode(buf, len, CAPACITY, &out), 0);
  expect_same(&in, &out);
  hvd__msg_free(&out);
  hvd__msg_free(&in);
  free(buf);
}

/* ---- bits ---- */

static void test_bits(void **state) {
  (void)state;
  hvd_msg m;
  memset(&m, 0, sizeof m);
  assert_int_equal(hvd__msg_bit(&m, 0), 0);
  assert_int_equal(hvd__msg_set_bit(&m, 100), 0);
  assert_int_equal(m.nbits, 101);
  assert_int_equal(hvd__msg_set_bit(&m, 3), 0); /* below: no shrink */
  assert_int_equal(m.nbits, 101);
  assert_int_equal(hvd__msg_set_bit(&m, 3), 0); /* twice: still set */
  for (uint32_t i = 0; i < 200; i++) assert_int_equal(hvd__msg_bit(&m, i), i == 3 || i == 100);
  assert_int_equal(m.bits[0], 1u << 3); /* least significant bit first */
  assert_int_equal(hvd__msg_set_bit(&m, 8 * 1000 + 7), 0);
  assert_int_equal(m.nbits, 8008);
  assert_int_equal(hvd__msg_bit(&m, 8007), 1);
  assert_int_equal(hvd__msg_bit(&m, 100), 1);
  assert_int_equal(hvd__msg_set_bit(&m, UINT32_MAX), HVD_E_INVALID);
  hvd__msg_free(&m);
}

/* ---- encoding refuses what decoding would ---- */

static void test_encode_bad_names(void **state) {
  (void)state;
  hvd_msg m;
  uint8_t *buf = NULL;
  size_t len;
  sample(&m);
  m.reqs[1].name[0] = '\0';
  assert_int_equal(hvd__msg_encode(&m, &buf, &len), HVD_E_INVALID);
  assert_non_null(strstr(hvd_last_error(), "request 1"));
  memset(m.reqs[1].name, 'x', HVD_NAME_MAX); /* no NUL at all */
  assert_int_equal(hvd__msg_encode(&m, &buf, &len), HVD_E_INVALID);
  snprintf(m.reqs[1].name, HVD_NAME_MAX, "ok");
  m.fails[1][0] = '\0';
  assert_int_equal(hvd__msg_encode(&m, &buf, &len), HVD_E_INVALID);
  assert_non_null(strstr(hvd_last_error(), "failure 1"));
  assert_null(buf);
  hvd__msg_free(&m);
}

/* ---- decoding refuses every bad field ---- */

/* One request named "ab" with a shape of one dimension, no bits, no
 * failures: fixed offsets.  (Without a shape, everything after OFF_NDIMS
 * comes 8 bytes earlier.) */
enum {
  OFF_FLAGS = 0, OFF_NBITS = 4, OFF_NREQ = 8, OFF_NAME_LEN = 12, OFF_NAME = 14,
  OFF_TYPE = 16, OFF_DTYPE = 17, OFF_OP = 18, OFF_COUNT = 23, OFF_NDIMS = 31, OFF_SHAPE = 32,
  OFF_GROUP_SIZE = 60, OFF_GROUP_INDEX = 64, OFF_ON_DEVICE = 68, OFF_NFAIL = 69,
  ONE_REQ_LEN = 73
};

static void encode_one(hvd_request q, uint8_t **buf, size_t *len) {
  hvd_msg m;
  memset(&m, 0, sizeof m);
  m.nreq = 1;
  m.reqs = &q;
  encode(&m, buf, len);
  assert_int_equal(*len, ONE_REQ_LEN - 8 * (1 - (int)q.ndims));
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Encodes q, then overwrites one byte; decoding must fail naming `words`. */
static void expect_bad_byte(hvd_request q, size_t off, uint8_t v, const char *words) {
  uint8_t *buf;
  size_t len;
  encode_one(q, &buf, &len);
  buf[off] = v;
  expect_bad(buf, len, CAPACITY, words);
  free(buf);
}

static void test_decode_bad_fields(void **state) {
  (void)state;
  hvd_request ok = make("ab", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 10);
  expect_bad_byte(ok, OFF_TYPE, HVD_REQ__COUNT, "request 0 ('ab'): type");
  expect_bad_byte(ok, OFF_TYPE, 0xff, "request 0 ('ab'): type 255 is not a collective");
  expect_bad_byte(ok, OFF_DTYPE, 77, "request 0 ('ab'): dtype 77 is not a dtype");
  expect_bad_byte(ok, OFF_OP, 200, "request 0 ('ab'): op 200 is not an op");
  expect_bad_byte(ok, OFF_NAME + 1, 0, "request 0: name contains a NUL byte");
  expect_bad_byte(ok, OFF_FLAGS + 1, 1, "unknown flags 0x100");
  expect_bad_byte(ok, OFF_GROUP_INDEX, 1, "group index 1 is outside a group of 0");
  ok.group_size = 4;
  ok.group_index = 3;
  expect_bad_byte(ok, OFF_GROUP_INDEX, 4, "group index 4 is outside a group of 4");
  hvd_request gather = make("ab", HVD_REQ_ALLGATHER, HVD_FLOAT32, 0);
  expect_bad_byte(gather, OFF_COUNT, 3, "allgather count 3 is not 0");
  gather.type = HVD_REQ_ALLTOALL;
  expect_bad_byte(gather, OFF_COUNT + 7, 1, "alltoall count");
}

/* Host (0) or device memory (1: staged, 2: NCCL), and device memory only
 * for tensors. */
static void test_decode_device_memory(void **state) {
  (void)state;
  hvd_request ok = make("ab", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 10);
  expect_bad_byte(ok, OFF_ON_DEVICE, 3, "request 0 ('ab'): memory 3 is not 0, 1 or 2");
  hvd_request barrier = make("ab", HVD_REQ_BARRIER, HVD_UINT8, 0);
  expect_bad_byte(barrier, OFF_ON_DEVICE - 8, 1,
                  "request 0 ('ab'): a barrier has no tensor in device memory");
  for (uint8_t mem = HVD_MEM_STAGED; mem <= HVD_MEM_NCCL; mem++) {
    ok.on_device = mem;
    uint8_t *buf;
    size_t len;
    encode_one(ok, &buf, &len);
    assert_int_equal(buf[OFF_ON_DEVICE], mem);
    hvd_msg m;
    assert_int_equal(hvd__msg_decode(buf, len, CAPACITY, &m), 0);
    assert_int_equal(m.reqs[0].on_device, mem);
    hvd__msg_free(&m);
    free(buf);
  }
}

/* The autotuner's settings close the message: u64 fusion, u64 cycle
 * (IEEE bits), u8 cache, u8 hierarchical. */
static void expect_bad_settings(size_t from_end, const void *value, size_t n, const char *words) {
  hvd_msg m;
  sample(&m);
  uint8_t *buf;
  size_t len;
  encode(&m, &buf, &len);
  memcpy(buf + len - from_end, value, n);
  expect_bad(buf, len, CAPACITY, words);
  free(buf);
  hvd__msg_free(&m);
}

static void test_decode_bad_settings(void **state) {
  (void)state;
  uint64_t huge = (1ull << 40) + 1;
  double nan = NAN, negative = -1, slow = 1e5;
  uint8_t two = 2;
  expect_bad_settings(18, &huge, 8, "fusion threshold 1099511627777 bytes exceeds");
  expect_bad_settings(10, &nan, 8, "cycle time nan ms");
  expect_bad_settings(10, &negative, 8, "cycle time -1 ms");
  expect_bad_settings(10, &slow, 8, "cycle time 100000 ms");
  expect_bad_settings(2, &two, 1, "switches 2 and 0");
  expect_bad_settings(1, &two, 1, "switches 1 and 2");
}

static void test_decode_bad_shapes(void **state) {
  (void)state;
  hvd_request ok = make("ab", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 10);
  expect_bad_byte(ok, OFF_SHAPE, 11, "request 0 ('ab'): shape [11] holds 11 elements, not 10");
  expect_bad_byte(ok, OFF_SHAPE + 7, 0x80, "request 0 ('ab'): dimension 0 is -");
  ok.ndims = 2; /* [2, 5] */
  ok.shape[0] = 2;
  ok.shape[1] = 5;
  uint8_t *buf;
  size_t len;
  hvd_msg m = {.nreq = 1, .reqs = &ok}, out;
  encode(&m, &buf, &len);
  assert_int_equal(hvd__msg_decode(buf, len, CAPACITY, &out), 0);
  assert_int_equal(out.reqs[0].ndims, 2);
  assert_int_equal(out.reqs[0].shape[1], 5);
  hvd__msg_free(&out);
  buf[OFF_NDIMS] = 0; /* a reducing collective without a shape */
  expect_bad(buf, len - 16, CAPACITY, "0 dimensions (1 to 32)");
  buf[OFF_NDIMS] = 33;
  expect_bad(buf, len, CAPACITY, NULL);
  free(buf);
  /* the shape's size overflows 64 bits: [2^32, 2^32] */
  ok.shape[0] = ok.shape[1] = 1ll << 32;
  ok.count = 0;
  m.reqs = &ok;
  assert_int_equal(hvd__msg_encode(&m, &buf, &len), 0); /* encoding trusts the caller */
  expect_bad(buf, len, CAPACITY, "the shape's size overflows");
  free(buf);
  /* an allgather carries its dimensions after the first, the first 0 */
  hvd_request gather = make("ab", HVD_REQ_ALLGATHER, HVD_FLOAT32, 0);
  gather.ndims = 2;
  gather.shape[0] = 0;
  gather.shape[1] = 17;
  m.reqs = &gather;
  encode(&m, &buf, &len);
  assert_int_equal(hvd__msg_decode(buf, len, CAPACITY, &out), 0);
  assert_int_equal(out.reqs[0].ndims, 2);
  assert_int_equal(out.reqs[0].shape[1], 17);
  hvd__msg_free(&out);
  free(buf);
  gather.shape[0] = 3;
  encode(&m, &buf, &len);
  expect_bad(buf, len, CAPACITY, "request 0 ('ab'): dimension 0 is 3");
  free(buf);
  /* a barrier has no shape */
  hvd_request barrier = make("ab", HVD_REQ_BARRIER, HVD_FLOAT32, 0);
  barrier.ndims = 1;
  m.reqs = &barrier;
  encode(&m, &buf, &len);
  expect_bad(buf, len, CAPACITY, "barrier request with 1 dimensions");
  free(buf);
}

static void test_decode_bad_names(void **state) {
  (void)state;
  uint8_t *buf;
  size_t len;
  encode_one(make("ab", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 1), &buf, &len);
  buf[OFF_NAME_LEN] = 0; /* empty: refused before the length is used */
  expect_bad(buf, len, CAPACITY, "request 0: name is empty");
  free(buf);

  /* The longest name decodes; one byte longer is refused. */
  hvd_request q = make("", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 1);
  memset(q.name, 'n', HVD_NAME_MAX - 1);
  hvd_msg m, out;
  memset(&m, 0, sizeof m);
  m.nreq = 1;
  m.reqs = &q;
  encode(&m, &buf, &len);
  assert_int_equal(hvd__msg_decode(buf, len, 0, &out), 0);
  assert_int_equal(strlen(out.reqs[0].name), HVD_NAME_MAX - 1);
  hvd__msg_free(&out);
  uint8_t *longer = malloc(len + 1);
  memcpy(longer, buf, OFF_NAME);
  longer[OFF_NAME] = 'n';
  memcpy(longer + OFF_NAME + 1, buf + OFF_NAME, len - OFF_NAME);
  longer[OFF_NAME_LEN] = 0x00; /* 256, little-endian */
  longer[OFF_NAME_LEN + 1] = 0x01;
  expect_bad(longer, len + 1, CAPACITY, "name of 256 bytes exceeds 255");
  free(longer);
  free(buf);

  /* A failure's name has the same rules. */
  memset(&m, 0, sizeof m);
  char fails[1][HVD_NAME_MAX] = {"xy"};
  m.nfail = 1;
  m.fails = fails;
  encode(&m, &buf, &len);
  buf[len - 1] = 0;
  expect_bad(buf, len, CAPACITY, "failure 0: name contains a NUL byte");
  buf[len - 4] = 0; /* length 0 */
  expect_bad(buf, len, CAPACITY, "failure 0: name is empty");
  free(buf);
}

static void test_decode_bits(void **state) {
  (void)state;
  hvd_msg m, out;
  memset(&m, 0, sizeof m);
  assert_int_equal(hvd__msg_set_bit(&m, 99), 0);
  uint8_t *buf;
  size_t len;
  encode(&m, &buf, &len);
  assert_int_equal(hvd__msg_decode(buf, len, 100, &out), 0); /* exactly the capacity */
  hvd__msg_free(&out);
  expect_bad(buf, len, 99, "100 cache bits exceed the cache capacity 99");
  expect_bad(buf, len, 0, "cache capacity 0");
  buf[8 + 12] |= 0x10; /* bit 100, past nbits, in the last byte */
  expect_bad(buf, len, 1024, "cache bits past bit 100 are set");
  free(buf);

  buf = calloc(1, 16);
  put32(buf + OFF_NBITS, 0xffffffffu); /* a 512 MB lie */
  expect_bad(buf, 16, UINT32_MAX, "cache bits truncated");
  free(buf);
  hvd__msg_free(&m);
}

static void test_decode_lying_counts(void **state) {
  (void)state;
  uint8_t *buf;
  size_t len;
  encode_one(make("ab", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 1), &buf, &len);
  put32(buf + OFF_NREQ, 0xffffffffu);
  expect_bad(buf, len, CAPACITY, "4294967295 requests cannot fit in the 61 bytes left");
  put32(buf + OFF_NREQ, 2); /* small, but still more than could be present */
  expect_bad(buf, len, CAPACITY, "2 requests cannot fit in the 61 bytes left");
  put32(buf + OFF_NREQ, 1);
  put32(buf + OFF_NFAIL, 0x40000000u);
  expect_bad(buf, len, CAPACITY, "1073741824 failures cannot fit");
  put32(buf + OFF_NFAIL, 1);
  expect_bad(buf, len, CAPACITY, "1 failures cannot fit in the 0 bytes left");
  free(buf);
}

static void test_decode_truncated_everywhere(void **state) {
  (void)state;
  hvd_msg m;
  sample(&m);
  uint8_t *buf;
  size_t len;
  encode(&m, &buf, &len);
  for (size_t cut = 0; cut < len; cut++) {
    /* A fresh copy of exactly `cut` bytes, so ASan sees any overread. */
    uint8_t *part = malloc(cut ? cut : 1);
    memcpy(part, buf, cut);
    expect_bad(part, cut, CAPACITY, NULL);
    free(part);
  }
  expect_bad(buf, 0, CAPACITY, "truncated before the flags");
  free(buf);
  hvd__msg_free(&m);
}

static void test_decode_trailing_byte(void **state) {
  (void)state;
  hvd_msg m;
  sample(&m);
  uint8_t *buf;
  size_t len;
  encode(&m, &buf, &len);
  uint8_t *longer = malloc(len + 1);
  memcpy(longer, buf, len);
  longer[len] = 0;
  expect_bad(longer, len + 1, CAPACITY, "1 trailing bytes");
  free(longer);
  free(buf);
  hvd__msg_free(&m);
}

/* ---- random damage ---- */

static void mutate(uint8_t *p, size_t *len, size_t cap) {
  switch (rng_next(&gen) % 4) {
  case 0: /* flip a few bytes */
  case 1:
    for (int k = 1 + (int)(rng_next(&gen) % 4); k > 0; k--)
      p[rng_next(&gen) % *len] = (uint8_t)rng_next(&gen);
    break;
  case 2: /* a plausible small value in an aligned-ish field */
    p[rng_next(&gen) % *len] = (uint8_t)(rng_next(&gen) % 8);
    break;
  default: /* cut or extend */
    if (rng_next(&gen) % 2 || *len >= cap)
      *len = (size_t)(rng_next(&gen) % *len);
    else
      p[(*len)++] = (uint8_t)rng_next(&gen);
    break;
  }
}

static void test_fuzz(void **state) {
  (void)state;
  hvd_msg m;
  sample(&m);
  uint8_t *valid;
  size_t valid_len;
  encode(&m, &valid, &valid_len);
  hvd__msg_free(&m);

  int decoded = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t len = valid_len, cap = valid_len + 8;
    uint8_t *p = malloc(cap);
    memcpy(p, valid, len);
    mutate(p, &len, cap);
    /* Exactly len bytes, so ASan catches a read past the end. */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, p, len);
    int rc = hvd__msg_decode(exact, len, CAPACITY, &m);
    if (rc == 0) { /* still valid: its encoding is the input */
      uint8_t *again;
      size_t again_len;
      encode(&m, &again, &again_len);
      assert_int_equal(again_len, len);
      assert_memory_equal(again, exact, len);
      free(again);
      decoded++;
    } else {
      assert_int_equal(rc, HVD_E_PROTOCOL);
      expect_empty(&m);
    }
    hvd__msg_free(&m);
    free(exact);
    free(p);
  }
  assert_true(decoded > 0); /* some damage lands in names and scales */
  free(valid);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_round_trip_empty),
      cmocka_unit_test(test_round_trip_many_requests),
      cmocka_unit_test(test_bits),
      cmocka_unit_test(test_encode_bad_names),
      cmocka_unit_test(test_decode_bad_fields),
      cmocka_unit_test(test_decode_device_memory),
      cmocka_unit_test(test_decode_bad_settings),
      cmocka_unit_test(test_decode_bad_shapes),
      cmocka_unit_test(test_decode_bad_names),
      cmocka_unit_test(test_decode_bits),
      cmocka_unit_test(test_decode_lying_counts),
      cmocka_unit_test(test_decode_truncated_everywhere),
      cmocka_unit_test(test_decode_trailing_byte),
      cmocka_unit_test(test_fuzz),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
