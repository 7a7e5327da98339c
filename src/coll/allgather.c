/*
 * allgather.c -- ring allgather of blocks of different sizes.
 *
 * Counts are exchanged first, so every rank can size the result and
 * knows exactly how many bytes each frame must carry.  Then at step
 * s = 0..n-2 rank r passes block (r-s) mod n to its right neighbour and
 * receives block (r-s-1) mod n from its left one, straight into place.
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
  uint64_t *mine = counts + n; /* the caller allocated 2n */
  for (int i = 0; i < n; i++) mine[i] = count;
  counts[r] = count;
  if (n > 1 && hvd__shm_usable(c)) {
    HVD__CHECK(shm_gather(c, tag, sbuf, count, esize, counts, offsets, out, &done));
    if (done) return 0;
  } else if (n > 1) {
    HVD__CHECK(hvd__exchange_counts(c, tag, mine, counts));
  }
  HVD__CHECK(place(c, counts, esize, offsets, out));
  if (count) memcpy(*out + offsets[r] * esize, sbuf, count * esize);
  for (int s = 0; s < n - 1; s++) {
    int sb = mod(r - s, n), rb = mod(r - s - 1, n);
    HVD__CHECK(hvd__stream(c, tag, (r + 1) % n, *out ? *out + offsets[sb] * esize : NULL,
                           (size_t)counts[sb] * esize, (r - 1 + n) % n,
                           *out ? *out + offsets[rb] * esize : NULL, (size_t)counts[rb] * esize,
                           NULL));
  }
  return 0;
}

int hvd__allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                   size_t *counts) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  uint64_t *all = calloc(2 * (size_t)c->size, sizeof *all);
  size_t *offsets = calloc((size_t)c->size, sizeof *offsets);
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
