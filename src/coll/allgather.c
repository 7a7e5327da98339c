/*
 * allgather.c -- ring allgather of blocks of different sizes.
 *
 * Counts are exchanged first, so every rank can size the result and
 * knows exactly how many bytes each frame must carry.  Then at step
 * s = 0..n-2 rank r passes block (r-s) mod n to its right neighbour and
 * receives block (r-s-1) mod n from its left one, straight into place.
 */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

static int allgather_body(hvd_comm *c, uint32_t tag, const void *sbuf, size_t count,
                          size_t esize, uint64_t *counts, size_t *offsets, char **out) {
  int n = c->size, r = c->rank;
  size_t total;
  uint64_t *mine = counts + n; /* the caller allocated 2n */
  for (int i = 0; i < n; i++) mine[i] = count;
  counts[r] = count;
  if (n > 1) HVD__CHECK(hvd__exchange_counts(c, tag, mine, counts));
  HVD__CHECK(hvd__place_blocks(counts, n, esize, offsets, &total));
  if (total) {
    *out = malloc(total * esize);
    if (!*out) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes for the result", total * esize);
  }
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
