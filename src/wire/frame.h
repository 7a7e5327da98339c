/*
 * frame.h -- the wire format every hvd connection speaks.
 *
 * Every message is a fixed 24-byte header followed by `len` payload bytes:
 *
 *   offset  size  field
 *        0     4  magic "HVDF" (0x46445648 little-endian)
 *        4     1  version (HVD_FRAME_VERSION)
 *        5     1  type (HVD_FRAME_*)
 *        6     2  reserved, must be 0
 *        8     4  tag: the collective's sequence number, so frames of two
 *                 different collectives can never be confused
 *       12     4  reserved, must be 0
 *       16     8  len: payload bytes that follow
 *
 * All integers little-endian.  A receiver always knows how many bytes it
 * expects; hvd__frame_decode rejects any header that is not well formed,
 * and the caller rejects a len other than the one it expects, so garbage
 * or a truncated/oversized frame becomes HVD_E_PROTOCOL, never a crash or
 * a giant allocation.
 *
 * hvd_writer / hvd_reader encode and decode payloads (integers and
 * length-prefixed strings) with bounds checks on every field.
 */
#ifndef HVD_FRAME_H
#define HVD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define HVD_FRAME_MAGIC 0x46445648u
#define HVD_FRAME_VERSION 1
#define HVD_FRAME_HDR_LEN 24
/* No control message is larger; data frames are bounded by what the
 * receiver expects instead. */
#define HVD_FRAME_CONTROL_MAX (1u << 20)

enum {
  HVD_FRAME_DATA = 1,     /* collective payload */
  HVD_FRAME_ABORT = 2,    /* the sender gives up: i32 lost rank, str reason */
  HVD_FRAME_RDZV_REGISTER = 16, /* rank -> hvdrun, see rdzv/rdzv.h */
  HVD_FRAME_RDZV_TABLE = 17,    /* hvdrun -> rank */
  HVD_FRAME_RDZV_ERROR = 18,    /* hvdrun -> rank: str reason */
  HVD_FRAME_RDZV_JOIN = 19,     /* elastic worker -> hvdrun (rdzv/rdzv_elastic.h) */
  HVD_FRAME_RDZV_PLACE = 20,    /* hvdrun -> elastic worker: its place in a job */
  HVD_FRAME_RDZV_NOTICE = 21    /* hvdrun -> elastic worker: hosts changed */
  /* 32..63: hvdrun and its agents on other hosts (launcher/agent_proto.h),
   * which decode their own headers of this layout: never a rank's frame. */
};

typedef struct {
  uint8_t type;
  uint32_t tag;
  uint64_t len;
} hvd_frame;

void hvd__frame_encode(const hvd_frame *f, uint8_t out[HVD_FRAME_HDR_LEN]);

/* Decodes and validates magic, version, type and reserved fields.
 * HVD_E_PROTOCOL with a message describing the first bad field. */
int hvd__frame_decode(const uint8_t in[HVD_FRAME_HDR_LEN], hvd_frame *f);

/* 1 for the types above, else 0. */
int hvd__frame_type_known(unsigned type);

/* ---- payload codec ----
 * Writers and readers never overrun: the first failing put/get sets
 * `failed` and every later one is a no-op; check `failed` once at the end. */
typedef struct {
  uint8_t *buf;
  size_t cap, len;
  int failed;
} hvd_writer;

typedef struct {
  const uint8_t *buf;
  size_t len, pos;
  int failed;
} hvd_reader;

void hvd__put_u8(hvd_writer *w, uint8_t v);
void hvd__put_u16(hvd_writer *w, uint16_t v);
void hvd__put_u32(hvd_writer *w, uint32_t v);
void hvd__put_u64(hvd_writer *w, uint64_t v);
/* u16 length, then the bytes (no NUL). */
void hvd__put_str(hvd_writer *w, const char *s);
/* n raw bytes, no length. */
void hvd__put_bytes(hvd_writer *w, const void *p, size_t n);

uint8_t hvd__get_u8(hvd_reader *r);
uint16_t hvd__get_u16(hvd_reader *r);
uint32_t hvd__get_u32(hvd_reader *r);
uint64_t hvd__get_u64(hvd_reader *r);
/* Reads a string written by hvd__put_str into out (NUL-terminated); fails
 * if it does not fit in cap-1 bytes or contains a NUL byte. */
void hvd__get_str(hvd_reader *r, char *out, size_t cap);
/* The next n raw bytes, in place; NULL (and failed) if fewer are left. */
const uint8_t *hvd__get_bytes(hvd_reader *r, size_t n);
/* 1 if every byte was consumed and nothing failed. */
int hvd__reader_done(const hvd_reader *r);

#endif /* HVD_FRAME_H */
