/*
 * shm_ring.h -- a single-producer, single-consumer byte ring, and messages
 * streamed through it.
 *
 * The ring lives in memory shared by two processes (or two threads): the
 * producer only ever writes `head`, the consumer only `tail`, both count
 * bytes since the start and never wrap, so head - tail is what the ring
 * holds.  Data is published with a release store of the counter and read
 * after an acquire load of it: no locks, no system calls.
 *
 * A message is a 16-byte header (magic, tag, length) and the payload,
 * moved as one byte stream: a message larger than the ring simply streams
 * through it while the consumer drains it, as over a socket.  The counters
 * come from another process that may be buggy, so every value read is
 * checked before it is used.
 */
#ifndef HVD_SHM_RING_H
#define HVD_SHM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HVD_RING_LINE 64       /* a cache line: the two counters never share one */
#define HVD_RING_MSG_HDR_LEN 16
#define HVD_RING_MSG_MAGIC 0x48564431u /* "HVD1" */

typedef struct {
  _Alignas(HVD_RING_LINE) _Atomic uint64_t head; /* bytes written (producer's) */
  _Alignas(HVD_RING_LINE) _Atomic uint64_t tail; /* bytes read (consumer's) */
  _Alignas(HVD_RING_LINE) unsigned char data[];  /* cap bytes, cap a power of two */
} hvd_ring;

/* Bytes a ring of `cap` data bytes takes, counters included. */
static inline size_t hvd__ring_bytes(size_t cap) {
  return sizeof(hvd_ring) + cap;
}

void hvd__ring_init(hvd_ring *r);

/* Copies up to n bytes in / out, as many as fit / are there now.  Bytes
 * moved, or -1 when the counters are impossible (head - tail > cap). */
long hvd__ring_write(hvd_ring *r, size_t cap, const void *src, size_t n);
long hvd__ring_read(hvd_ring *r, size_t cap, void *dst, size_t n);

/* Whether a write / read could move a byte now (-1 impossible counters
 * count as "yes", so the caller goes and finds the error). */
int hvd__ring_writable(hvd_ring *r, size_t cap);
int hvd__ring_readable(hvd_ring *r);

/* One message in flight, either way. */
typedef struct {
  uint8_t hdr[HVD_RING_MSG_HDR_LEN];
  uint8_t *payload;
  size_t len;  /* payload bytes: the length sent, or the length expected */
  size_t done; /* bytes moved so far, header included */
} hvd_ring_msg;

/* A message to send: encodes the header. */
void hvd__ring_msg_out(hvd_ring_msg *m, uint32_t tag, const void *payload, size_t len);
/* A message to receive into payload[0..len). */
void hvd__ring_msg_in(hvd_ring_msg *m, void *payload, size_t len);

static inline int hvd__ring_msg_done(const hvd_ring_msg *m) {
  return m->done == HVD_RING_MSG_HDR_LEN + m->len;
}
static inline size_t hvd__ring_msg_payload_done(const hvd_ring_msg *m) {
  return m->done > HVD_RING_MSG_HDR_LEN ? m->done - HVD_RING_MSG_HDR_LEN : 0;
}

/* Streams what fits now.  Bytes moved, or -1 (impossible counters). */
long hvd__ring_push(hvd_ring *r, size_t cap, hvd_ring_msg *m);

/* Streams what is there now.  It stops once the header is complete (done
 * == HVD_RING_MSG_HDR_LEN), so the caller can check it with
 * hvd__ring_msg_header() before asking for the payload.  Bytes moved, or
 * -1 (impossible counters). */
long hvd__ring_pull(hvd_ring *r, size_t cap, hvd_ring_msg *m);

/* The received header's tag and length; -1 if the magic is wrong. */
int hvd__ring_msg_header(const hvd_ring_msg *m, uint32_t *tag, uint64_t *len);

#endif /* HVD_SHM_RING_H */
