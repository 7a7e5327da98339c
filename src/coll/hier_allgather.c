/*
 * hier_allgather.c -- HOROVOD_HIERARCHICAL_ALLGATHER: an allgather whose
 * data crosses the network once per host.
 *
 * With C hosts of L ranks each (the sub-communicators hierarchical.c
 * builds: c->local, this host's ranks by local rank; c->cross, this local
 * rank's ranks by host):
 *
 *   1. allgather over the host: every rank of a host holds its host's
 *      blocks, in local rank order;
 *   2. the first rank of each host (local rank 0) allgathers, over its
 *      cross communicator, first every rank's count (L per host, the same
 *      size everywhere), then the hosts' blocks;
 *   3. it broadcasts the counts and the blocks to the rest of its host;
 *   4. every rank puts the blocks in rank order (c->hier_rank maps a
 *      (local rank, host) to its rank); where the ranks are numbered host
 *      by host, as hvdrun places them, they are in order already.
 *
 * Each host's data leaves it once (the flat Bruck allgather sends it
 * across host boundaries in log2(n) rounds, from every rank); within a
 * host it travels over shared memory.  Horovod's hierarchical allgather
 * (its MPI one) gathers within the host into shared memory and lets the
 * first rank of each host exchange across: the same shape.
 *
 * Counts crossing the network are checked before they size anything: a
 * host's blocks must be as long as its counts say (HVD_E_PROTOCOL).  A
 * failure on a sub-communicator breaks c (the caller's hvd__comm_fail),
 * which aborts the shared transport and with it every peer, so ranks
 * waiting in a later phase fail too rather than wait.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/frame.h"
#include "coll.h"

/* Phase 1's outcome on this host and phase 2's across hosts. */
typedef struct {
  int L, C;
  char *host;        /* this host's blocks, local rank order */
  size_t *hcounts;   /* [L] elements each */
  uint64_t *counts;  /* [C * L]: host h's local rank l at h * L + l */
  char *all;         /* every host's blocks, host by host */
  size_t total;      /* elements in all */
} gathered;

/* The counts of the host's ranks into the wire codec (little-endian). */
static void encode_counts(const size_t *counts, int L, uint8_t *out) {
  hvd_writer w = {.buf = out, .cap = (size_t)L * 8};
  for (int l = 0; l < L; l++) hvd__put_u64(&w, counts[l]);
}

static void decode_counts(const uint8_t *in, int n, uint64_t *counts) {
  hvd_reader r = {.buf = in, .len = (size_t)n * 8};
  for (int i = 0; i < n; i++) counts[i] = hvd__get_u64(&r);
}

/* Phase 2, on local rank 0: every host's counts, then their blocks, each
 * host's as long as its counts say. */
static int across(hvd_comm *c, gathered *g, size_t esize) {
  int L = g->L, C = g->C;
  size_t mine = 0, *got = calloc((size_t)C, sizeof *got);
  uint8_t *wire = malloc((size_t)C * (size_t)L * 8);
  int rc = got && wire ? 0 : hvd__err(HVD_E_NOMEM, "allocating the counts of %d hosts", C);
  for (int l = 0; l < L; l++) mine += g->hcounts[l];
  if (rc == 0) encode_counts(g->hcounts, L, wire + (size_t)c->cross->rank * (size_t)L * 8);
  if (rc == 0) rc = hvd__allgather_equal(c->cross, wire + (size_t)c->cross->rank * L * 8,
                                         (size_t)L * 8, wire);
  if (rc == 0) decode_counts(wire, C * L, g->counts);
  if (rc == 0) rc = hvd__allgather(c->cross, g->host, mine, esize, (void **)&g->all, got);
  for (int h = 0; rc == 0 && h < C; h++) {
    uint64_t want = 0;
    for (int l = 0; l < L; l++) want += g->counts[(size_t)h * L + l];
    if (want != got[h])
      rc = hvd__err(HVD_E_PROTOCOL, "hierarchical allgather: host %d sent %zu elements, its "
                    "counts say %llu", h, got[h], (unsigned long long)want);
    g->total += got[h];
  }
  free(got);
  free(wire);
  return rc;
}

