/*
 * ring.c -- what every algorithm shares: the ring's partition of a buffer,
 * chunked streaming between two peers, the ring's two phases over a
 * buffer's segments (the ring allreduce and reduce-scatter in allreduce.c
 * and the hierarchical allreduce run them; allreduce.c says how), and the
 * exchange of counts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "wire/le.h"
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

static size_t chunk_len(size_t len, size_t chunk, size_t k) {
  size_t off = k * chunk;
  return off >= len ? 0 : (len - off < chunk ? len - off : chunk);
}

size_t hvd__pieces_len(hvd_pieces ps) {
  size_t len = 0;
  for (int i = 0; i < ps.n; i++) len += ps.p[i].len;
  return len;
}

typedef hvd_cursor cursor;

hvd_pieces hvd__pieces_sub(hvd_pieces ps, size_t off, size_t len, hvd_piece *out) {
  int k = 0;
  size_t base = 0;
  for (int i = 0; i < ps.n && len > 0; base += ps.p[i++].len) {
    if (base + ps.p[i].len <= off) continue;
    size_t start = off > base ? off - base : 0;
    size_t n = ps.p[i].len - start < len ? ps.p[i].len - start : len;
    out[k++] = (hvd_piece){ps.p[i].ptr + start, n};
    off += n;
    len -= n;
  }
  return (hvd_pieces){out, k};
}

/* Moves the cursor to the piece holding logical byte off. */
static void advance(hvd_pieces ps, cursor *cu, size_t off) {
  while (cu->i < ps.n && cu->base + ps.p[cu->i].len <= off) cu->base += ps.p[cu->i++].len;
}

/* Calls fn on each span of the pieces that overlaps logical bytes
 * [off, off + len), in order; `at` is the span's offset within that range. */
typedef void span_fn(char *piece, size_t len, size_t at, void *ctx);

static void for_spans(hvd_pieces ps, cursor *cu, size_t off, size_t len, span_fn *fn, void *ctx) {
  advance(ps, cu, off);
  size_t done = 0, start = off - cu->base;
  for (int i = cu->i; done < len && i < ps.n; i++, start = 0) {
    size_t n = ps.p[i].len - start < len - done ? ps.p[i].len - start : len - done;
    if (n) fn(ps.p[i].ptr + start, n, done, ctx);
    done += n;
  }
}

char *hvd__pieces_whole(hvd_pieces ps, hvd_cursor *cu, size_t off, size_t len) {
  advance(ps, cu, off);
  if (cu->i >= ps.n) return NULL;
  size_t start = off - cu->base;
  return start + len <= ps.p[cu->i].len ? ps.p[cu->i].ptr + start : NULL;
}

static void gather_span(char *piece, size_t len, size_t at, void *ctx) {
  memcpy((char *)ctx + at, piece, len);
}

static void scatter_span(char *piece, size_t len, size_t at, void *ctx) {
  memcpy(piece, (const char *)ctx + at, len);
}

void hvd__pieces_gather(hvd_pieces ps, hvd_cursor *cu, size_t off, size_t len, void *dst) {
  for_spans(ps, cu, off, len, gather_span, dst);
}

void hvd__pieces_scatter(hvd_pieces ps, hvd_cursor *cu, size_t off, size_t len,
                         const void *src) {
  for_spans(ps, cu, off, len, scatter_span, (void *)(uintptr_t)src);
}

typedef struct {
  char *src; /* the received chunk, in c->scratch */
  const hvd_recv_mode *mode;
  size_t esize;
} reduce_ctx;

/* With theirs_first the result forms in the scratch (the received
 * operand, on the left) and is copied over the piece. */
static void reduce_span(char *piece, size_t len, size_t at, void *ctx) {
  const reduce_ctx *r = ctx;
  if (r->mode->theirs_first) {
    hvd__reduce(r->src + at, piece, len / r->esize, r->mode->dtype, r->mode->op);
    memcpy(piece, r->src + at, len);
  } else {
    hvd__reduce(piece, r->src + at, len / r->esize, r->mode->dtype, r->mode->op);
  }
}

/* The bytes to send for chunk k: straight from the piece when it holds the
 * whole chunk, else gathered into the staging buffer. */
static const char *send_chunk(hvd_comm *c, hvd_pieces ps, cursor *cu, size_t off, size_t len) {
  if (!len) return NULL;
  char *p = hvd__pieces_whole(ps, cu, off, len);
  if (p) return p;
  for_spans(ps, cu, off, len, gather_span, c->staging);
  return c->staging;
}

