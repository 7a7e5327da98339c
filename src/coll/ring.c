/*
 * ring.c -- what every algorithm shares: the ring's partition of a buffer,
 * chunked streaming between two peers, and the exchange of counts.
 */
#include <string.h>

#include "../reduce.h"
#include "coll.h"

size_t hvd__split_count(size_t count, int n, int i) {
  size_t un = (size_t)n, ui = (size_t)i;
  return count / un + (ui < count % un ? 1 : 0);
}

size_t hvd__split_offset(size_t count, int n, int i) {
  size_t un = (size_t)n, ui = (size_t)i, rem = count % un;
  return ui * (count / un) + (ui < rem ? ui : rem);
}

/* Frames a message of len bytes needs: an empty message is still one
 * (empty) frame, so both ends always agree on how many frames to expect
 * and a count mismatch surfaces as a size mismatch at the first frame. */
static size_t chunks_for(size_t len, size_t chunk) {
  return len == 0 ? 1 : (len + chunk - 1) / chunk;
}

static size_t piece(size_t len, size_t chunk, size_t k) {
  size_t off = k * chunk;
  return off >= len ? 0 : (len - off < chunk ? len - off : chunk);
}

int hvd__stream(hvd_comm *c, uint32_t tag, int to, const void *sbuf, size_t slen, int from,
                void *rbuf, size_t rlen, const hvd_recv_mode *mode) {
  int reduce = mode && mode->reduce;
  size_t esize = reduce ? hvd_dtype_size(mode->dtype) : 1;
  size_t chunk = HVD_CHUNK_BYTES / esize * esize;
  size_t ns = to >= 0 ? chunks_for(slen, chunk) : 0;
  size_t nr = from >= 0 ? chunks_for(rlen, chunk) : 0;
  const char *s = sbuf;
  char *r = rbuf;

  for (size_t k = 0; k < ns || k < nr; k++) {
    int peer_to = k < ns ? to : -1, peer_from = k < nr ? from : -1;
    size_t sl = k < ns ? piece(slen, chunk, k) : 0;
    size_t rl = k < nr ? piece(rlen, chunk, k) : 0;
    void *dst = reduce ? c->scratch : (void *)(r ? r + k * chunk : NULL);
    HVD__CHECK(hvd__comm_sendrecv(c, peer_to, s ? s + k * chunk : NULL, sl, peer_from,
                             rl ? dst : NULL, rl, tag));
    if (reduce && rl)
      hvd__reduce(r + k * chunk, c->scratch, rl / esize, mode->dtype, mode->op);
  }
  return 0;
}

static void put_u64le(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

int hvd__exchange_counts(hvd_comm *c, uint32_t tag, const uint64_t *mine, uint64_t *theirs) {
  int n = c->size, r = c->rank;
  theirs[r] = mine[r];
  for (int s = 1; s < n; s++) {
    int to = (r + s) % n, from = (r - s + n) % n;
    uint8_t out[8], in[8];
    put_u64le(out, mine[to]);
    HVD__CHECK(hvd__comm_sendrecv(c, to, out, sizeof out, from, in, sizeof in, tag));
    theirs[from] = get_u64le(in);
  }
  return 0;
}

int hvd__place_blocks(const uint64_t *counts, int n, size_t esize, size_t *offsets,
                      size_t *total) {
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    if (counts[i] > SIZE_MAX / esize || sum > SIZE_MAX / esize - counts[i])
      return hvd__err(HVD_E_PROTOCOL, "rank %d announced %llu elements: the total overflows", i,
                      (unsigned long long)counts[i]);
    offsets[i] = (size_t)sum;
    sum += counts[i];
  }
  *total = (size_t)sum;
  return 0;
}
