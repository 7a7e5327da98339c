/*
 * shm_direct.c -- the shm allreduce straight from the other ranks'
 * buffers, where the transport can read them (peer_read: Linux's
 * process_vm_readv, probed at setup).
 *
 * The vector is cut into one slice per rank (hvd__split_*), as in the
 * window pipeline, and rank r reduces slice r:
 *
 *   write this rank's pieces (where the vector lies) into its window
 *   sync                                                          1
 *   for each block of slice r: read every other rank's block, reduce in
 *     rank order, write the result over this rank's own block
 *   sync                                                          2
 *   read every other rank's reduced slice straight into this rank's
 *     buffer
 *   sync                                                          3
 *
 * Each byte crosses between processes once on the way to its reducer and
 * once on the way back, copied by the kernel, where the windows copy it in
 * and out on each side; and three syncs in all instead of one per chunk.
 * The last sync keeps every rank inside until nobody reads its buffer.
 *
 * The same reduction (hvd__shm_reduce, rank order) as the window
 * pipeline: the same bits.  A rank whose pieces do not fit its window
 * says so in it, and then every rank, having read every window after the
 * first sync, takes the window pipeline instead.
 */
#include <stdlib.h>
#include <string.h>

#include "shm_allreduce.h"

/* Bytes of a slice read from each rank at a time: a few system calls per
 * MiB, while the blocks of all ranks stay in the caches. */
#define READ_BLOCK (128u * 1024u)
#define GATHER_BLOCK (1024u * 1024u)
#define OVERFLOW UINT64_MAX

typedef hvd_shm_job job;

/* What every rank published, and what this rank needs to read it. */
typedef struct {
  hvd_piece *pieces[HVD_SHM_MAX_RANKS]; /* rank q's pieces, its addresses */
  int n[HVD_SHM_MAX_RANKS];
  struct iovec *local, *remote; /* room for any rank's pieces */
  hvd_piece *sub;
  unsigned char *stage;         /* READ_BLOCK per rank */
} peers;

static size_t room(const job *j) { return (j->c->xport->window_bytes - 8) / 16; }

static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Count, then (address, length) for each piece. */
static void publish(job *j, unsigned char *win) {
  if ((size_t)j->all.n > room(j)) {
    put_u64(win, OVERFLOW);
    return;
  }
  put_u64(win, (uint64_t)j->all.n);
  for (int i = 0; i < j->all.n; i++) {
    put_u64(win + 8 + 16 * (size_t)i, (uint64_t)(uintptr_t)j->all.p[i].ptr);
    put_u64(win + 16 + 16 * (size_t)i, (uint64_t)j->all.p[i].len);
  }
}

/* Rank q's pieces from its window, checked (another process wrote them):
 * their lengths must add up to the vector.  1 if q's did not fit. */
static int collect_one(job *j, peers *ps, int q, const unsigned char *win) {
  uint64_t n = get_u64(win), sum = 0;
  if (n == OVERFLOW) return 1;
  if (n > room(j))
    return hvd__err(HVD_E_PROTOCOL, "rank %d published %llu pieces (at most %zu)", q,
                    (unsigned long long)n, room(j));
  ps->pieces[q] = malloc((n ? n : 1) * sizeof *ps->pieces[q]);
  if (!ps->pieces[q]) return hvd__err(HVD_E_NOMEM, "allocating %llu pieces", (unsigned long long)n);
  ps->n[q] = (int)n;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t addr = get_u64(win + 8 + 16 * i), len = get_u64(win + 16 + 16 * i);
    if (len > j->total - sum)
      return hvd__err(HVD_E_PROTOCOL, "rank %d's pieces add up to more than %zu bytes", q,
                      j->total);
    sum += len;
    ps->pieces[q][i] = (hvd_piece){(char *)(uintptr_t)addr, (size_t)len};
  }
  if (sum != j->total)
    return hvd__err(HVD_E_PROTOCOL, "rank %d's pieces hold %llu bytes, not %zu", q,
                    (unsigned long long)sum, j->total);
  return 0;
}

/* Every other rank's pieces; *overflow when some rank's did not fit. */
static int collect(job *j, peers *ps, uint64_t w, int *overflow) {
  int most = j->all.n, rc = 0;
  *overflow = (size_t)j->all.n > room(j); /* what the others see in our window */
  for (int q = 0; rc == 0 && q < j->c->size; q++) {
    if (q == j->c->rank) continue;
    rc = collect_one(j, ps, q, hvd__shm_window(j->c, q, w));
    if (rc == 1) *overflow = 1, rc = 0;
    if (ps->n[q] > most) most = ps->n[q];
  }
  if (rc < 0 || *overflow) return rc;
  ps->local = malloc((size_t)(most + 1) * sizeof *ps->local);
  ps->remote = malloc((size_t)(most + 1) * sizeof *ps->remote);
  ps->sub = malloc((size_t)(most + 1) * sizeof *ps->sub);
  if (!ps->local || !ps->remote || !ps->sub)
    return hvd__err(HVD_E_NOMEM, "allocating %d iovecs", most);
  return 0;
}

