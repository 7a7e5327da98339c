/*
 * shm_windows.c -- what the collectives over shared-memory windows share
 * (shm_allreduce.c, the allgather's shortcut): whether a communicator has
 * windows, which window a chunk uses, and the sync with its check that
 * every rank runs the same collective.
 *
 * Windows are numbered by chunk across all collectives of the
 * communicator (c->shm_chunks), HVD_WINDOWS of them in turn.  The rule
 * every user keeps: what a rank writes into its window for a chunk, the
 * others read only after a later sync, and every chunk makes at least one
 * sync after its reads.  Then a window is never written while another
 * rank still reads its previous contents: by the time it comes round
 * again, HVD_WINDOWS - 1 syncs have passed since.
 */
#include <stdio.h>

#include "reduce.h"
#include "shm_allreduce.h"

int hvd__shm_usable(const hvd_comm *c) {
  /* Only the global communicator: the syncs are barriers of the whole
   * transport, which a process set's subset of ranks cannot be. */
  return c->xport && !c->members && c->xport->ops->caps.window && c->xport->ops->caps.sync &&
         c->xport->window_bytes >= HVD_SHM_WINDOW_MIN && c->size <= HVD_SHM_MAX_RANKS;
}

uint64_t hvd__shm_take_windows(hvd_comm *c, uint64_t chunks) {
  uint64_t first = c->shm_chunks;
  c->shm_chunks += chunks;
  return first;
}

unsigned char *hvd__shm_window(hvd_comm *c, int rank, uint64_t chunk) {
  return c->xport->ops->caps.window(c->xport, rank, (int)(chunk % HVD_WINDOWS));
}

/* "allreduce of float32 with sum" and the like, from a stamp's kind. */
static void describe(const hvd_sync_stamp *s, char *out, size_t cap) {
  unsigned what = s->kind >> 16, a = (s->kind >> 8) & 0xff, b = s->kind & 0xff;
  if (what == HVD_SHM_ALLREDUCE && hvd__dtype_valid((int)a) && hvd__op_valid((int)b))
    snprintf(out, cap, "allreduce of %llu bytes of %s with %s", (unsigned long long)s->bytes,
             hvd_dtype_name((hvd_dtype)a), hvd_op_name((hvd_op)b));
  else if (what == HVD_SHM_ALLGATHER)
    snprintf(out, cap, "allgather of %llu-byte elements", (unsigned long long)s->bytes);
  else
    snprintf(out, cap, "an unknown collective (kind %#x, %llu bytes)", s->kind,
             (unsigned long long)s->bytes);
}

int hvd__shm_small(const hvd_comm *c, size_t n) {
  return n <= HVD_SYNC_SMALL && c->xport->ops->caps.sync_small;
}

int hvd__shm_sync(hvd_comm *c, const hvd_sync_stamp *mine) {
  return hvd__shm_sync_small(c, mine, NULL, 0);
}

const unsigned char *hvd__shm_synced(hvd_comm *c, int rank) {
  return c->xport->ops->caps.synced(c->xport, rank);
}

int hvd__shm_sync_small(hvd_comm *c, const hvd_sync_stamp *mine, const void *small, size_t n) {
  hvd_sync_stamp odd;
  int rank = -1;
  const hvd_transport_caps *caps = &c->xport->ops->caps;
  c->steps++;
  int rc = caps->sync_small ? caps->sync_small(c->xport, mine, small, n, &odd, &rank)
                            : caps->sync(c->xport, mine, &odd, &rank);
  if (rc <= 0) return rc;
  char theirs[160], ours[160];
  describe(&odd, theirs, sizeof theirs);
  describe(mine, ours, sizeof ours);
  return hvd__err(HVD_E_MISMATCH,
                  "rank %d is at collective #%u, %s; this rank at #%u, %s (do all ranks call "
                  "the same collectives with the same counts, dtypes and ops?)",
                  rank, odd.tag, theirs, mine->tag, ours);
}