int hvd__stream_pieces(hvd_comm *c, uint32_t tag, int to, hvd_pieces s, int from, hvd_pieces r,
                       const hvd_recv_mode *mode) {
  int reduce = mode && mode->reduce;
  size_t esize = reduce ? hvd_dtype_size(mode->dtype) : 1;
  size_t chunk = HVD_CHUNK_BYTES / esize * esize;
  size_t slen = hvd__pieces_len(s), rlen = hvd__pieces_len(r);
  size_t ns = to >= 0 ? chunks_for(slen, chunk) : 0;
  size_t nr = from >= 0 ? chunks_for(rlen, chunk) : 0;
  cursor sc = {0, 0}, rc = {0, 0};
  reduce_ctx rctx = {c->scratch, mode, esize};

  for (size_t k = 0; k < ns || k < nr; k++) {
    size_t sl = k < ns ? chunk_len(slen, chunk, k) : 0;
    size_t rl = k < nr ? chunk_len(rlen, chunk, k) : 0;
    const char *src = send_chunk(c, s, &sc, k * chunk, sl);
    /* Receive in place unless the chunk is reduced or crosses pieces. */
    char *dst = rl && !reduce ? hvd__pieces_whole(r, &rc, k * chunk, rl) : NULL;
    char *into = dst ? dst : rl ? c->scratch : NULL;
    HVD__CHECK(hvd__comm_sendrecv(c, k < ns ? to : -1, src, sl, k < nr ? from : -1, into, rl,
                                  tag));
    if (rl && reduce) for_spans(r, &rc, k * chunk, rl, reduce_span, &rctx);
    else if (rl && !dst) for_spans(r, &rc, k * chunk, rl, scatter_span, c->scratch);
  }
  return 0;
}

int hvd__stream(hvd_comm *c, uint32_t tag, int to, const void *sbuf, size_t slen, int from,
                void *rbuf, size_t rlen, const hvd_recv_mode *mode) {
  hvd_piece sp = {(char *)sbuf, slen}, rp = {rbuf, rlen};
  hvd_pieces s = {&sp, sbuf || slen ? 1 : 0}, r = {&rp, rbuf || rlen ? 1 : 0};
  return hvd__stream_pieces(c, tag, to, s, from, r, mode);
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

int hvd__ring_reduce_scatter(hvd_comm *c, uint32_t tag, const hvd_pieces *segs,
                             hvd_dtype dtype, hvd_op op, int divisor) {
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
  hvd_recv_mode mode = {1, dtype, op, 0};
  for (int s = 0; s < n - 1; s++)
    HVD__CHECK(hvd__stream_pieces(c, tag, right, segs[mod(r - s - 1, n)], left,
                                  segs[mod(r - s - 2, n)], &mode));
  if (op == HVD_AVERAGE && divisor > 0)
    for (int i = 0; i < segs[r].n; i++)
      hvd__reduce_average(segs[r].p[i].ptr, segs[r].p[i].len / hvd_dtype_size(dtype), dtype,
                          divisor);
  return 0;
}

int hvd__ring_allgather(hvd_comm *c, uint32_t tag, const hvd_pieces *segs) {
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int s = 0; s < n - 1; s++)
    HVD__CHECK(hvd__stream_pieces(c, tag, right, segs[mod(r - s, n)], left,
                                  segs[mod(r - s - 1, n)], NULL));
  return 0;
}

int hvd__pieces_concat(const hvd_pieces *segs, int n, hvd_piece **flat, hvd_pieces *all) {
  int k = 0;
  for (int s = 0; s < n; s++) k += segs[s].n;
  *flat = malloc((size_t)(k ? k : 1) * sizeof **flat);
  if (!*flat) return hvd__err(HVD_E_NOMEM, "allocating %d pieces", k);
  for (int s = 0, i = 0; s < n; s++)
    for (int j = 0; j < segs[s].n; j++) (*flat)[i++] = segs[s].p[j];
  *all = (hvd_pieces){*flat, k};
  return 0;
}

int hvd__exchange_counts(hvd_comm *c, uint32_t tag, const uint64_t *mine, uint64_t *theirs) {
  int n = c->size, r = c->rank;
  theirs[r] = mine[r];
  for (int s = 1; s < n; s++) {
    int to = (r + s) % n, from = (r - s + n) % n;
    uint8_t out[8], in[8];
    hvd__le_store64(out, mine[to]);
    HVD__CHECK(hvd__comm_sendrecv(c, to, out, sizeof out, from, in, sizeof in, tag));
    theirs[from] = hvd__le_load64(in);
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
