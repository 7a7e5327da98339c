/*
 * coll.h -- the collective algorithms, as functions of (communicator, buffers).
 *
 * Nothing here knows about names, the engine or the public API: that is
 * api.c's job.  Arguments are already validated; sizes are size_t
 * throughout.  Each function starts a new collective on the communicator
 * (hvd__comm_begin) and breaks it on failure (hvd__comm_fail).
 *
 * Bytes on the wire per rank, n ranks, S bytes of data (see docs/algorithms.md):
 *   allreduce      ring reduce-scatter + ring allgather   2(n-1)/n * S
 *                  or recursive doubling (small S)        log2(n) * S
 *                  or Rabenseifner                        2(n-1)/n * S
 *                  or through shared-memory windows       S in, S out (one host)
 *                  or hierarchical, L ranks x C hosts     2(n-1)/n * S, of which
 *                                                         2(C-1)/(CL) * S across hosts
 *   reducescatter  ring reduce-scatter                     (n-1)/n * S
 *   allgatherv     Bruck, ceil(log2 n) rounds              S_total - S_own received
 *   broadcast      pipelined chain from the root           S
 *   alltoallv      pairwise exchange, n-1 steps            S - S_self
 *   barrier        dissemination, ceil(log2 n) rounds      0 (headers only)
 */
#ifndef HVD_COLL_H
#define HVD_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"

/* The allreduce algorithms (select.c).  A communicator's setting
 * (c->allreduce_algo) may be AUTO; the algorithm that runs never is.
 * HIERARCHICAL is never a setting: it runs on the global communicator
 * when HOROVOD_HIERARCHICAL_ALLREDUCE built its hierarchy
 * (hierarchical.c), whatever the setting says. */
typedef enum {
  HVD_AR_AUTO,
  HVD_AR_RING,
  HVD_AR_RECURSIVE_DOUBLING,
  HVD_AR_RABENSEIFNER, /* recursive halving, then doubling (rabenseifner.c) */
  HVD_AR_SHM,          /* over shared-memory windows (shm_allreduce.c) */
  HVD_AR_HIERARCHICAL, /* within hosts, across, within (hierarchical.c); not a setting */
  HVD_AR_N             /* how many: the engine runs each algorithm's group in turn */
} hvd_ar_algo;

/* "auto", "ring", "recursive_doubling", "shm" (any case) -> the value; an
 * unknown name is HVD_E_ENV naming HOROVOD_ALLREDUCE_ALGORITHM and the
 * choices.  _env reads the variable (its default when unset). */
int hvd__allreduce_algo_parse(const char *text, hvd_ar_algo *out);
int hvd__allreduce_algo_env(hvd_ar_algo *out);
const char *hvd__allreduce_algo_name(hvd_ar_algo a);

/* The algorithm for `bytes` over n ranks without shared memory: the
 * setting unless AUTO (or SHM), else
 * recursive doubling below hvd__allreduce_crossover(n) bytes, the ring
 * from there on (the cost model in select.c). */
hvd_ar_algo hvd__allreduce_choose(hvd_ar_algo setting, int n, size_t bytes);
size_t hvd__allreduce_crossover(int n);

/* What c runs for an allreduce of `bytes`: hierarchical for every size
 * when c has the sub-communicators; else the shm allreduce where c can run
 * it and the setting is auto or shm (select.c); else
 * hvd__allreduce_choose (shm where it cannot run counts as auto). */
hvd_ar_algo hvd__allreduce_algo(const hvd_comm *c, size_t bytes);

/* Another implementation of the collectives the engine runs (comm.h's
 * c->coll; src/mpi/ops.c is MPI's), with the same arguments and rules as
 * the functions below: it begins a collective on c (hvd__comm_begin),
 * breaks c on failure (hvd__comm_fail), never waits past the transport's
 * deadline.  allreduce reduces n tensors in place, each by itself (so a
 * tensor has the same bits fused or alone), AVERAGE divided. */
typedef struct hvd_coll_ops {
  const char *name;
  int (*allreduce)(hvd_comm *c, void *const *bufs, const size_t *counts, int n, hvd_dtype dtype,
                   hvd_op op);
  int (*reducescatter)(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                       hvd_dtype dtype, hvd_op op);
  int (*broadcast)(hvd_comm *c, void *buf, size_t bytes, int root);
  int (*allgather)(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                   size_t *counts);
  int (*alltoall)(hvd_comm *c, const void *sbuf, const size_t *scounts, size_t esize,
                  void **rbuf, size_t *rcounts);
  int (*barrier)(hvd_comm *c);
} hvd_coll_ops;

