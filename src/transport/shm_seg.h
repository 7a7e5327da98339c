/*
 * shm_seg.h -- the layout of the shared-memory segment (private to
 * shm.c and shm_setup.c).
 *
 *   seg_hdr                 three cache lines
 *   seg_rank[size]          each rank's futex word, pid and abort record
 *   ring[size][size]        ring i -> j at index i * size + j (i == j unused)
 *   window[size][HVD_WINDOWS]  each rank's windows for the shm allreduce
 *
 * Everything a rank reads from here was written by another process that
 * may be buggy: sizes are validated once when mapping, counters and
 * records every time they are read.
 */
#ifndef HVD_SHM_SEG_H
#define HVD_SHM_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm_ring.h"
#include "transport.h"

#define SEG_MAGIC 0x6876642d73686d32ull /* "hvd-shm2" */
#define SEG_WHY_MAX 512

typedef struct {
  _Alignas(HVD_RING_LINE) uint64_t magic;
  uint32_t size;     /* ranks */
  uint32_t ring_cap; /* data bytes of each ring, a power of two */
  uint64_t bytes;    /* of the whole segment */
  _Atomic uint32_t reports; /* abort records published so far */
  /* 1 when the ranks outnumber the cores (the creator's count, so that
   * every rank waits the same way): waits block rather than spin, and a
   * sync counts arrivals in `arrived` (shm.c). */
  uint32_t shared_cores;
  /* Ranks that reached a sync, over all syncs: sync k is complete at
   * k * size.  Its own line: every rank adds to it once per sync. */
  _Alignas(HVD_RING_LINE) _Atomic uint64_t arrived;
  /* Futex word of the ranks asleep in a counted sync: bumped by the last
   * to arrive (and by an abort), which wakes them all with one call. */
  _Alignas(HVD_RING_LINE) _Atomic uint32_t sync_wake;
} seg_hdr;

/* What a rank says at sync k, in record k % 2 (a rank is never more than
 * one sync ahead of another, so the record a peer reads is not the one
 * being written): that it reached it, its stamp, and up to
 * HVD_SYNC_SMALL bytes of a small collective.  One line, which every peer
 * polls: the values come with the news that they are there. */
typedef struct {
  _Alignas(HVD_RING_LINE) _Atomic uint64_t reached; /* k, once the rank reached sync k */
  hvd_sync_stamp stamp;
  unsigned char small[HVD_SYNC_SMALL];
} seg_sync;
_Static_assert(sizeof(seg_sync) == HVD_RING_LINE, "a sync's record is one line");

typedef struct {
  _Alignas(HVD_RING_LINE) _Atomic uint32_t wake; /* futex word: bumped to wake the rank */
  _Atomic uint32_t sleeping; /* the rank is (about to be) in FUTEX_WAIT */
  _Atomic int32_t pid;
  _Atomic uint32_t reported; /* 1 once lost and why below are written */
  /* Live state, for naming a stuck rank: whom the rank waits on inside a
   * sendrecv (-1: it is not waiting in the transport) and when it last ran
   * there (CLOCK_MONOTONIC ms, one clock for every process of the host). */
  _Atomic int32_t waits_on;
  _Atomic uint64_t beat_ms;
  int32_t lost;              /* the rank this one gave up on; -1: its own reason */
  char why[SEG_WHY_MAX];
  /* Syncs (transport.h): the last two. */
  seg_sync sync[2];
  /* The single-copy probe (shm.c): a word of this rank's memory for the
   * others to read (where and what it holds), then what this rank found
   * reading theirs: 0, an errno, or a PROBE_* code, and on which rank. */
  uint64_t probe_addr, probe_value;
  int32_t probe_result, probe_peer;
  uint64_t probe_min; /* HOROVOD_SHM_SINGLE_COPY_MIN_BYTES: the first rank's holds */
  /* The rank's sign of life (live.h), which its engine advances every
   * cycle: a line of its own, rewritten that often, read only by ranks
   * that wait on this one. */
  _Alignas(HVD_RING_LINE) _Atomic uint64_t live;
} seg_rank;

static inline size_t seg_ring_stride(size_t cap) {
  size_t b = hvd__ring_bytes(cap);
  return (b + HVD_RING_LINE - 1) / HVD_RING_LINE * HVD_RING_LINE;
}

static inline size_t seg_ranks_off(void) {
  return (sizeof(seg_hdr) + HVD_RING_LINE - 1) / HVD_RING_LINE * HVD_RING_LINE;
}

