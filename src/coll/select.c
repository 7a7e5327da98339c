/*
 * select.c -- which allreduce algorithm runs: HOROVOD_ALLREDUCE_ALGORITHM
 * and, for "auto", a cost model.
 *
 * The alpha-beta-gamma model: a message costs ALPHA plus BETA per byte,
 * reducing costs GAMMA per byte.  With n ranks, S bytes, p the largest
 * power of two <= n, L = log2(p), q = (p-1)/p and e = 1 when n is not a
 * power of two:
 *
 *   ring                 2(n-1) ALPHA + 2(n-1)/n S BETA + (n-1)/n S GAMMA
 *   recursive doubling   (L + 2e) ALPHA + (L + 2e) S BETA + (L + e) S GAMMA
 *   Rabenseifner         (2L + 2e) ALPHA + (2q + 2e) S BETA + (q + e) S GAMMA
 *
 * (the extra ranks of a non-power of two first hand their vector to a
 * partner inside the power of two and get the result back: two more
 * messages of S bytes and one more reduction on the critical path.)
 * Recursive doubling sends the fewest messages, the ring and Rabenseifner
 * the fewest bytes; Rabenseifner in fewer messages than the ring when n is
 * a power of two, while its folding makes it the dearest otherwise.  So
 * "auto" picks recursive doubling below a crossover size, and above it
 * Rabenseifner at powers of two from 4 and the ring elsewhere (at n = 2
 * the two are the same exchange; the ring streams it).  The constants
 * were fitted to hvd-bench --direct on loopback TCP (2 cores): one
 * exchange of 8 bytes takes ~10 us at np 2, and the measured crossovers
 * were ~200 KB at np 2 and 32-64 KB at np 4.  With them the crossovers
 * (hvd__allreduce_crossover; tests/unit/test_select.c checks this table)
 * are, in bytes:
 *
 *   n      2      3      4      5      6      7      8     16     32
 *   S   200K   5.5K    32K    15K    23K    32K    20K    16K    14K
 *
 * Non-powers of two pay two extra full-size messages, hence their low
 * crossovers.  On a real network (alpha higher relative to beta) the
 * crossovers move up; HOROVOD_ALLREDUCE_ALGORITHM overrides the model.
 * All this is for TCP: on shared memory (every rank on one host, the
 * global communicator) "auto" picks the shm allreduce (shm_allreduce.c)
 * as measured (choose_shm below), and "shm" asks for it where it can run
 * and means "auto" elsewhere.
 *
 * The choice is a pure function of the setting, n and S, so
 * every rank makes the same one as long as they agree on the setting,
 * which the engine makes sure of (rank 0's wins).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "env.h"
#include "coll.h"

/* Nanoseconds: per message, per byte sent, per byte reduced. */
#define ALPHA_NS 10000.0
#define BETA_NS 1.0
#define GAMMA_NS 0.1

static const char *const names[] = {
    [HVD_AR_AUTO] = "auto",
    [HVD_AR_RING] = "ring",
    [HVD_AR_RECURSIVE_DOUBLING] = "recursive_doubling",
    [HVD_AR_RABENSEIFNER] = "rabenseifner",
    [HVD_AR_SHM] = "shm",
    [HVD_AR_HIERARCHICAL] = "hierarchical",
};

const char *hvd__allreduce_algo_name(hvd_ar_algo a) {
  return (int)a >= 0 && (int)a < (int)HVD__ARRAY_LEN(names) ? names[a] : "?";
}

int hvd__allreduce_algo_parse(const char *text, hvd_ar_algo *out) {
  const char *name = hvd__params[HVD_P_ALLREDUCE_ALGORITHM].name;
  /* Not "hierarchical": HOROVOD_HIERARCHICAL_ALLREDUCE switches it on. */
  for (int i = 0; i < HVD_AR_HIERARCHICAL; i++)
    if (strcasecmp(text, names[i]) == 0) return *out = (hvd_ar_algo)i, 0;
  return hvd__err(HVD_E_ENV,
                  "%s='%s': expected auto, ring, recursive_doubling, rabenseifner or shm", name,
                  text);
}

int hvd__allreduce_algo_env(hvd_ar_algo *out) {
  const char *v = hvd__param_raw(HVD_P_ALLREDUCE_ALGORITHM);
  return hvd__allreduce_algo_parse(v ? v : hvd__params[HVD_P_ALLREDUCE_ALGORITHM].def, out);
}

static double cost_ring(int n, double s) {
  double m = n - 1;
  return 2 * m * ALPHA_NS + 2 * m / n * s * BETA_NS + m / n * s * GAMMA_NS;
}

static int log2_of(int p) {
  int k = 0;
  while ((1 << k) < p) k++;
  return k;
}

/* Recursive doubling and Rabenseifner among the largest power of two
 * p <= n, with the extra ranks folded in: two more messages of the whole
 * vector and one more reduction. */
static double cost_rd(int n, double s) {
  int p = hvd__pow2_floor(n), extra = p != n;
  double msgs = log2_of(p) + 2 * extra, reductions = log2_of(p) + extra;
  return msgs * ALPHA_NS + msgs * s * BETA_NS + reductions * s * GAMMA_NS;
}

static double cost_rab(int n, double s) {
  int p = hvd__pow2_floor(n), extra = p != n;
  double part = (double)(p - 1) / p;
  double msgs = 2 * log2_of(p) + 2 * extra;
  return msgs * ALPHA_NS + (2 * part + 2 * extra) * s * BETA_NS + (part + extra) * s * GAMMA_NS;
}

