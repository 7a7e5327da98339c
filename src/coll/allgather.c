/*
 * allgather.c -- allgather of blocks of different sizes, by Bruck's
 * algorithm.
 *
 * Counts are gathered first, so every rank can size the result and knows
 * exactly how many bytes each frame must carry.  Then in round k, with
 * d = 2^k, rank r, which holds blocks r .. r+d-1 (mod n), sends them to
 * rank r - d and receives blocks r+d .. r+2d-1 from rank r + d, straight
 * into place (the last round only what is missing).  ceil(log2 n) rounds
 * where the ring takes n - 1, for the same bytes: each rank receives every
 * block but its own once.  The counts travel the same way, 8 bytes a
 * block.
 *
 * On shared memory (hvd__shm_usable) the counts go through the windows
 * instead, with the blocks themselves when every one fits a window: one
 * sync in place of the 2(n - 1) steps, which is what the engine's
 * negotiation (an allgather every cycle) costs at small sizes.
 */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Blocks first .. first+m-1 (mod n) of buf, laid out back to back in rank
 * order (off/len in bytes): one piece, or two where they wrap. */
static hvd_pieces run_of(char *buf, const size_t *off, const size_t *len, int n, int first,
                         int m, hvd_piece *room) {
  int k = 0;
  while (m > 0) {
    int take = first + m <= n ? m : n - first;
    size_t end = off[first + take - 1] + len[first + take - 1];
    room[k++] = (hvd_piece){buf ? buf + off[first] : NULL, end - off[first]};
    m -= take;
    first = 0;
  }
  return (hvd_pieces){room, k};
}

/* Bruck's rounds over buf, which holds this rank's block in place. */
static int bruck(hvd_comm *c, uint32_t tag, char *buf, const size_t *off, const size_t *len) {
  int n = c->size, r = c->rank;
  for (int d = 1; d < n; d *= 2) {
    int m = d < n - d ? d : n - d;
    hvd_piece sp[2], rp[2];
    hvd_pieces s = run_of(buf, off, len, n, r, m, sp);
    hvd_pieces got = run_of(buf, off, len, n, (r + d) % n, m, rp);
    HVD__CHECK(hvd__stream_pieces(c, tag, mod(r - d, n), s, (r + d) % n, got, NULL));
  }
  return 0;
}

/* Every rank's count into counts[], 8 bytes a block. */
static int gather_counts(hvd_comm *c, uint32_t tag, uint64_t *counts, size_t *off, size_t *len) {
  for (int i = 0; i < c->size; i++) {
    off[i] = (size_t)i * sizeof *counts;
    len[i] = sizeof *counts;
  }
  return bruck(c, tag, (char *)counts, off, len);
}

static int place(hvd_comm *c, const uint64_t *counts, size_t esize, size_t *offsets,
                 char **out) {
  size_t total;
  HVD__CHECK(hvd__place_blocks(counts, c->size, esize, offsets, &total));
  if (total) {
    *out = malloc(total * esize);
    if (!*out) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes for the result", total * esize);
  }
  return 0;
}

/* A window holds a count and, if it fits, the block after it. */
static int fits(const hvd_comm *c, uint64_t count, size_t esize) {
  size_t room = (c->xport->window_bytes - sizeof(uint64_t)) / esize;
  return count <= room;
}

/* Through the windows: every rank's count, and when every block fits,
 * the result (*done = 1).  Counts are read from memory other processes
 * wrote: hvd__place_blocks checks what they add up to. */
static int shm_gather(hvd_comm *c, uint32_t tag, const void *sbuf, size_t count, size_t esize,
                      uint64_t *counts, size_t *offsets, char **out, int *done) {
  uint64_t w = hvd__shm_take_windows(c, 1), mine = count;
  unsigned char *win = hvd__shm_window(c, c->rank, w);
  hvd_sync_stamp stamp = {tag, hvd__shm_kind(HVD_SHM_ALLGATHER, 0, 0), esize};
  memcpy(win, &mine, sizeof mine);
  if (fits(c, mine, esize) && count) memcpy(win + sizeof mine, sbuf, count * esize);
  HVD__CHECK(hvd__shm_sync(c, &stamp));
  int all_fit = 1;
  for (int i = 0; i < c->size; i++) {
    memcpy(&counts[i], hvd__shm_window(c, i, w), sizeof counts[i]);
    all_fit &= fits(c, counts[i], esize);
  }
  if (!all_fit) return 0;
  HVD__CHECK(place(c, counts, esize, offsets, out));
  for (int i = 0; i < c->size; i++)
    if (counts[i])
      memcpy(*out + offsets[i] * esize, hvd__shm_window(c, i, w) + sizeof mine,
             (size_t)counts[i] * esize);
  *done = 1;
  return 0;
}

