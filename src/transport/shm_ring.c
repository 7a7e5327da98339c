/*
 * shm_ring.c -- the byte ring and its message streams (shm_ring.h).
 */
#include "shm_ring.h"

#include <string.h>

#include "wire/le.h"

void hvd__ring_init(hvd_ring *r) {
  atomic_init(&r->head, 0);
  atomic_init(&r->tail, 0);
}

/* Copies n bytes at ring position pos (mod cap), in two pieces at the end. */
static void copy_in(hvd_ring *r, size_t cap, uint64_t pos, const uint8_t *src, size_t n) {
  size_t at = (size_t)(pos & (cap - 1)), first = cap - at < n ? cap - at : n;
  memcpy(r->data + at, src, first);
  memcpy(r->data, src + first, n - first);
}

static void copy_out(const hvd_ring *r, size_t cap, uint64_t pos, uint8_t *dst, size_t n) {
  size_t at = (size_t)(pos & (cap - 1)), first = cap - at < n ? cap - at : n;
  memcpy(dst, r->data + at, first);
  memcpy(dst + first, r->data, n - first);
}

long hvd__ring_write(hvd_ring *r, size_t cap, const void *src, size_t n) {
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed); /* ours */
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  if (head - tail > cap) return -1;
  size_t room = cap - (size_t)(head - tail);
  if (n > room) n = room;
  if (n == 0) return 0;
  copy_in(r, cap, head, src, n);
  atomic_store_explicit(&r->head, head + n, memory_order_release);
  return (long)n;
}

long hvd__ring_read(hvd_ring *r, size_t cap, void *dst, size_t n) {
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed); /* ours */
  uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  if (head - tail > cap) return -1;
  size_t have = (size_t)(head - tail);
  if (n > have) n = have;
  if (n == 0) return 0;
  copy_out(r, cap, tail, dst, n);
  atomic_store_explicit(&r->tail, tail + n, memory_order_release);
  return (long)n;
}

int hvd__ring_writable(hvd_ring *r, size_t cap) {
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  return head - tail != cap;
}

int hvd__ring_readable(hvd_ring *r) {
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  return head != tail;
}

void hvd__ring_msg_out(hvd_ring_msg *m, uint32_t tag, const void *payload, size_t len) {
  uint64_t n = len;
  hvd__le_store32(m->hdr, HVD_RING_MSG_MAGIC);
  hvd__le_store32(m->hdr + 4, tag);
  hvd__le_store32(m->hdr + 8, (uint32_t)n);
  hvd__le_store32(m->hdr + 12, (uint32_t)(n >> 32));
  m->payload = (uint8_t *)(uintptr_t)payload; /* only ever read from */
  m->len = len;
  m->done = 0;
}

void hvd__ring_msg_in(hvd_ring_msg *m, void *payload, size_t len) {
  memset(m->hdr, 0, sizeof m->hdr);
  m->payload = payload;
  m->len = len;
  m->done = 0;
}

int hvd__ring_msg_header(const hvd_ring_msg *m, uint32_t *tag, uint64_t *len) {
  if (hvd__le_load32(m->hdr) != HVD_RING_MSG_MAGIC) return -1;
  *tag = hvd__le_load32(m->hdr + 4);
  *len = hvd__le_load32(m->hdr + 8) | (uint64_t)hvd__le_load32(m->hdr + 12) << 32;
  return 0;
}

long hvd__ring_push(hvd_ring *r, size_t cap, hvd_ring_msg *m) {
  long moved = 0, n;
  if (m->done < HVD_RING_MSG_HDR_LEN) {
    n = hvd__ring_write(r, cap, m->hdr + m->done, HVD_RING_MSG_HDR_LEN - m->done);
    if (n < 0) return -1;
    m->done += (size_t)n;
    moved += n;
    if (m->done < HVD_RING_MSG_HDR_LEN) return moved;
  }
  size_t off = hvd__ring_msg_payload_done(m);
  n = hvd__ring_write(r, cap, m->payload + off, m->len - off);
  if (n < 0) return -1;
  m->done += (size_t)n;
  return moved + n;
}

long hvd__ring_pull(hvd_ring *r, size_t cap, hvd_ring_msg *m) {
  long n;
  if (m->done < HVD_RING_MSG_HDR_LEN) {
    n = hvd__ring_read(r, cap, m->hdr + m->done, HVD_RING_MSG_HDR_LEN - m->done);
  } else {
    size_t off = hvd__ring_msg_payload_done(m);
    n = hvd__ring_read(r, cap, m->payload + off, m->len - off);
  }
  if (n < 0) return -1;
  m->done += (size_t)n;
  return n;
}
