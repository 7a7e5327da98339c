/*
 * fuzz_frame.c -- the frame header and the payload codec (wire/frame.h),
 * which every hvd connection reads.
 *
 * Input: a 24-byte header, then one byte k, k bytes of a read script,
 * and the payload the script reads.  Properties:
 *   - a header that decodes re-encodes to the very same 24 bytes, and
 *     one that does not leaves a message;
 *   - each read stays inside the payload, a failed reader stays failed,
 *     strings come out NUL-terminated within their buffer;
 *   - what the script read, written back with the writer, is exactly the
 *     bytes it consumed (one encoding per value).
 */
#include "fuzz.h"
#include "wire/frame.h"

#define STR_CAP_MAX 64

static void check_header(const uint8_t *hdr) {
  hvd_frame f;
  int rc = hvd__frame_decode(hdr, &f);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  uint8_t again[HVD_FRAME_HDR_LEN];
  hvd__frame_encode(&f, again);
  FUZZ_CHECK(hvd__frame_type_known(f.type));
  FUZZ_CHECK(memcmp(again, hdr, HVD_FRAME_HDR_LEN) == 0);
}

/* An integer of n bytes, echoed if it was there. */
static void echo_int(hvd_reader *r, hvd_writer *w, size_t n) {
  uint64_t v = n == 1 ? hvd__get_u8(r) : n == 2 ? hvd__get_u16(r)
             : n == 4 ? hvd__get_u32(r) : hvd__get_u64(r);
  if (r->failed) {
    FUZZ_CHECK(v == 0);
    return;
  }
  if (n == 1) hvd__put_u8(w, (uint8_t)v);
  else if (n == 2) hvd__put_u16(w, (uint16_t)v);
  else if (n == 4) hvd__put_u32(w, (uint32_t)v);
  else hvd__put_u64(w, v);
}

/* Runs one step of the script on r and echoes what it read into w. */
static void step(uint8_t op, hvd_reader *r, hvd_writer *w) {
  size_t before = r->pos;
  int was_failed = r->failed;
  size_t arg = op >> 3;
  switch (op & 7) {
    case 0: echo_int(r, w, 1); break;
    case 1: echo_int(r, w, 2); break;
    case 2: echo_int(r, w, 4); break;
    case 3: echo_int(r, w, 8); break;
    case 4:
    case 5: { /* a string into a buffer of 1..32 (or none: cap 0 must fail) */
      char s[STR_CAP_MAX];
      size_t cap = (op & 7) == 4 ? arg + 1 : 0;
      memset(s, 'x', sizeof s);
      hvd__get_str(r, s, cap);
      if (cap > 0) FUZZ_CHECK(memchr(s, '\0', cap) != NULL);
      if (!r->failed) hvd__put_str(w, s);
      break;
    }
    case 6: {
      const uint8_t *p = hvd__get_bytes(r, arg);
      FUZZ_CHECK(!p == !!r->failed);
      if (p) {
        FUZZ_CHECK(p >= r->buf && p + arg <= r->buf + r->len);
        hvd__put_bytes(w, p, arg);
      }
      break;
    }
    default: (void)hvd__reader_done(r); break;
  }
  FUZZ_CHECK(r->pos <= r->len);
  if (was_failed) FUZZ_CHECK(r->failed && r->pos == before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HVD_FRAME_HDR_LEN) return 0;
  check_header(data);
  fuzz_input in = {data + HVD_FRAME_HDR_LEN, size - HVD_FRAME_HDR_LEN};
  size_t k = fuzz_take_u8(&in);
  if (k > in.n) k = in.n;
  const uint8_t *script = in.p;
  hvd_reader r = {in.p + k, in.n - k, 0, 0};
  uint8_t *echo = malloc(r.len + 1);
  if (!echo) return 0;
  hvd_writer w = {echo, r.len, 0, 0};
  size_t good = 0; /* bytes consumed by the steps that succeeded */
  for (size_t i = 0; i < k; i++) {
    step(script[i], &r, &w);
    if (!r.failed) good = r.pos;
  }
  /* Every value read came back as its bytes, so the writer never ran out. */
  FUZZ_CHECK(!w.failed);
  FUZZ_CHECK(w.len == good);
  FUZZ_CHECK(memcmp(echo, r.buf, good) == 0);
  FUZZ_CHECK(hvd__reader_done(&r) == (!r.failed && r.pos == r.len));
  free(echo);
  return 0;
}