/* Chooses by count * element size (hvd__allreduce_algo). */
int hvd__allreduce(hvd_comm *c, const void *sbuf, void *rbuf, size_t count, hvd_dtype dtype,
                   hvd_op op);

/* In place, for a small vector whose latency is all that counts (the
 * engine's negotiation): the shm windows where c has them, else recursive
 * doubling; never the hierarchical allreduce, whose three phases cost
 * more than the bytes they save here. */
int hvd__allreduce_small(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype, hvd_op op);


/* rbuf holds hvd__split_count(count, size, rank) elements. */
int hvd__reducescatter(hvd_comm *c, const void *sbuf, void *rbuf, size_t count,
                       hvd_dtype dtype, hvd_op op);

int hvd__broadcast(hvd_comm *c, void *buf, size_t bytes, int root);

/* Every rank's count is exchanged first; *rbuf is malloc()ed (NULL when the
 * total is 0) and counts[] (c->size entries) filled. */
int hvd__allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                   size_t *counts);

/* Every rank's `bytes` (the same on every rank) into rbuf, which holds
 * c->size blocks, in rank order; no counts exchanged. */
int hvd__allgather_equal(hvd_comm *c, const void *sbuf, size_t bytes, void *rbuf);

/* out = the allreduce of vecs[0 .. c->size-1] (rank r's count elements
 * at vecs[r], all in hand) with the bits `algo` would give: HVD_AR_SHM's
 * rank order (half types summed in float32, rounded once) or
 * HVD_AR_RECURSIVE_DOUBLING's tree (rounded after each step); AVERAGE
 * divided.  vecs are overwritten.  HVD_E_UNSUPPORTED for any other
 * algorithm (gathered.c). */
int hvd__reduce_gathered(hvd_comm *c, hvd_ar_algo algo, void *const *vecs, size_t count,
                         hvd_dtype dtype, hvd_op op, void *out);

/* scounts[] has c->size entries; *rbuf malloc()ed, rcounts[] filled. */
int hvd__alltoall(hvd_comm *c, const void *sbuf, const size_t *scounts, size_t esize,
                  void **rbuf, size_t *rcounts);

int hvd__barrier(hvd_comm *c);

/* Adasum in place over every rank of c (a power of two), float32 or
 * float64; hvd__adasum_check says whether a dtype and size qualify. */
int hvd__adasum(hvd_comm *c, void *buf, size_t count, hvd_dtype dtype);
int hvd__adasum_check(hvd_dtype dtype, int size);

/* The largest power of two <= n (n >= 1): the ranks that take part in
 * recursive doubling's rounds. */