static int allgather_body(hvd_comm *c, uint32_t tag, const void *sbuf, size_t count,
                          size_t esize, uint64_t *counts, size_t *offsets, char **out) {
  int n = c->size, r = c->rank, done = 0;
  size_t *off = offsets + n, *len = offsets + 2 * n; /* the caller allocated 3n */
  counts[r] = count;
  if (n > 1 && hvd__shm_usable(c)) {
    HVD__CHECK(shm_gather(c, tag, sbuf, count, esize, counts, offsets, out, &done));
    if (done) return 0;
  } else if (n > 1) {
    HVD__CHECK(gather_counts(c, tag, counts, off, len));
  }
  HVD__CHECK(place(c, counts, esize, offsets, out));
  if (count) memcpy(*out + offsets[r] * esize, sbuf, count * esize);
  for (int i = 0; i < n; i++) {
    off[i] = offsets[i] * esize;
    len[i] = (size_t)counts[i] * esize;
  }
  return n > 1 ? bruck(c, tag, *out, off, len) : 0;
}

int hvd__allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                   size_t *counts) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  uint64_t *all = calloc((size_t)c->size, sizeof *all);
  size_t *offsets = calloc(3 * (size_t)c->size, sizeof *offsets);
  char *out = NULL;
  int rc = (all && offsets) ? allgather_body(c, tag, sbuf, count, esize, all, offsets, &out)
                            : hvd__err(HVD_E_NOMEM, "allocating %d counts", c->size);
  if (rc == 0) {
    for (int i = 0; counts && i < c->size; i++) counts[i] = (size_t)all[i];
    *rbuf = out;
  } else {
    free(out);
  }
  free(all);
  free(offsets);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}

/* Blocks of the same size everywhere: no counts to exchange.  On shared
 * memory one sync through the windows when a block fits one. */
static int equal_body(hvd_comm *c, uint32_t tag, size_t bytes, char *rbuf) {
  int n = c->size, shm = hvd__shm_usable(c);
  hvd_sync_stamp stamp = {tag, hvd__shm_kind(HVD_SHM_ALLGATHER, 0, 0), bytes};
  if (shm && hvd__shm_small(c, bytes)) { /* in the sync itself */
    HVD__CHECK(hvd__shm_sync_small(c, &stamp, rbuf + (size_t)c->rank * bytes, bytes));
    for (int i = 0; i < n; i++)
      if (i != c->rank) memcpy(rbuf + (size_t)i * bytes, hvd__shm_synced(c, i), bytes);
    return 0;
  }
  if (shm && bytes <= c->xport->window_bytes) {
    uint64_t w = hvd__shm_take_windows(c, 1);
    memcpy(hvd__shm_window(c, c->rank, w), rbuf + (size_t)c->rank * bytes, bytes);
    HVD__CHECK(hvd__shm_sync(c, &stamp));
    for (int i = 0; i < n; i++)
      if (i != c->rank) memcpy(rbuf + (size_t)i * bytes, hvd__shm_window(c, i, w), bytes);
    return 0;
  }
  size_t *off = malloc(2 * (size_t)n * sizeof *off), *len = off + n;
  if (!off) return hvd__err(HVD_E_NOMEM, "allocating %d offsets", n);
  for (int i = 0; i < n; i++) off[i] = (size_t)i * bytes, len[i] = bytes;
  int rc = bruck(c, tag, rbuf, off, len);
  free(off);
  return rc;
}

int hvd__allgather_equal(hvd_comm *c, const void *sbuf, size_t bytes, void *rbuf) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  char *own = (char *)rbuf + (size_t)c->rank * bytes;
  if (bytes && own != sbuf) memcpy(own, sbuf, bytes);
  int rc = c->size > 1 ? equal_body(c, tag, bytes, rbuf) : 0;
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
