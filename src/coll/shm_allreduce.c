/*
 * shm_allreduce.c -- allreduce through shared memory, the algorithm for
 * jobs whose ranks share a host: which way a vector goes, and the ways
 * for small vectors.
 *
 *   at most HVD_SYNC_SMALL bytes   in the sync's own record: one cache
 *                                  line per rank to fetch, no window
 *   one chunk of at most           the shortcut: every rank copies its
 *   SHORTCUT_BYTES                 whole vector into a window, syncs, and
 *                                  reduces all of it itself: one sync, no
 *                                  second pass over the windows
 *   from peer_read_min bytes,      straight from the other ranks' buffers
 *   where the transport can read   (shm_direct.c)
 *   them
 *   otherwise                      the window pipeline (shm_pipeline.c)
 *
 * Every way reduces each element in rank order (hvd__shm_reduce), so a
 * vector gets the same bits whichever way it goes.  Every sync compares
 * what the ranks are doing (tag, bytes, dtype and op), so ranks that
 * disagree fail with a mismatch before reducing each other's garbage.  An
 * empty vector still makes one sync, so a rank with 0 elements cannot
 * leave its peers waiting.
 */
#include <string.h>

#include "shm_allreduce.h"

/* Vectors up to this size take the shortcut: below it, reducing n - 1
 * more slices costs less than the copy out and its pass over the windows. */
#define SHORTCUT_BYTES (16u * 1024u)

typedef hvd_shm_job job;

/* The whole vector in one chunk (w); every rank reduces all of it. */
static int shortcut(job *j, uint64_t w) {
  _Alignas(64) unsigned char acc[HVD_SHM_REDUCE_BLOCK];
  hvd__pieces_gather(j->all, &j->in, 0, j->total, hvd__shm_window(j->c, j->c->rank, w));
  HVD__CHECK(hvd__shm_sync(j->c, &j->stamp));
  for (size_t b = 0; b < j->total; b += j->block) {
    size_t n = j->total - b < j->block ? j->total - b : j->block;
    hvd__shm_reduce_window(j, w, b, n, NULL, acc);
    hvd__pieces_scatter(j->all, &j->out, b, n, acc);
  }
  return 0;
}

/* A vector of at most HVD_SYNC_SMALL bytes travels in the sync itself:
 * no window, and the values come in the line the ranks poll. */
static int small(job *j) {
  _Alignas(64) unsigned char mine[HVD_SYNC_SMALL], acc[HVD_SYNC_SMALL];
  const void *src[HVD_SHM_MAX_RANKS];
  hvd__pieces_gather(j->all, &j->in, 0, j->total, mine);
  HVD__CHECK(hvd__shm_sync_small(j->c, &j->stamp, mine, j->total));
  for (int r = 0; r < j->c->size; r++)
    src[r] = r == j->c->rank ? mine : hvd__shm_synced(j->c, r);
  hvd__shm_reduce(j, src, j->total, acc);
  hvd__pieces_scatter(j->all, &j->out, 0, j->total, acc);
  return 0;
}

int hvd__shm_allreduce(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype, hvd_op op) {
  size_t esize = hvd_dtype_size(dtype), total = hvd__pieces_len(all);
  job j = {.c = c, .all = all, .dtype = dtype, .op = op, .esize = esize,
           .total = total, .chunk = c->xport->window_bytes / esize * esize,
           .block = hvd__shm_block(dtype),
           .stamp = {tag, hvd__shm_kind(HVD_SHM_ALLREDUCE, dtype, op), total}};
  if (hvd__shm_small(c, total)) return small(&j);
  if (total <= SHORTCUT_BYTES && total <= j.chunk)
    return shortcut(&j, hvd__shm_take_windows(c, 1));
  if (c->xport->ops->caps.peer_read && total >= c->xport->peer_read_min) return hvd__shm_direct(&j);
  return hvd__shm_pipeline(&j);
}
