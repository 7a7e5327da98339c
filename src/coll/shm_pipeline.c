/*
 * shm_pipeline.c -- the shm allreduce through windows of shared memory,
 * chunk by chunk, and the rank-order reduction that every way of the shm
 * allreduce shares (shm_allreduce.c chooses the way).
 *
 * Every rank has HVD_WINDOWS (3) windows in the shared segment
 * (transport.h).  The vector goes through them a chunk at a time, chunk c
 * in window c mod 3.  Rank r owns slice r of every chunk (hvd__split_*):
 *
 *   copy in chunk 0
 *   sync
 *   for each chunk c:
 *     reduce slice r of chunk c, reading every rank's window directly,
 *       and write the result over slice r of this rank's window
 *     copy in chunk c + 1
 *     sync
 *     copy out chunk c: every other rank's slice from its window
 *
 * "Copy in" copies every slice but this rank's own into its window: its
 * own values are read from its buffer while it reduces, and the result
 * goes straight back there, so its slice never goes through the window
 * on the way in or out.  Each byte is copied in once and out once and read
 * once by its reducer: from 3 ranks on fewer bytes moved than the ring's
 * 2(n - 1) steps through the byte rings (at 2 the same), and one sync per
 * chunk instead of 2(n - 1) messages.  Three windows are what lets one sync do: when a rank copies
 * chunk c + 1 in, the window's last contents (chunk c - 2) were read by
 * the other ranks before they reached the previous sync, which it has
 * passed.
 *
 * Bits: every element is reduced in the same order, rank 0's value first,
 * then rank 1's, ... rank n-1's, by one rank (or, in the shortcut, by
 * every rank the same way), and copied everywhere: the same bits on all
 * ranks, and the same bits whatever the element's position, chunk or
 * slice, so fusion changes nothing.  AVERAGE divides once, after the sum.
 * float16 and bfloat16 are reduced in float32 and rounded once at the
 * end (the ring rounds after every step: it never holds all the values).
 */
#include <string.h>

#include "reduce.h"
#include "shm_allreduce.h"

typedef hvd_shm_job job;

static int sync_all(job *j) { return hvd__shm_sync(j->c, &j->stamp); }

static unsigned char *window(const job *j, int rank, uint64_t chunk) {
  return hvd__shm_window(j->c, rank, chunk);
}

/* Half-precision values are all reduced in float32 and rounded once, at
 * the end: every rank's values are in reach at once here, unlike in the
 * ring, which must round after every step. */
static void widen(const job *j, float *dst, const void *src, size_t count) {
  if (j->dtype == HVD_FLOAT16) hvd__half_to_float_n(dst, src, count);
  else hvd__bf16_to_float_n(dst, src, count);
}

static void reduce_half(job *j, const void *const *src, size_t count, void *out) {
  float acc[HVD_SHM_REDUCE_BLOCK / 4], v[HVD_SHM_REDUCE_BLOCK / 4];
  widen(j, acc, src[0], count);
  for (int r = 1; r < j->c->size; r++) {
    widen(j, v, src[r], count);
    hvd__reduce(acc, v, count, HVD_FLOAT32, j->op);
  }
  if (j->op == HVD_AVERAGE) hvd__reduce_average(acc, count, HVD_FLOAT32, j->c->size);
  if (j->dtype == HVD_FLOAT16) hvd__float_to_half_n(out, acc, count);
  else hvd__float_to_bf16_n(out, acc, count);
}

void hvd__shm_reduce(job *j, const void *const *src, size_t n, void *acc) {
  size_t count = n / j->esize;
  if (j->dtype == HVD_FLOAT16 || j->dtype == HVD_BFLOAT16) {
    reduce_half(j, src, count, acc);
    return;
  }
  memcpy(acc, src[0], n);
  for (int r = 1; r < j->c->size; r++) hvd__reduce(acc, src[r], count, j->dtype, j->op);
  if (j->op == HVD_AVERAGE) hvd__reduce_average(acc, count, j->dtype, j->c->size);
}

void hvd__shm_reduce_window(job *j, uint64_t w, size_t off, size_t n, const void *own,
                            void *acc) {
  const void *src[HVD_SHM_MAX_RANKS];
  for (int r = 0; r < j->c->size; r++)
    src[r] = r == j->c->rank && own ? own : window(j, r, w) + off;
  hvd__shm_reduce(j, src, n, acc);
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Chunk k of the vector: its offset and length, and slice r's within it. */
typedef struct {
  size_t at, len;
} span;

static span chunk_span(const job *j, size_t k) {
  size_t at = k * j->chunk;
  return (span){at, min_size(j->total - at, j->chunk)};
}

static span slice_span(const job *j, span ch, int r) {
  size_t count = ch.len / j->esize;
  return (span){hvd__split_offset(count, j->c->size, r) * j->esize,
                hvd__split_count(count, j->c->size, r) * j->esize};
}

/* Every slice of chunk ch but this rank's into its window w. */
static void copy_in(job *j, span ch, uint64_t w) {
  unsigned char *win = window(j, j->c->rank, w);
  span me = slice_span(j, ch, j->c->rank);
  size_t after = me.at + me.len;
  hvd__pieces_gather(j->all, &j->in, ch.at, me.at, win);
  hvd__pieces_gather(j->all, &j->in, ch.at + after, ch.len - after, win + after);
}

/* This rank's slice of chunk ch (window w): its own values come straight
 * from its buffer, the result goes both there and into its window for the
 * others, a block at a time through L1. */
static void reduce_mine(job *j, span ch, uint64_t w) {
  unsigned char *win = window(j, j->c->rank, w);
  span me = slice_span(j, ch, j->c->rank);
  _Alignas(64) unsigned char own[HVD_SHM_REDUCE_BLOCK], acc[HVD_SHM_REDUCE_BLOCK];
  for (size_t b = me.at; b < me.at + me.len; b += j->block) {
    size_t n = min_size(me.at + me.len - b, j->block);
    hvd__pieces_gather(j->all, &j->mine, ch.at + b, n, own);
    hvd__shm_reduce_window(j, w, b, n, own, acc);
    memcpy(win + b, acc, n);
    hvd__pieces_scatter(j->all, &j->mine, ch.at + b, n, acc);
  }
}

/* Every other rank's reduced slice of chunk ch from its window w. */
static void copy_out(job *j, span ch, uint64_t w) {
  for (int r = 0; r < j->c->size; r++) {
    if (r == j->c->rank) continue;
    span s = slice_span(j, ch, r);
    hvd__pieces_scatter(j->all, &j->out, ch.at + s.at, s.len, window(j, r, w) + s.at);
  }
}

/* The schedule in the comment at the top. */
int hvd__shm_pipeline(job *j) {
  size_t chunks = (j->total + j->chunk - 1) / j->chunk;
  uint64_t w0 = hvd__shm_take_windows(j->c, chunks);
  copy_in(j, chunk_span(j, 0), w0);
  HVD__CHECK(sync_all(j));
  for (size_t k = 0; k < chunks; k++) {
    span ch = chunk_span(j, k);
    reduce_mine(j, ch, w0 + k);
    if (k + 1 < chunks) copy_in(j, chunk_span(j, k + 1), w0 + k + 1);
    HVD__CHECK(sync_all(j));
    copy_out(j, ch, w0 + k);
  }
  return 0;
}