static inline int hvd__pow2_floor(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

/* The ring's partition of `count` elements: rank/segment i gets count/n,
 * the first count%n one more (Horovod's split for reducescatter). */
size_t hvd__split_count(size_t count, int n, int i);
size_t hvd__split_offset(size_t count, int n, int i);

/* ---- shared by the algorithms (ring.c) ---- */

/* Sends slen bytes to `to` while receiving rlen bytes from `from`, cut
 * into HVD_CHUNK_BYTES frames so long messages stream.  When dtype/op are
 * given (reduce != 0) each received chunk is reduced into rbuf instead of
 * overwriting it (rbuf = rbuf (op) received, or with theirs_first,
 * rbuf = received (op) rbuf); chunk boundaries then fall on whole
 * elements.  rbuf may be the buffer being sent: chunk k is sent before
 * it is overwritten. */
typedef struct {
  int reduce;
  hvd_dtype dtype;
  hvd_op op;
  int theirs_first;
} hvd_recv_mode;

int hvd__stream(hvd_comm *c, uint32_t tag, int to, const void *sbuf, size_t slen, int from,
                void *rbuf, size_t rlen, const hvd_recv_mode *mode);

/* A buffer made of several byte ranges, streamed as one: the frames on
 * the wire are exactly those of the contiguous buffer of the same length
 * (so results do not depend on how the bytes are laid out in memory).
 * Chunks that cross pieces go through a staging copy; the others are sent
 * and received in place. */
typedef struct {
  char *ptr;
  size_t len;
} hvd_piece;

typedef struct {
  const hvd_piece *p;
  int n;
} hvd_pieces;

int hvd__stream_pieces(hvd_comm *c, uint32_t tag, int to, hvd_pieces s, int from, hvd_pieces r,
                       const hvd_recv_mode *mode);

size_t hvd__pieces_len(hvd_pieces ps);

/* Logical bytes [off, off + len) of ps as pieces, written to out (room
 * for ps.n). */
hvd_pieces hvd__pieces_sub(hvd_pieces ps, size_t off, size_t len, hvd_piece *out);

/* A position in pieces that only moves forward, for copying spans of the
 * logical buffer in and out in increasing order; starts {0, 0}. */
typedef struct {
  int i;       /* the piece holding `base` */
  size_t base; /* logical offset where piece i starts */
} hvd_cursor;

/* Logical bytes [off, off + len) of ps as one pointer, or NULL if they
 * cross pieces (off only moves forward, as for the copies below). */
char *hvd__pieces_whole(hvd_pieces ps, hvd_cursor *cu, size_t off, size_t len);

/* Copies logical bytes [off, off + len) of ps to dst / from src. */
void hvd__pieces_gather(hvd_pieces ps, hvd_cursor *cu, size_t off, size_t len, void *dst);
void hvd__pieces_scatter(hvd_pieces ps, hvd_cursor *cu, size_t off, size_t len,
                         const void *src);

/* Allreduce in place over c->size segments, each a list of pieces whose
 * lengths are whole elements, with `algo` (not AUTO; see allreduce.c: how
 * the engine keeps fused tensors bitwise equal to unfused ones). */
int hvd__allreduce_pieces(hvd_comm *c, hvd_ar_algo algo, const hvd_pieces *segs,
                          hvd_dtype dtype, hvd_op op);

/* n tensors (bufs[i], counts[i] elements) reduced in place, each with the
 * bits it gets alone: one collective per algorithm among them (tensors.c). */
int hvd__allreduce_tensors(hvd_comm *c, void *const *bufs, const size_t *counts, int n,
                           hvd_dtype dtype, hvd_op op);

/* ---- over shared-memory windows (shm_windows.c) ---- */

/* Whether c can use the transport's windows: the global communicator
 * over shared memory. */
#define HVD_SHM_WINDOW_MIN 4096u
int hvd__shm_usable(const hvd_comm *c);

/* Reserves `chunks` consecutive window numbers; returns the first. */
uint64_t hvd__shm_take_windows(hvd_comm *c, uint64_t chunks);
/* Rank r's window for chunk number `chunk`. */
unsigned char *hvd__shm_window(hvd_comm *c, int rank, uint64_t chunk);

/* What a sync's stamp says (kind = collective << 16 | a << 8 | b). */
enum { HVD_SHM_ALLREDUCE = 1, HVD_SHM_ALLGATHER = 2 };
static inline uint32_t hvd__shm_kind(unsigned collective, unsigned a, unsigned b) {
  return (uint32_t)collective << 16 | (a & 0xff) << 8 | (b & 0xff);
}

/* Waits for every rank; HVD_E_MISMATCH naming the rank and both
 * collectives when a rank's stamp differs from ours. */
int hvd__shm_sync(hvd_comm *c, const hvd_sync_stamp *mine);
/* Whether n bytes can travel in a sync (the transport's sync_small), and
 * that sync: afterwards hvd__shm_synced(c, r) is rank r's n bytes, until
 * this rank's next sync. */
int hvd__shm_small(const hvd_comm *c, size_t n);
int hvd__shm_sync_small(hvd_comm *c, const hvd_sync_stamp *mine, const void *small, size_t n);
const unsigned char *hvd__shm_synced(hvd_comm *c, int rank);

/* The shm allreduce over the whole vector `all` (shm_allreduce.c): needs
 * hvd__shm_usable(c).  Inside a collective begun with `tag`; AVERAGE
 * divided. */
int hvd__shm_allreduce(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype, hvd_op op);

/* Folding a non-power of two into recursive doubling and Rabenseifner
 * (recursive_doubling.c), p the largest power of two <= c->size: rank
 * r >= p hands its vector to r - p and gets the result back (*sat_out =
 * 1: it is done); a rank r with r + p < n reduces r + p's vector into its own,
 * its own on the left, before the rounds, and fold_out sends it the
 * result after them. */
int hvd__fold_in(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype, hvd_op op, int p,
                 int *sat_out);
int hvd__fold_out(hvd_comm *c, uint32_t tag, hvd_pieces all, int p);

/* Rabenseifner's allreduce over `all` (rabenseifner.c): the same bits as
 * recursive doubling, the ring's bytes.  Inside a collective begun with
 * `tag`; AVERAGE divided. */
int hvd__rabenseifner(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype, hvd_op op);

/* The ring's two phases over c's c->size segments, inside a collective
 * already begun with `tag` (ring.c).  The reduce-scatter leaves
 * segment c->rank reduced over c's ranks and, for AVERAGE with
 * divisor > 0, divided by divisor; the allgather then copies each rank's
 * segment to every rank.  A segment may be any list of pieces, e.g.
 * several segments of a larger partition (hierarchical.c). */
int hvd__ring_reduce_scatter(hvd_comm *c, uint32_t tag, const hvd_pieces *segs,
                             hvd_dtype dtype, hvd_op op, int divisor);
int hvd__ring_allgather(hvd_comm *c, uint32_t tag, const hvd_pieces *segs);

/* segs[0..n) back to back as one list: *flat (malloc()ed, to free) holds
 * their pieces in order and *all points at it.  Recursive doubling is
 * element-wise and does not care how the vector is laid out; the
 * hierarchical allreduce takes runs of it as groups of segments. */
int hvd__pieces_concat(const hvd_pieces *segs, int n, hvd_piece **flat, hvd_pieces *all);

/* ---- hierarchical.c ---- */

/* With c->hierarchical, checks that every rank's c->place agrees with
 * the others' (HVD_E_ENV naming a rank, what it has and what was
 * expected) and, when the job is several hosts of the same number of
 * ranks (more than one), builds c->local and c->cross; otherwise leaves
 * c flat (uneven hosts: with a warning).  A collective over c; every rank
 * reaches the same verdict. */
int hvd__hier_setup(hvd_comm *c);

/* The checks hvd__hier_setup makes of every rank's place (all[r] for
 * rank r of n), as a pure function: 0 or HVD_E_ENV. */
int hvd__hier_check(const hvd_place *all, int n);

/* Allreduce of c->size segments through c->local and c->cross, inside a
 * collective already begun with `tag`; AVERAGE divided. */
int hvd__hierarchical(hvd_comm *c, uint32_t tag, const hvd_pieces *segs, hvd_dtype dtype,
                      hvd_op op);

/* ---- hier_allgather.c ---- */

/* Allgather (hvd__allgather's contract) within each host, across hosts
 * among the first rank of each, then a broadcast within each host; c
 * must have c->local, c->cross and c->hier_rank (hvd__hier_setup). */
int hvd__hier_allgather(hvd_comm *c, const void *sbuf, size_t count, size_t esize, void **rbuf,
                        size_t *counts);

/* A tensor's allgather (the engine's data path): hvd__hier_allgather with
 * HOROVOD_HIERARCHICAL_ALLGATHER and the hierarchy built, else
 * hvd__allgather (which the negotiation's small exchanges keep). */
int hvd__allgather_tensor(hvd_comm *c, const void *sbuf, size_t count, size_t esize,
                          void **rbuf, size_t *counts);

/* Recursive doubling over the whole vector `all` (recursive_doubling.c),
 * inside a collective already begun with `tag`; AVERAGE divided. */
int hvd__recursive_doubling(hvd_comm *c, uint32_t tag, hvd_pieces all, hvd_dtype dtype,
                            hvd_op op);

/* Exchanges one 64-bit count per peer pair: sends mine[to], receives
 * theirs[from] over the same pairwise schedule as alltoall.  theirs must
 * not alias mine (a later step still reads what an earlier one wrote). */
int hvd__exchange_counts(hvd_comm *c, uint32_t tag, const uint64_t *mine, uint64_t *theirs);

/* Lays out blocks of counts[i] elements back to back: offsets[i] (in
 * elements) and the total.  Counts come from the network, so a total whose
 * bytes overflow size_t is refused with HVD_E_PROTOCOL. */
int hvd__place_blocks(const uint64_t *counts, int n, size_t esize, size_t *offsets,
                      size_t *total);

#endif /* HVD_COLL_H */
