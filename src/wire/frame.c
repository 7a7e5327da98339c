/*
 * frame.c -- the 24-byte frame header and the payload codec (frame.h).
 *
 * Everything here reads bytes that came from the network, so every field
 * is checked before it is trusted and every read or write is bounds
 * checked.  Integers go through le.h.
 */
#include "frame.h"

#include <string.h>

#include "common.h"
#include "le.h"

/* ---- header ---- */

void hvd__frame_encode(const hvd_frame *f, uint8_t out[HVD_FRAME_HDR_LEN]) {
  memset(out, 0, HVD_FRAME_HDR_LEN); /* the reserved fields */
  hvd__le_store(out + 0, HVD_FRAME_MAGIC, 4);
  out[4] = HVD_FRAME_VERSION;
  out[5] = f->type;
  hvd__le_store(out + 8, f->tag, 4);
  hvd__le_store(out + 16, f->len, 8);
}

int hvd__frame_type_known(unsigned type) {
  switch (type) {
    case HVD_FRAME_DATA:
    case HVD_FRAME_ABORT:
    case HVD_FRAME_RDZV_REGISTER:
    case HVD_FRAME_RDZV_TABLE:
    case HVD_FRAME_RDZV_ERROR:
    case HVD_FRAME_RDZV_JOIN:
    case HVD_FRAME_RDZV_PLACE:
    case HVD_FRAME_RDZV_NOTICE:
      return 1;
    default:
      return 0;
  }
}

int hvd__frame_decode(const uint8_t in[HVD_FRAME_HDR_LEN], hvd_frame *f) {
  uint32_t magic = (uint32_t)hvd__le_load(in + 0, 4);
  if (magic != HVD_FRAME_MAGIC)
    return hvd__err(HVD_E_PROTOCOL,
                    "bad frame magic 0x%08x, expected 0x%08x (not an hvd peer, or the "
                    "stream is out of step)",
                    magic, HVD_FRAME_MAGIC);
  if (in[4] != HVD_FRAME_VERSION)
    return hvd__err(HVD_E_PROTOCOL, "frame version %u, this hvd speaks version %u",
                    in[4], HVD_FRAME_VERSION);
  if (!hvd__frame_type_known(in[5]))
    return hvd__err(HVD_E_PROTOCOL, "unknown frame type %u", in[5]);
  if (hvd__le_load(in + 6, 2) != 0 || hvd__le_load(in + 12, 4) != 0)
    return hvd__err(HVD_E_PROTOCOL, "nonzero reserved field in a frame header");
  f->type = in[5];
  f->tag = (uint32_t)hvd__le_load(in + 8, 4);
  f->len = hvd__le_load(in + 16, 8);
  return 0;
}

/* ---- writer ---- */

/* Reserves n bytes, or marks the writer failed.  NULL once failed. */
static uint8_t *writer_take(hvd_writer *w, size_t n) {
  if (w->failed || w->len > w->cap || n > w->cap - w->len) {
    w->failed = 1;
    return NULL;
  }
  uint8_t *p = w->buf + w->len;
  w->len += n;
  return p;
}

static void put_le(hvd_writer *w, uint64_t v, size_t n) {
  uint8_t *p = writer_take(w, n);
  if (p) hvd__le_store(p, v, n);
}

void hvd__put_u8(hvd_writer *w, uint8_t v) { put_le(w, v, 1); }
void hvd__put_u16(hvd_writer *w, uint16_t v) { put_le(w, v, 2); }
void hvd__put_u32(hvd_writer *w, uint32_t v) { put_le(w, v, 4); }
void hvd__put_u64(hvd_writer *w, uint64_t v) { put_le(w, v, 8); }

void hvd__put_bytes(hvd_writer *w, const void *p, size_t n) {
  uint8_t *dst = writer_take(w, n);
  if (dst && n) memcpy(dst, p, n);
}

void hvd__put_str(hvd_writer *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n > UINT16_MAX) {
    w->failed = 1;
    return;
  }
  hvd__put_u16(w, (uint16_t)n);
  uint8_t *p = writer_take(w, n);
  if (p && n) memcpy(p, s, n);
}

/* ---- reader ---- */

/* Consumes n bytes, or marks the reader failed.  NULL once failed. */
static const uint8_t *reader_take(hvd_reader *r, size_t n) {
  if (r->failed || r->pos > r->len || n > r->len - r->pos) {
    r->failed = 1;
    return NULL;
  }
  const uint8_t *p = r->buf + r->pos;
  r->pos += n;
  return p;
}

static uint64_t get_le(hvd_reader *r, size_t n) {
  const uint8_t *p = reader_take(r, n);
  return p ? hvd__le_load(p, n) : 0;
}

const uint8_t *hvd__get_bytes(hvd_reader *r, size_t n) { return reader_take(r, n); }
uint8_t hvd__get_u8(hvd_reader *r) { return (uint8_t)get_le(r, 1); }

uint16_t hvd__get_u16(hvd_reader *r) { return (uint16_t)get_le(r, 2); }
uint32_t hvd__get_u32(hvd_reader *r) { return (uint32_t)get_le(r, 4); }
uint64_t hvd__get_u64(hvd_reader *r) { return get_le(r, 8); }

void hvd__get_str(hvd_reader *r, char *out, size_t cap) {
  if (cap > 0) out[0] = '\0'; /* a failed read leaves an empty string, never garbage */
  size_t n = hvd__get_u16(r);
  if (r->failed) return;
  if (cap == 0 || n > cap - 1) {
    r->failed = 1;
    return;
  }
  const uint8_t *p = reader_take(r, n);
  if (!p) return;
  if (memchr(p, '\0', n)) { /* would silently truncate the string */
    r->failed = 1;
    return;
  }
  memcpy(out, p, n);
  out[n] = '\0';
}

int hvd__reader_done(const hvd_reader *r) { return !r->failed && r->pos == r->len; }
