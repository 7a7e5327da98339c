/*
 * test_frame.c -- the frame header and the payload codec (frame.h).
 *
 * Everything frame.c decodes comes off the network, so besides round
 * trips these tests feed it every kind of malformed input: bad header
 * fields, truncated and oversized payloads, strings with NUL bytes, and a
 * few thousand random headers and payloads (run under ASan/UBSan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common.h"
#include "wire/frame.h"
#include "rng.h"

/* A small deterministic generator, so a failure replays. */
static rng gen = {0x9e3779b97f4a7c15ull};

static void fill_random(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_next(&gen);
}

static void encode_valid(uint8_t hdr[HVD_FRAME_HDR_LEN]) {
  hvd_frame f = {.type = HVD_FRAME_DATA, .tag = 7, .len = 100};
  hvd__frame_encode(&f, hdr);
}

/* ---- header ---- */

static void test_header_round_trip(void **state) {
  (void)state;
  static const uint8_t types[] = {HVD_FRAME_DATA, HVD_FRAME_ABORT, HVD_FRAME_RDZV_REGISTER,
                                  HVD_FRAME_RDZV_TABLE, HVD_FRAME_RDZV_ERROR};
  for (size_t i = 0; i < HVD__ARRAY_LEN(types); i++) {
    hvd_frame in = {.type = types[i], .tag = 0xdeadbeefu, .len = 0x0123456789abcdefull}, out;
    uint8_t hdr[HVD_FRAME_HDR_LEN];
    hvd__frame_encode(&in, hdr);
    assert_memory_equal(hdr, "HVDF", 4); /* the magic reads as text on the wire */
    assert_int_equal(hdr[4], HVD_FRAME_VERSION);
    assert_int_equal(hdr[8], 0xef); /* little-endian */
    assert_int_equal(hdr[16], 0xef);
    assert_int_equal(hdr[23], 0x01);
    assert_int_equal(hvd__frame_decode(hdr, &out), 0);
    assert_int_equal(out.type, in.type);
    assert_int_equal(out.tag, in.tag);
    assert_true(out.len == in.len);
  }
}

static void expect_bad_header(size_t offset, uint8_t value, const char *words) {
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  hvd_frame f;
  encode_valid(hdr);
  hdr[offset] = value;
  assert_int_equal(hvd__frame_decode(hdr, &f), HVD_E_PROTOCOL);
  assert_non_null(strstr(hvd_last_error(), words));
}

static void test_header_rejects(void **state) {
  (void)state;
  expect_bad_header(0, 'X', "magic");
  expect_bad_header(3, 0, "magic");
  expect_bad_header(4, HVD_FRAME_VERSION + 1, "version");
  expect_bad_header(4, 0, "version");
  expect_bad_header(5, 0, "unknown frame type 0");
  expect_bad_header(5, 3, "unknown frame type 3");
  expect_bad_header(5, 255, "unknown frame type 255");
  static const size_t reserved[] = {6, 7, 12, 13, 14, 15};
  for (size_t i = 0; i < HVD__ARRAY_LEN(reserved); i++)
    expect_bad_header(reserved[i], 1, "reserved");
}

static void test_type_known(void **state) {
  (void)state;
  int known = 0;
  for (unsigned t = 0; t < 1024; t++) known += hvd__frame_type_known(t);
  assert_int_equal(known, 8);
  assert_true(hvd__frame_type_known(HVD_FRAME_DATA));
  assert_true(hvd__frame_type_known(HVD_FRAME_RDZV_ERROR));
  assert_true(hvd__frame_type_known(HVD_FRAME_RDZV_NOTICE));
  assert_false(hvd__frame_type_known(HVD_FRAME_DATA + 256)); /* no truncation to a byte */
}

/* ---- payload codec ---- */

