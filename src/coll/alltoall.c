/*
 * alltoall.c -- pairwise-exchange alltoall with per-destination counts.
 *
 * Counts go first, so each rank can size its result and check every frame
 * against the count its sender announced.  Then at step s = 1..n-1 rank r
 * sends its block for rank r+s while receiving rank r-s's block for it:
 * every pair talks exactly once and no rank is ever idle.
 */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

typedef struct {
  uint64_t *mine, *theirs; /* counts sent to / received from each rank */
  size_t *soff, *roff;     /* element offsets of each block */
} plan;

static int make_plan(hvd_comm *c, const size_t *scounts, plan *p) {
  size_t n = (size_t)c->size;
  p->mine = calloc(n, sizeof *p->mine);
  p->theirs = calloc(n, sizeof *p->theirs);
  p->soff = calloc(n, sizeof *p->soff);
  p->roff = calloc(n, sizeof *p->roff);
  if (!p->mine || !p->theirs || !p->soff || !p->roff)
    return hvd__err(HVD_E_NOMEM, "allocating alltoall plan for %zu ranks", n);
  size_t off = 0;
  for (size_t i = 0; i < n; i++) p->mine[i] = scounts[i], p->soff[i] = off, off += scounts[i];
  return 0;
}

static void free_plan(plan *p) {
  free(p->mine);
  free(p->theirs);
  free(p->soff);
  free(p->roff);
}

static int alltoall_body(hvd_comm *c, uint32_t tag, const char *sbuf, const size_t *scounts,
                         size_t esize, plan *p, char **out) {
  int n = c->size, r = c->rank;
  size_t total;
  HVD__CHECK(make_plan(c, scounts, p));
  p->theirs[r] = p->mine[r];
  if (n > 1) HVD__CHECK(hvd__exchange_counts(c, tag, p->mine, p->theirs));
  HVD__CHECK(hvd__place_blocks(p->theirs, n, esize, p->roff, &total));
  if (total) {
    *out = malloc(total * esize);
    if (!*out) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes for the result", total * esize);
  }
  if (p->mine[r]) memcpy(*out + p->roff[r] * esize, sbuf + p->soff[r] * esize, p->mine[r] * esize);
  for (int s = 1; s < n; s++) {
    int to = (r + s) % n, from = (r - s + n) % n;
    HVD__CHECK(hvd__stream(c, tag, to, sbuf ? sbuf + p->soff[to] * esize : NULL,
                           (size_t)p->mine[to] * esize, from,
                           *out ? *out + p->roff[from] * esize : NULL,
                           (size_t)p->theirs[from] * esize, NULL));
  }
  return 0;
}

int hvd__alltoall(hvd_comm *c, const void *sbuf, const size_t *scounts, size_t esize,
                  void **rbuf, size_t *rcounts) {
  uint32_t tag;
  HVD__CHECK(hvd__comm_begin(c, &tag));
  plan p = {0};
  char *out = NULL;
  int rc = alltoall_body(c, tag, sbuf, scounts, esize, &p, &out);
  if (rc == 0) {
    for (int i = 0; rcounts && i < c->size; i++) rcounts[i] = (size_t)p.theirs[i];
    *rbuf = out;
  } else {
    free(out);
  }
  free_plan(&p);
  return rc < 0 ? hvd__comm_fail(c, rc) : 0;
}