/* The comm's buffer for the blocks read, READ_BLOCK per rank. */
static int stage(job *j, peers *ps) {
  size_t need = (size_t)j->c->size * READ_BLOCK;
  if (j->c->peer_buf_len < need) {
    void *b = realloc(j->c->peer_buf, need);
    if (!b) return hvd__err(HVD_E_NOMEM, "allocating %zu bytes to read into", need);
    j->c->peer_buf = b, j->c->peer_buf_len = need;
  }
  ps->stage = j->c->peer_buf;
  return 0;
}

static void peers_free(peers *ps, int n) {
  for (int q = 0; q < n; q++) free(ps->pieces[q]);
  free(ps->local);
  free(ps->remote);
  free(ps->sub);
}

/* Logical bytes [off, off + len) of pieces p as iovecs in out. */
static size_t as_iov(peers *ps, const hvd_piece *p, int n, size_t off, size_t len,
                     struct iovec *out) {
  hvd_pieces sub = hvd__pieces_sub((hvd_pieces){p, n}, off, len, ps->sub);
  for (int i = 0; i < sub.n; i++) out[i] = (struct iovec){sub.p[i].ptr, sub.p[i].len};
  return (size_t)sub.n;
}

/* Rank q's bytes [off, off + len) into dst. */
static int read_into(job *j, peers *ps, int q, size_t off, size_t len, void *dst) {
  struct iovec l = {dst, len};
  size_t nr = as_iov(ps, ps->pieces[q], ps->n[q], off, len, ps->remote);
  return j->c->xport->ops->caps.peer_read(j->c->xport, q, &l, 1, ps->remote, nr);
}

/* This rank's slice, block by block: every rank's values, reduced in rank
 * order a sub-block at a time, written over this rank's own. */
static int reduce_slice(job *j, peers *ps) {
  int me = j->c->rank;
  size_t count = j->total / j->esize;
  size_t at = hvd__split_offset(count, j->c->size, me) * j->esize;
  size_t end = at + hvd__split_count(count, j->c->size, me) * j->esize;
  _Alignas(64) unsigned char acc[HVD_SHM_REDUCE_BLOCK];
  const void *src[HVD_SHM_MAX_RANKS];
  for (size_t b = at; b < end; b += READ_BLOCK) {
    size_t m = end - b < READ_BLOCK ? end - b : READ_BLOCK;
    for (int q = 0; q < j->c->size; q++) {
      unsigned char *mine = ps->stage + (size_t)q * READ_BLOCK;
      if (q != me) {
        HVD__CHECK(read_into(j, ps, q, b, m, mine));
        src[q] = mine;
      } else {
        src[q] = hvd__pieces_whole(j->all, &j->mine, b, m);
        if (!src[q]) hvd__pieces_gather(j->all, &j->mine, b, m, mine), src[q] = mine;
      }
    }
    for (size_t k = 0; k < m; k += j->block) {
      size_t n = m - k < j->block ? m - k : j->block;
      const void *sub[HVD_SHM_MAX_RANKS];
      for (int q = 0; q < j->c->size; q++) sub[q] = (const unsigned char *)src[q] + k;
      hvd__shm_reduce(j, sub, n, acc);
      hvd__pieces_scatter(j->all, &j->out, b + k, n, acc);
    }
  }
  return 0;
}

/* Every other rank's reduced slice, straight into this rank's pieces, a
 * GATHER_BLOCK at a time (the kernel pins what it copies: measured, a
 * megabyte per call copies faster than a whole slice at once). */
static int gather_slices(job *j, peers *ps) {
  size_t count = j->total / j->esize;
  for (int q = 0; q < j->c->size; q++) {
    if (q == j->c->rank) continue;
    size_t at = hvd__split_offset(count, j->c->size, q) * j->esize;
    size_t end = at + hvd__split_count(count, j->c->size, q) * j->esize;
    for (size_t off = at; off < end; off += GATHER_BLOCK) {
      size_t len = end - off < GATHER_BLOCK ? end - off : GATHER_BLOCK;
      size_t nl = as_iov(ps, j->all.p, j->all.n, off, len, ps->local);
      size_t nr = as_iov(ps, ps->pieces[q], ps->n[q], off, len, ps->remote);
      HVD__CHECK(j->c->xport->ops->caps.peer_read(j->c->xport, q, ps->local, nl, ps->remote, nr));
    }
  }
  return 0;
}

static int sync_all(job *j) { return hvd__shm_sync(j->c, &j->stamp); }

int hvd__shm_direct(job *j) {
  peers ps;
  int overflow = 0;
  memset(&ps, 0, sizeof ps);
  uint64_t w = hvd__shm_take_windows(j->c, 1);
  publish(j, hvd__shm_window(j->c, j->c->rank, w));
  int rc = sync_all(j);
  if (rc == 0) rc = collect(j, &ps, w, &overflow);
  if (rc == 0 && overflow) {
    peers_free(&ps, j->c->size);
    return hvd__shm_pipeline(j);
  }
  if (rc == 0) rc = stage(j, &ps);
  if (rc == 0) rc = reduce_slice(j, &ps);
  if (rc == 0) rc = sync_all(j);
  if (rc == 0) rc = gather_slices(j, &ps);
  if (rc == 0) rc = sync_all(j);
  peers_free(&ps, j->c->size);
  return rc;
}
