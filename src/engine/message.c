/*
 * message.c -- encoding and decoding a rank's negotiation message.
 *
 * The wire format is message.h's.  Every message we decode came from
 * another process over the network, so decoding trusts nothing: each
 * count is checked against the bytes actually present before anything is
 * allocated for it (a 4-byte lie cannot ask for gigabytes), each enum is
 * range-checked, each name is checked for length and NUL bytes, and a
 * failure names the field and the request it was in.  A decoded message
 * is therefore safe to index with (dtype, op, type) without further checks.
 *
 * Bits are packed least significant first: bit i is bits[i / 8] >> (i % 8).
 * The unused high bits of the last byte are zero, so each message has
 * exactly one encoding.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/message.h"
#include "reduce.h"
#include "wire/frame.h"

#define KNOWN_FLAGS (HVD_MSG_SHUTDOWN | HVD_MSG_JOINED | HVD_MSG_SETTINGS | \
                     HVD_MSG_JOIN_STALLED | HVD_MSG_BLOCKED | HVD_MSG_DESYNC)
#define SETTINGS_WIRE (8 + 8 + 1 + 1)

/* The wire size of a name (u16 length + bytes) and of a request. */
#define NAME_WIRE(len) (2 + (size_t)(len))
#define REQ_FIXED (1 + 1 + 1 + 4 + 8 + 1 + 8 + 8 + 4 + 4 + 4 + 1)
#define REQ_WIRE(len, ndims) (NAME_WIRE(len) + REQ_FIXED + 8 * (size_t)(ndims))

static size_t bit_bytes(uint32_t nbits) { return ((size_t)nbits + 7) / 8; }

