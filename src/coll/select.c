/*
 * select.c -- which allreduce algorithm runs: HOROVOD_ALLREDUCE_ALGORITHM
 * and, for "auto", a cost model.
 *
 * The alpha-beta-gamma model: a message costs ALPHA plus BETA per byte,
 * reducing costs GAMMA per byte.  With n ranks, S bytes, p the largest
 * power of two <= n, L = log2(p) and e = 1 when n is not a power of two:
 *
 *   ring                 2(n-1) ALPHA + 2(n-1)/n S BETA + (n-1)/n S GAMMA
 *   recursive doubling   (L + 2e) ALPHA + (L + 2e) S BETA + (L + e) S GAMMA
 *
 * (recursive doubling's extra ranks first hand their vector to a partner
 * inside the power of two and get the result back: two more messages of
 * S bytes and one more reduction on the critical path.)  The ring sends
 * the fewest bytes and recursive doubling the fewest messages, so "auto"
 * picks recursive doubling while it is cheaper: below a crossover size
 * that grows with n.  The constants were fitted to hvd-bench --direct on
 * loopback TCP (2 cores): one exchange of 8 bytes takes ~10 us at np 2,
 * and the measured crossovers were ~200 KB at np 2 and 32-64 KB at np 4.
 * With them the crossovers (hvd__allreduce_crossover; tests/unit/
 * test_select.c checks this table) are, in bytes:
 *
 *   n      2      3      4      5      6      7      8     16     32
 *   S   200K   5.5K    64K    15K    23K    32K    75K   107K   164K
 *
 * Non-powers of two pay two extra full-size messages, hence their low
 * crossovers.  On a real network (alpha higher relative to beta) the
 * crossovers move up; HOROVOD_ALLREDUCE_ALGORITHM overrides the model.
 * The choice is a pure function of the setting, n and S, so
 * every rank makes the same one as long as they agree on the setting,
 * which the engine makes sure of (rank 0's wins).
 */
#include <string.h>
#include <strings.h>

#include "../env.h"
#include "coll.h"

/* Nanoseconds: per message, per byte sent, per byte reduced. */
#define ALPHA_NS 10000.0
#define BETA_NS 1.0
#define GAMMA_NS 0.1

static const char *const names[] = {
    [HVD_AR_AUTO] = "auto",
    [HVD_AR_RING] = "ring",
    [HVD_AR_RECURSIVE_DOUBLING] = "recursive_doubling",
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
  return hvd__err(HVD_E_ENV, "%s='%s': expected auto, ring or recursive_doubling", name, text);
}

int hvd__allreduce_algo_env(hvd_ar_algo *out) {
  const char *v = hvd__param_raw(HVD_P_ALLREDUCE_ALGORITHM);
  return hvd__allreduce_algo_parse(v ? v : hvd__params[HVD_P_ALLREDUCE_ALGORITHM].def, out);
}

static double cost_ring(int n, double s) {
  double m = n - 1;
  return 2 * m * ALPHA_NS + 2 * m / n * s * BETA_NS + m / n * s * GAMMA_NS;
}

static double cost_rd(int n, double s) {
  int p = hvd__pow2_floor(n), rounds = 0, extra = p != n;
  while ((1 << rounds) < p) rounds++;
  double msgs = rounds + 2 * extra, reductions = rounds + extra;
  return msgs * ALPHA_NS + msgs * s * BETA_NS + reductions * s * GAMMA_NS;
}

size_t hvd__allreduce_crossover(int n) {
  if (n < 2) return 0;
  /* Both costs are linear in S: solve cost_rd(S) = cost_ring(S). */
  double a_rd = cost_rd(n, 0), a_ring = cost_ring(n, 0);
  double b_rd = cost_rd(n, 1) - a_rd, b_ring = cost_ring(n, 1) - a_ring;
  if (a_rd >= a_ring) return 0;
  if (b_rd <= b_ring) return SIZE_MAX;
  return (size_t)((a_ring - a_rd) / (b_rd - b_ring));
}

hvd_ar_algo hvd__allreduce_choose(hvd_ar_algo setting, int n, size_t bytes) {
  if (setting != HVD_AR_AUTO) return setting;
  return bytes < hvd__allreduce_crossover(n) ? HVD_AR_RECURSIVE_DOUBLING : HVD_AR_RING;
}