/* For large S: the ring or Rabenseifner, whichever costs less per byte
 * (then per message).  Rabenseifner sends the ring's bytes in fewer
 * messages when n is a power of two; otherwise its folding costs two full
 * vectors and the ring wins.  At n = 2 they are the same exchange: the
 * ring, which streams. */
static hvd_ar_algo large_algo(int n) {
  double ring = cost_ring(n, 1) - cost_ring(n, 0), rab = cost_rab(n, 1) - cost_rab(n, 0);
  if (rab < ring - 1e-9 || (rab <= ring + 1e-9 && cost_rab(n, 0) < cost_ring(n, 0)))
    return HVD_AR_RABENSEIFNER;
  return HVD_AR_RING;
}

static double cost_large(int n, double s) {
  return large_algo(n) == HVD_AR_RABENSEIFNER ? cost_rab(n, s) : cost_ring(n, s);
}

static size_t crossover_of(int n) {
  /* All costs are linear in S: solve cost_rd(S) = cost_large(S). */
  double a_rd = cost_rd(n, 0), a_l = cost_large(n, 0);
  double b_rd = cost_rd(n, 1) - a_rd, b_l = cost_large(n, 1) - a_l;
  if (a_rd >= a_l) return 0;
  if (b_rd <= b_l) return SIZE_MAX;
  return (size_t)((a_l - a_rd) / (b_rd - b_l));
}

/* The model's answers depend on n alone and cost a few hundred
 * instructions, asked for at every allreduce: kept per n (0: not yet;
 * computing twice in a race stores the same value). */
#define MEMO_RANKS 1024
static _Atomic size_t crossover_memo[MEMO_RANKS];
static _Atomic unsigned char large_memo[MEMO_RANKS];

size_t hvd__allreduce_crossover(int n) {
  if (n < 2) return 0;
  if (n >= MEMO_RANKS) return crossover_of(n);
  size_t v = atomic_load_explicit(&crossover_memo[n], memory_order_relaxed);
  if (v) return v - 1;
  v = crossover_of(n);
  if (v != SIZE_MAX) atomic_store_explicit(&crossover_memo[n], v + 1, memory_order_relaxed);
  return v;
}

static hvd_ar_algo large_algo_of(int n) {
  if (n >= MEMO_RANKS) return large_algo(n);
  unsigned char v = atomic_load_explicit(&large_memo[n], memory_order_relaxed);
  if (!v) {
    v = (unsigned char)(large_algo(n) + 1);
    atomic_store_explicit(&large_memo[n], v, memory_order_relaxed);
  }
  return (hvd_ar_algo)(v - 1);
}

hvd_ar_algo hvd__allreduce_choose(hvd_ar_algo setting, int n, size_t bytes) {
  if (setting != HVD_AR_AUTO && setting != HVD_AR_SHM) return setting;
  return bytes < hvd__allreduce_crossover(n) ? HVD_AR_RECURSIVE_DOUBLING : large_algo_of(n);
}

/* On shared memory, auto: the shm allreduce, except between two ranks
 * from SHM_PAIR_BYTES to SHM_PAIR_WINDOWS_BYTES, where recursive doubling
 * and then the ring through the byte rings are faster (below
 * SHM_PAIR_RING_BYTES: recursive doubling).  Measured with hvd-bench --direct on 2 cores: at np 2 the
 * ring moves each byte as often as the shm allreduce does (half the vector
 * each way) but streams without lock-step syncs, 8.7 against 6.2 GB/s at
 * 1 MiB; at np 3 and 4 the shm allreduce is as fast or faster at every
 * size (the ring's 2(n - 1) steps each wait for a rank that shares a
 * core), and at 8 B to 4 KiB it is 10 to 20 times faster everywhere. */
#define SHM_PAIR_BYTES (8u * 1024u)
#define SHM_PAIR_RING_BYTES (32u * 1024u)
/* ... and from here the shm allreduce again: its syncs are spread over
 * chunks of a window each, and measured on a quiet machine it overtakes
 * the ring (np 2, --direct: 6.0-6.3 against 5.6-5.8 GB/s at 2-16 MiB, 5.0
 * against 4.3 at 64 MiB; the ring ahead at 128 KiB-1 MiB, 6.8-7.5 against
 * 6.1-6.6). */
#define SHM_PAIR_WINDOWS_BYTES (2u * 1024u * 1024u)

static hvd_ar_algo choose_shm(const hvd_comm *c, size_t bytes) {
  if (c->size != 2 || bytes < SHM_PAIR_BYTES) return HVD_AR_SHM;
  /* ... unless the shm allreduce reads the other rank's buffer directly
   * at this size (shm_direct.c): one copy, where the ring makes two */
  if (c->xport->ops->caps.peer_read && bytes >= c->xport->peer_read_min) return HVD_AR_SHM;
  if (bytes >= SHM_PAIR_WINDOWS_BYTES) return HVD_AR_SHM;
  return bytes < SHM_PAIR_RING_BYTES ? HVD_AR_RECURSIVE_DOUBLING : HVD_AR_RING;
}

hvd_ar_algo hvd__allreduce_algo(const hvd_comm *c, size_t bytes) {
  hvd_ar_algo setting = (hvd_ar_algo)c->allreduce_algo;
  if (c->local && c->hierarchical) return HVD_AR_HIERARCHICAL;
  if (setting == HVD_AR_AUTO && hvd__shm_usable(c)) return choose_shm(c, bytes);
  if (setting == HVD_AR_SHM && hvd__shm_usable(c)) return HVD_AR_SHM;
  return hvd__allreduce_choose(setting, c->size, bytes);
}