/* Doubles travel as their IEEE bits, so every rank sees the same value. */
static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double bits_double(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static size_t bytes_left(const hvd_reader *r) { return r->failed ? 0 : r->len - r->pos; }

/* ---- encode ---- */

/* The name's length if it is a valid tensor name (1..HVD_NAME_MAX-1
 * bytes, NUL-terminated inside the array), else 0. */
static size_t name_len(const char name[HVD_NAME_MAX]) {
  size_t n = strnlen(name, HVD_NAME_MAX);
  return n < HVD_NAME_MAX ? n : 0;
}

/* Checks what we are about to send, so a bad name fails here with a clear
 * message rather than on every other rank as a protocol error; returns
 * the encoded size. */
static int encoded_size(const hvd_msg *m, size_t *size) {
  if (m->nbits && !m->bits) return hvd__err(HVD_E_INVALID, "message has %u bits but no bit array",
                                            (unsigned)m->nbits);
  if ((m->nreq && !m->reqs) || (m->nfail && !m->fails))
    return hvd__err(HVD_E_INVALID, "message has requests or failures but no array");
  size_t n = 4 + 4 + bit_bytes(m->nbits) + 4 + 4;
  for (uint32_t i = 0; i < m->nreq; i++) {
    size_t len = name_len(m->reqs[i].name);
    if (!len) return hvd__err(HVD_E_INVALID, "request %u: name is empty or too long", (unsigned)i);
    if (m->reqs[i].ndims > HVD_MAX_DIMS)
      return hvd__err(HVD_E_INVALID, "request %u: %u dimensions", (unsigned)i,
                      (unsigned)m->reqs[i].ndims);
    n += REQ_WIRE(len, m->reqs[i].ndims);
  }
  for (uint32_t i = 0; i < m->nfail; i++) {
    size_t len = name_len(m->fails[i]);
    if (!len) return hvd__err(HVD_E_INVALID, "failure %u: name is empty or too long", (unsigned)i);
    n += NAME_WIRE(len);
  }
  if (m->flags & HVD_MSG_SETTINGS) n += SETTINGS_WIRE;
  *size = n;
  return 0;
}

static void put_request(hvd_writer *w, const hvd_request *q) {
  hvd__put_str(w, q->name);
  hvd__put_u8(w, q->type);
  hvd__put_u8(w, q->dtype);
  hvd__put_u8(w, q->op);
  hvd__put_u32(w, (uint32_t)q->root);
  hvd__put_u64(w, q->count);
  hvd__put_u8(w, (uint8_t)q->ndims);
  for (uint32_t d = 0; d < q->ndims; d++) hvd__put_u64(w, (uint64_t)q->shape[d]);
  hvd__put_u64(w, double_bits(q->prescale));
  hvd__put_u64(w, double_bits(q->postscale));
  hvd__put_u32(w, (uint32_t)q->process_set);
  hvd__put_u32(w, q->group_size);
  hvd__put_u32(w, q->group_index);
  hvd__put_u8(w, q->on_device);
}

int hvd__msg_encode(const hvd_msg *m, uint8_t **buf, size_t *len) {
  size_t size = 0;
  HVD__CHECK(encoded_size(m, &size));
  uint8_t *out = malloc(size);
  if (!out) return hvd__err(HVD_E_NOMEM, "out of memory encoding a %zu-byte message", size);

  hvd_writer w = {.buf = out, .cap = size};
  hvd__put_u32(&w, m->flags);
  hvd__put_u32(&w, m->nbits);
  hvd__put_bytes(&w, m->bits, bit_bytes(m->nbits));
  hvd__put_u32(&w, m->nreq);
  for (uint32_t i = 0; i < m->nreq; i++) put_request(&w, &m->reqs[i]);
  hvd__put_u32(&w, m->nfail);
  for (uint32_t i = 0; i < m->nfail; i++) hvd__put_str(&w, m->fails[i]);
  if (m->flags & HVD_MSG_SETTINGS) {
    hvd__put_u64(&w, m->settings.fusion_bytes);
    hvd__put_u64(&w, double_bits(m->settings.cycle_ms));
    hvd__put_u8(&w, m->settings.cache_on);
    hvd__put_u8(&w, m->settings.hierarchical);
  }

  if (w.failed || w.len != size) { /* encoded_size and the puts disagree: our bug */
    free(out);
    return hvd__err(HVD_E_INVALID, "message encoding took %zu bytes, expected %zu", w.len, size);
  }
  *buf = out;
  *len = size;
  return 0;
}

/* ---- decode ---- */

/* Formats the reason into this thread's error; returns HVD_E_PROTOCOL. */
static int bad(const char *fmt, ...) HVD__PRINTF(1, 2);
static int bad(const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return hvd__err(HVD_E_PROTOCOL, "%s", why);
}

/* A name: u16 length, 1..HVD_NAME_MAX-1 bytes, no NUL.  `what` and `i`
 * say whose name it is ("request", 3). */
static int get_name(hvd_reader *r, char out[HVD_NAME_MAX], const char *what, uint32_t i) {
  uint16_t n = hvd__get_u16(r);
  if (r->failed) return bad("%s %u: truncated before its name", what, (unsigned)i);
  if (n == 0) return bad("%s %u: name is empty", what, (unsigned)i);
  if (n >= HVD_NAME_MAX)
    return bad("%s %u: name of %u bytes exceeds %d", what, (unsigned)i, (unsigned)n,
               HVD_NAME_MAX - 1);
  const uint8_t *p = hvd__get_bytes(r, n);
  if (!p) return bad("%s %u: name truncated", what, (unsigned)i);
  if (memchr(p, '\0', n)) return bad("%s %u: name contains a NUL byte", what, (unsigned)i);
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

/* A shape of the count for the collectives that have one, of rows for
 * allgather and alltoall, none for the others.  0, or -1 with why. */
static int shape_check(const hvd_request *q, char *why, size_t cap) {
  if (hvd__request_has_shape(q->type))
    return hvd__shape_check(q->shape, q->ndims, q->count, why, cap);
  if (hvd__request_has_rows(q->type)) return hvd__rows_check(q->shape, q->ndims, why, cap);
  if (q->ndims == 0) return 0;
  snprintf(why, cap, "%s request with %u dimensions", hvd__req_type_name(q->type),
           (unsigned)q->ndims);
  return -1;
}

/* The fields past the name, and the invariants request.h documents. */
static int get_request(hvd_reader *r, hvd_request *q, uint32_t i) {
  HVD__CHECK(get_name(r, q->name, "request", i));
  q->type = hvd__get_u8(r);
  q->dtype = hvd__get_u8(r);
  q->op = hvd__get_u8(r);
  q->root = (int32_t)hvd__get_u32(r);
  q->count = hvd__get_u64(r);
  q->ndims = hvd__get_u8(r);
  for (uint32_t d = 0; d < q->ndims && d < HVD_MAX_DIMS; d++)
    q->shape[d] = (int64_t)hvd__get_u64(r);
  q->prescale = bits_double(hvd__get_u64(r));
  q->postscale = bits_double(hvd__get_u64(r));
  q->process_set = (int32_t)hvd__get_u32(r);
  q->group_size = hvd__get_u32(r);
  q->group_index = hvd__get_u32(r);
  q->on_device = hvd__get_u8(r);
  char who[HVD_NAME_MAX + 32]; /* names the request in every complaint */
  snprintf(who, sizeof who, "request %u ('%s')", (unsigned)i, q->name);
  if (r->failed) return bad("%s: truncated", who);
  if (q->type >= HVD_REQ__COUNT)
    return bad("%s: type %u is not a collective", who, (unsigned)q->type);
  if (!hvd__dtype_valid(q->dtype)) return bad("%s: dtype %u is not a dtype", who, (unsigned)q->dtype);
  if (!hvd__op_valid(q->op)) return bad("%s: op %u is not an op", who, (unsigned)q->op);
  if ((q->type == HVD_REQ_ALLGATHER || q->type == HVD_REQ_ALLTOALL) && q->count != 0)
    return bad("%s: %s count %llu is not 0", who, hvd__req_type_name(q->type),
               (unsigned long long)q->count);
  char why[160];
  if (shape_check(q, why, sizeof why) < 0) return bad("%s: %s", who, why);
  if (q->group_size ? q->group_index >= q->group_size : q->group_index != 0)
    return bad("%s: group index %u is outside a group of %u", who, (unsigned)q->group_index,
               (unsigned)q->group_size);
  if (q->on_device > HVD_MEM_NCCL)
    return bad("%s: memory %u is not 0, 1 or 2", who, (unsigned)q->on_device);
  if (q->on_device && !hvd__request_moves_tensors(q->type))
    return bad("%s: a %s has no tensor in device memory", who, hvd__req_type_name(q->type));
  return 0;
}

static int get_bits(hvd_reader *r, uint32_t max_bits, hvd_msg *m) {
  uint32_t nbits = hvd__get_u32(r);
  if (r->failed) return bad("truncated before the cache bits");
  if (nbits > max_bits)
    return bad("%u cache bits exceed the cache capacity %u", (unsigned)nbits, (unsigned)max_bits);
  size_t n = bit_bytes(nbits);
  const uint8_t *p = hvd__get_bytes(r, n);
  if (!p) return bad("%u cache bits truncated", (unsigned)nbits);
  if (nbits % 8 && (p[n - 1] >> (nbits % 8)) != 0)
    return bad("cache bits past bit %u are set", (unsigned)nbits);
  if (n) {
    if (!(m->bits = malloc(n))) return hvd__err(HVD_E_NOMEM, "out of memory for cache bits");
    memcpy(m->bits, p, n);
  }
  m->nbits = nbits;
  return 0;
}

/* A count of items of at least `min_size` bytes each, refused if the
 * bytes left could not hold that many: only then is it safe to allocate. */
static int get_count(hvd_reader *r, size_t min_size, const char *what, uint32_t *count) {
  *count = hvd__get_u32(r);
  if (r->failed) return bad("truncated before the number of %s", what);
  if (*count > bytes_left(r) / min_size)
    return bad("%u %s cannot fit in the %zu bytes left", (unsigned)*count, what, bytes_left(r));
  return 0;
}

static int get_requests(hvd_reader *r, hvd_msg *m) {
  uint32_t n;
  HVD__CHECK(get_count(r, REQ_WIRE(1, 0), "requests", &n));
  if (n && !(m->reqs = calloc(n, sizeof *m->reqs)))
    return hvd__err(HVD_E_NOMEM, "out of memory for %u requests", (unsigned)n);
  for (m->nreq = 0; m->nreq < n; m->nreq++) HVD__CHECK(get_request(r, &m->reqs[m->nreq], m->nreq));
  return 0;
}

static int get_fails(hvd_reader *r, hvd_msg *m) {
  uint32_t n;
  HVD__CHECK(get_count(r, NAME_WIRE(1), "failures", &n));
  if (n && !(m->fails = calloc(n, sizeof *m->fails)))
    return hvd__err(HVD_E_NOMEM, "out of memory for %u failures", (unsigned)n);
  for (m->nfail = 0; m->nfail < n; m->nfail++)
    HVD__CHECK(get_name(r, m->fails[m->nfail], "failure", m->nfail));
  return 0;
}

static int get_settings(hvd_reader *r, hvd_msg_settings *s) {
  s->fusion_bytes = hvd__get_u64(r);
  s->cycle_ms = bits_double(hvd__get_u64(r));
  s->cache_on = hvd__get_u8(r);
  s->hierarchical = hvd__get_u8(r);
  if (r->failed) return bad("settings truncated");
  if (s->fusion_bytes > HVD_MSG_FUSION_MAX)
    return bad("settings: fusion threshold %llu bytes exceeds %llu",
               (unsigned long long)s->fusion_bytes, (unsigned long long)HVD_MSG_FUSION_MAX);
  if (!(s->cycle_ms >= 0 && s->cycle_ms <= HVD_MSG_CYCLE_MAX_MS))
    return bad("settings: cycle time %g ms is not from 0 to %g", s->cycle_ms,
               HVD_MSG_CYCLE_MAX_MS);
  if (s->cache_on > 1 || s->hierarchical > 1)
    return bad("settings: switches %u and %u are not 0 or 1", (unsigned)s->cache_on,
               (unsigned)s->hierarchical);
  return 0;
}

static int decode(hvd_reader *r, uint32_t max_bits, hvd_msg *m) {
  m->flags = hvd__get_u32(r);
  if (r->failed) return bad("truncated before the flags");
  if (m->flags & ~(uint32_t)KNOWN_FLAGS) return bad("unknown flags 0x%x", (unsigned)m->flags);
  HVD__CHECK(get_bits(r, max_bits, m));
  HVD__CHECK(get_requests(r, m));
  HVD__CHECK(get_fails(r, m));
  if (m->flags & HVD_MSG_SETTINGS) HVD__CHECK(get_settings(r, &m->settings));
  if (!hvd__reader_done(r)) return bad("%zu trailing bytes", bytes_left(r));
  return 0;
}

int hvd__msg_decode(const uint8_t *buf, size_t len, uint32_t max_bits, hvd_msg *m) {
  memset(m, 0, sizeof *m);
  hvd_reader r = {.buf = buf, .len = len};
  int rc = decode(&r, max_bits, m);
  if (rc < 0) hvd__msg_free(m);
  return rc;
}

void hvd__msg_free(hvd_msg *m) {
  free(m->bits);
  free(m->reqs);
  free(m->fails);
  memset(m, 0, sizeof *m);
}

/* ---- bits ---- */

int hvd__msg_bit(const hvd_msg *m, uint32_t i) {
  return i < m->nbits && m->bits && ((m->bits[i / 8] >> (i % 8)) & 1);
}

int hvd__msg_set_bit(hvd_msg *m, uint32_t i) {
  if (i == UINT32_MAX) return hvd__err(HVD_E_INVALID, "cache bit %u out of range", (unsigned)i);
  if (i >= m->nbits) {
    size_t have = bit_bytes(m->nbits), need = bit_bytes(i + 1);
    if (need > have) {
      uint8_t *grown = realloc(m->bits, need);
      if (!grown) return hvd__err(HVD_E_NOMEM, "out of memory for %u cache bits", (unsigned)i + 1);
      memset(grown + have, 0, need - have);
      m->bits = grown;
    }
    m->nbits = i + 1;
  }
  m->bits[i / 8] |= (uint8_t)(1u << (i % 8));
  return 0;
}