/* Phase 3: local rank 0's counts and blocks to the rest of its host. */
static int within(hvd_comm *c, gathered *g, size_t esize) {
  int n = g->C * g->L;
  uint8_t *wire = malloc((size_t)n * 8);
  if (!wire) return hvd__err(HVD_E_NOMEM, "allocating the counts of %d ranks", n);
  hvd_writer w = {.buf = wire, .cap = (size_t)n * 8};
  for (int i = 0; i < n; i++) hvd__put_u64(&w, g->counts[i]);
  int rc = hvd__broadcast(c->local, wire, (size_t)n * 8, 0);
  if (rc == 0) decode_counts(wire, n, g->counts);
  free(wire);
  size_t *off = rc == 0 ? malloc((size_t)n * sizeof *off) : NULL;
  if (rc == 0 && !off) rc = hvd__err(HVD_E_NOMEM, "allocating the offsets of %d ranks", n);
  if (rc == 0) rc = hvd__place_blocks(g->counts, n, esize, off, &g->total);
  free(off);
  if (rc == 0 && c->local->rank != 0 && g->total) {
    g->all = malloc(g->total * esize);
    if (!g->all) rc = hvd__err(HVD_E_NOMEM, "allocating %zu bytes", g->total * esize);
  }
  if (rc == 0 && g->total) rc = hvd__broadcast(c->local, g->all, g->total * esize, 0);
  return rc;
}

/* Phase 4: the blocks in rank order, counts[] by rank.  *out is g->all
 * itself when the hosts hold consecutive ranks, else a new buffer. */
static int reorder(const hvd_comm *c, gathered *g, size_t esize, size_t *counts, char **out) {
  int L = g->L, C = g->C, n = L * C, in_order = 1;
  for (int h = 0; h < C; h++)
    for (int l = 0; l < L; l++) {
      int r = c->hier_rank[l * C + h];
      counts[r] = (size_t)g->counts[h * L + l];
      in_order &= r == h * L + l;
    }
  if (in_order || !g->total) return *out = g->all, g->all = NULL, 0;
  size_t *at = calloc((size_t)n + 1, sizeof *at);
  *out = malloc(g->total * esize);
  if (!at || !*out) {
    free(at);
    return hvd__err(HVD_E_NOMEM, "allocating %zu bytes", g->total * esize);
  }
  for (int r = 0; r < n; r++) at[r + 1] = at[r] + counts[r];
  const char *from = g->all;
  for (int h = 0; h < C; h++)
    for (int l = 0; l < L; l++) {
      int r = c->hier_rank[l * C + h];
      memcpy(*out + at[r] * esize, from, counts[r] * esize);
      from += counts[r] * esize;
    }
  free(at);
  return 0;
}

int hvd__hier_allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                        size_t *counts) {
  gathered g = {c->local->size, c->cross->size, NULL, NULL, NULL, NULL, 0};
  char *out = NULL;
  size_t *own = counts ? NULL : calloc((size_t)c->size, sizeof *own);
  g.hcounts = calloc((size_t)g.L, sizeof *g.hcounts);
  g.counts = calloc((size_t)g.L * (size_t)g.C, sizeof *g.counts);
  int rc = g.hcounts && g.counts && (counts || own)
               ? 0
               : hvd__err(HVD_E_NOMEM, "allocating %d counts", c->size);
  if (rc == 0) rc = hvd__allgather(c->local, sbuf, count, esize, (void **)&g.host, g.hcounts);
  if (rc == 0 && c->local->rank == 0) rc = across(c, &g, esize);
  if (rc == 0) rc = within(c, &g, esize);
  if (rc == 0) rc = reorder(c, &g, esize, counts ? counts : own, &out);
  free(own);
  free(g.host);
  free(g.hcounts);
  free(g.counts);
  free(g.all);
  if (rc < 0) return hvd__comm_fail(c, rc);
  *rbuf = out;
  return 0;
}

int hvd__allgather_tensor(hvd_comm *c, const void *sbuf, size_t count, size_t esize,
                          void **rbuf, size_t *counts) {
  if (c->hier_allgather && c->local && c->cross)
    return hvd__hier_allgather(c, sbuf, count, esize, rbuf, counts);
  return hvd__allgather(c, sbuf, count, esize, rbuf, counts);
}