static inline size_t seg_rings_off(size_t size) {
  size_t end = seg_ranks_off() + size * sizeof(seg_rank);
  return (end + 4095) / 4096 * 4096;
}

/* Each window is a quarter of a ring: the shm allreduce works on chunks
 * of a window at a time, small enough to stay in the caches (1/16 to 1
 * ring measured the same on 2 cores). */
static inline size_t seg_window_bytes(size_t cap) { return cap / 4; }

static inline size_t seg_windows_off(size_t size, size_t cap) {
  size_t end = seg_rings_off(size) + size * size * seg_ring_stride(cap);
  return (end + 4095) / 4096 * 4096;
}

static inline size_t seg_bytes(size_t size, size_t cap) {
  return seg_windows_off(size, cap) + size * HVD_WINDOWS * seg_window_bytes(cap);
}

static inline seg_rank *seg_ranks(seg_hdr *h) {
  return (seg_rank *)(void *)((unsigned char *)h + seg_ranks_off());
}

/* Sizes as validated by this rank, never re-read from the segment. */
static inline hvd_ring *seg_ring(seg_hdr *h, size_t size, size_t cap, int from, int to) {
  size_t i = (size_t)from * size + (size_t)to;
  return (hvd_ring *)(void *)((unsigned char *)h + seg_rings_off(size) +
                              i * seg_ring_stride(cap));
}

static inline unsigned char *seg_window(seg_hdr *h, size_t size, size_t cap, int rank,
                                        int which) {
  size_t i = (size_t)rank * HVD_WINDOWS + (size_t)which;
  return (unsigned char *)h + seg_windows_off(size, cap) + i * seg_window_bytes(cap);
}

/* What shm_single_copy.c needs of a transport made by
 * hvd__shm_transport_new (shm.c): every rank's record, a rank's pid and
 * its number in the job, a word of this rank's own for the probe, and the
 * switch that turns its peer_read on (shm.c knows no more of it). */
struct hvd_transport;
typedef int hvd_peer_read_fn(struct hvd_transport *t, int rank, const struct iovec *local,
                             size_t nl, const struct iovec *remote, size_t nr);
seg_rank *hvd__shm_ranks(struct hvd_transport *t);
int hvd__shm_pid(struct hvd_transport *t, int rank);
int hvd__shm_job_rank(struct hvd_transport *t, int rank);
uint64_t *hvd__shm_probe_word(struct hvd_transport *t);
void hvd__shm_enable_peer_read(struct hvd_transport *t, hvd_peer_read_fn *peer_read);

/* shm_single_copy.c: the probe every rank of the transport runs together
 * at setup (two syncs), which turns its peer_read op on.  wanted 0: this rank
 * refuses (HOROVOD_SHM_SINGLE_COPY=0); min: the smallest allreduce to read
 * directly (0: the measured default), rank 0's applies.  1 when every rank
 * could read every other's memory (peer_read is then on), 0 when some
 * could not (*why says who and why), or an error. */
int hvd__shm_single_copy_probe(struct hvd_transport *t, int wanted, uint64_t min, char *why,
                               size_t cap);

/* Lays out a fresh segment of seg_bytes(size, cap) bytes, which must be
 * zeros (what ftruncate gives): its rings are then empty without being
 * touched, so a ring costs memory only once its pair of ranks talks; of
 * the n^2 rings of 512 ranks, the few each rank uses (shm_setup.c). */
void hvd__shm_seg_init(seg_hdr *h, int size, size_t cap);

/* Maps the segment open at fd, for `size` ranks, and checks what its
 * creator wrote there (magic, size, ring capacity, length) before any
 * offset is derived from it: HVD_E_PROTOCOL if it does not fit.  *out
 * maps seg_bytes(size, *cap) bytes (shm_setup.c). */
int hvd__shm_seg_map(int fd, int size, seg_hdr **out, size_t *cap);

/* The shared-memory transport over a mapped segment of `size` ranks and
 * rings of `cap` bytes, validated (shm.c); takes ownership of the mapping
 * on success.  names[i] (copied; NULL: i) is the job's rank of rank i,
 * which messages use. */
struct hvd_transport;
int hvd__shm_transport_new(seg_hdr *seg, int size, size_t cap, int rank, int timeout_ms,
                           const int *names, struct hvd_transport **out);

#endif /* HVD_SHM_SEG_H */