static void test_codec_round_trip(void **state) {
  (void)state;
  uint8_t buf[64];
  char s[16];
  hvd_writer w = {.buf = buf, .cap = sizeof buf};
  hvd__put_u16(&w, 0xbeef);
  hvd__put_u32(&w, 0xdeadbeefu);
  hvd__put_u64(&w, 0x0123456789abcdefull);
  hvd__put_str(&w, "hello");
  hvd__put_str(&w, "");
  assert_false(w.failed);
  assert_int_equal(w.len, 2 + 4 + 8 + 2 + 5 + 2);

  hvd_reader r = {.buf = buf, .len = w.len};
  assert_int_equal(hvd__get_u16(&r), 0xbeef);
  assert_int_equal(hvd__get_u32(&r), 0xdeadbeefu);
  assert_true(hvd__get_u64(&r) == 0x0123456789abcdefull);
  hvd__get_str(&r, s, sizeof s);
  assert_string_equal(s, "hello");
  assert_false(hvd__reader_done(&r)); /* the empty string is still there */
  hvd__get_str(&r, s, sizeof s);
  assert_string_equal(s, "");
  assert_true(hvd__reader_done(&r));
}

static void test_reader_truncated(void **state) {
  (void)state;
  uint8_t buf[32];
  char s[16];
  hvd_writer w = {.buf = buf, .cap = sizeof buf};
  hvd__put_u32(&w, 1);
  hvd__put_str(&w, "abcdef");
  hvd__put_u64(&w, 2);
  /* Every proper prefix of the message fails, and never reads past it. */
  for (size_t len = 0; len < w.len; len++) {
    hvd_reader r = {.buf = buf, .len = len};
    hvd__get_u32(&r);
    hvd__get_str(&r, s, sizeof s);
    hvd__get_u64(&r);
    assert_true(r.failed);
    assert_false(hvd__reader_done(&r));
    assert_true(r.pos <= len);
  }
}

static void test_reader_failure_sticks(void **state) {
  (void)state;
  const uint8_t buf[3] = {1, 2, 3};
  hvd_reader r = {.buf = buf, .len = sizeof buf};
  assert_int_equal(hvd__get_u32(&r), 0); /* too short: fails, returns 0 */
  assert_true(r.failed);
  assert_int_equal(hvd__get_u16(&r), 0); /* would fit, but the reader has failed */
  assert_int_equal(r.pos, 0);
}

