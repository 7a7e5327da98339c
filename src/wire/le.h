/*
 * le.h -- little-endian integers in byte buffers: the one codec behind
 * every hvd byte format (frame headers, the HMAC handshake, rendezvous
 * messages, the shm ring's message header, count exchanges, checkpoints).
 *
 * Header-only and free of the rest of hvd (only <stdint.h>), so that
 * libhvd_nn, which sits above hvd.h and links nothing of libhvd's
 * internals, uses the same code.  Integers are assembled byte by byte:
 * the format is little-endian whatever the host is, and no unaligned
 * access happens.
 */
#ifndef HVD_WIRE_LE_H
#define HVD_WIRE_LE_H

#include <stddef.h>
#include <stdint.h>

/* The low n bytes of v (n <= 8) to p[0..n), least significant first. */
static inline void hvd__le_store(uint8_t *p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* n bytes (n <= 8) from p, least significant first. */
static inline uint64_t hvd__le_load(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static inline void hvd__le_store32(uint8_t *p, uint32_t v) { hvd__le_store(p, v, 4); }
static inline void hvd__le_store64(uint8_t *p, uint64_t v) { hvd__le_store(p, v, 8); }
static inline uint32_t hvd__le_load32(const uint8_t *p) { return (uint32_t)hvd__le_load(p, 4); }
static inline uint64_t hvd__le_load64(const uint8_t *p) { return hvd__le_load(p, 8); }

#endif /* HVD_WIRE_LE_H */