static void test_reader_bad_strings(void **state) {
  (void)state;
  char s[8];
  /* Longer than the output (7 characters + NUL fit, 8 do not). */
  const uint8_t too_long[] = {8, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
  hvd_reader r = {.buf = too_long, .len = sizeof too_long};
  hvd__get_str(&r, s, sizeof s);
  assert_true(r.failed);
  assert_string_equal(s, "");

  const uint8_t fits[] = {7, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g'};
  r = (hvd_reader){.buf = fits, .len = sizeof fits};
  hvd__get_str(&r, s, sizeof s);
  assert_true(hvd__reader_done(&r));
  assert_string_equal(s, "abcdefg");

  /* A NUL inside would silently shorten the string. */
  const uint8_t nul[] = {3, 0, 'a', 0, 'b'};
  r = (hvd_reader){.buf = nul, .len = sizeof nul};
  hvd__get_str(&r, s, sizeof s);
  assert_true(r.failed);
  assert_string_equal(s, "");

  /* A length beyond the data. */
  const uint8_t short_data[] = {0xff, 0xff, 'a'};
  r = (hvd_reader){.buf = short_data, .len = sizeof short_data};
  hvd__get_str(&r, s, sizeof s);
  assert_true(r.failed);

  /* No room even for the NUL. */
  const uint8_t empty[] = {0, 0};
  r = (hvd_reader){.buf = empty, .len = sizeof empty};
  hvd__get_str(&r, s, 0);
  assert_true(r.failed);
}

static void test_reader_trailing_bytes(void **state) {
  (void)state;
  const uint8_t buf[] = {1, 0, 0, 0, 0xaa};
  hvd_reader r = {.buf = buf, .len = sizeof buf};
  assert_int_equal(hvd__get_u32(&r), 1);
  assert_false(r.failed);
  assert_false(hvd__reader_done(&r));
}

static void test_writer_overflow(void **state) {
  (void)state;
  uint8_t buf[6];
  hvd_writer w = {.buf = buf, .cap = sizeof buf};
  hvd__put_u32(&w, 1);
  hvd__put_u32(&w, 2); /* 8 > 6 */
  assert_true(w.failed);
  assert_int_equal(w.len, 4);
  hvd__put_u16(&w, 3); /* would fit, but the writer has failed */
  assert_int_equal(w.len, 4);

  w = (hvd_writer){.buf = buf, .cap = sizeof buf};
  hvd__put_str(&w, "abcde"); /* 2 + 5 > 6 */
  assert_true(w.failed);

  /* A string longer than a u16 can say. */
  static char huge[70000];
  memset(huge, 'x', sizeof huge - 1);
  static uint8_t big[80000];
  w = (hvd_writer){.buf = big, .cap = sizeof big};
  hvd__put_str(&w, huge);
  assert_true(w.failed);
  assert_int_equal(w.len, 0);

  /* No buffer at all. */
  w = (hvd_writer){.buf = NULL, .cap = 0};
  hvd__put_u16(&w, 1);
  assert_true(w.failed);
}

/* ---- fuzz ---- */

static void test_fuzz_headers(void **state) {
  (void)state;
  for (int i = 0; i < 20000; i++) {
    uint8_t hdr[HVD_FRAME_HDR_LEN], again[HVD_FRAME_HDR_LEN];
    hvd_frame f;
    if (i % 2) {
      fill_random(hdr, sizeof hdr);
    } else { /* a valid header with one byte changed gets further in */
      encode_valid(hdr);
      hdr[rng_next(&gen) % sizeof hdr] = (uint8_t)rng_next(&gen);
    }
    int rc = hvd__frame_decode(hdr, &f);
    if (rc == 0) { /* accepted: must be exactly what encode makes of it */
      hvd__frame_encode(&f, again);
      assert_memory_equal(again, hdr, sizeof hdr);
    } else {
      assert_int_equal(rc, HVD_E_PROTOCOL);
    }
  }
}

static void test_fuzz_reader(void **state) {
  (void)state;
  for (int i = 0; i < 20000; i++) {
    uint8_t buf[48];
    char s[12];
    size_t len = rng_next(&gen) % (sizeof buf + 1);
    fill_random(buf, len);
    if (len >= 2 && rng_next(&gen) % 2) buf[1] = 0; /* short strings are more interesting */
    /* Exactly len bytes on the heap, so ASan sees any overread. */
    uint8_t *exact = test_malloc(len ? len : 1);
    memcpy(exact, buf, len);
    hvd_reader r = {.buf = exact, .len = len};
    for (int op = 0; op < 6; op++) {
      switch (rng_next(&gen) % 4) {
        case 0: hvd__get_u16(&r); break;
        case 1: hvd__get_u32(&r); break;
        case 2: hvd__get_u64(&r); break;
        default:
          hvd__get_str(&r, s, 1 + rng_next(&gen) % sizeof s);
          assert_true(strlen(s) < sizeof s);
      }
      assert_true(r.pos <= r.len);
    }
    if (hvd__reader_done(&r)) assert_int_equal(r.pos, len);
    test_free(exact);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_round_trip), cmocka_unit_test(test_header_rejects),
      cmocka_unit_test(test_type_known),        cmocka_unit_test(test_codec_round_trip),
      cmocka_unit_test(test_reader_truncated),  cmocka_unit_test(test_reader_failure_sticks),
      cmocka_unit_test(test_reader_bad_strings), cmocka_unit_test(test_reader_trailing_bytes),
      cmocka_unit_test(test_writer_overflow),   cmocka_unit_test(test_fuzz_headers),
      cmocka_unit_test(test_fuzz_reader),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
