/*
 * test_hierarchical.c -- HOROVOD_HIERARCHICAL_ALLREDUCE on hosts that
 * hvdrun emulates on this machine (-H localhost:2,127.0.0.1:2).
 *
 * tests.cmake runs it in one of three modes (argv[1]):
 *
 *   hier      the hierarchy must be built and used: every global
 *             allreduce runs two phases on this host's sub-communicator
 *             and one on the cross one (their sequence numbers, read
 *             through the internal hvd__hier_counts(), advance by exactly
 *             that), other collectives and process sets leave them
 *             alone, and results are exact.  Only rank 0 sets the switch
 *             on: its setting wins.
 *   flat      the switch is on but the hosts are uneven (or it is off):
 *             no hierarchy, and the flat allreduce gives exact results.
 *   mismatch  the last rank claims one more host than there are: every
 *             rank's hvd_init fails with HVD_E_ENV naming that rank.
 *   allgather HOROVOD_HIERARCHICAL_ALLGATHER (hvdrun --hierarchical-
 *             allgather; only rank 0's counts): the hierarchy is built,
 *             an allgather runs three collectives on the host's
 *             communicator and, on each host's first rank only, two on
 *             the cross one; allreduces leave both alone; blocks of
 *             uneven sizes, empty ones included, arrive exact and in
 *             rank order.
 *
 * Correctness for every dtype, op and size, the same bits everywhere and
 * fusion that changes no bit are test_algorithms' and test_fusion's job,
 * which tests.cmake runs with the switch on as well.
 *
 * Linked with libhvd's objects (not the shared library) for
 * hvd__hier_counts().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "api_hooks.h"
#include "coll/coll.h"
#include "testing.h"

static int rank, size, failures, checks;

/* Sum over ranks of (rank + i) * 3 for n int64s, checked exactly. */
static void allreduce_exact(size_t n, const char *name) {
  int64_t *buf = calloc(n ? n : 1, sizeof *buf);
  for (size_t i = 0; i < n; i++) buf[i] = ((int64_t)rank + (int64_t)i) * 3;
  CALL(hvd_allreduce(buf, buf, n, HVD_INT64, HVD_SUM, name));
  int64_t base = (int64_t)size * (size - 1) / 2;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += buf[i] != (base + (int64_t)size * (int64_t)i) * 3;
  CHECK(bad == 0, "%s: %zu of %zu elements wrong", name, bad, n);
  free(buf);
}

static void counts(uint32_t *local, uint32_t *cross) {
  *local = *cross = 0;
  CHECK(hvd__hier_counts(local, cross) == 0, "no hierarchy was built");
}

static void expect_moves(uint32_t l0, uint32_t c0, uint32_t dl, uint32_t dc, const char *after) {
  uint32_t l, c;
  counts(&l, &c);
  CHECK(l - l0 == dl && c - c0 == dc,
        "after %s: local comm ran %u phases (expected %u), cross comm %u (expected %u)", after,
        l - l0, dl, c - c0, dc);
}

static int run_hier(void) {
  if (rank != 0) setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", "0", 1); /* rank 0's wins */
  CALL(hvd_init());
  CHECK(hvd_local_size() > 1 && hvd_cross_size() > 1 &&
            hvd_local_size() * hvd_cross_size() == size,
        "layout %d x %d for %d ranks", hvd_local_size(), hvd_cross_size(), size);
  uint32_t l0, c0;
  counts(&l0, &c0);
  /* Sizes on both sides of auto's crossover (recursive doubling below):
   * the hierarchy takes them all.  Blocking calls, one collective each. */
  static const size_t sizes[] = {1, 5, 1000, 100003};
  for (size_t k = 0; k < LEN(sizes); k++) {
    char name[32];
    snprintf(name, sizeof name, "hier.%zu", sizes[k]);
    allreduce_exact(sizes[k], name);
  }
  expect_moves(l0, c0, 2 * LEN(sizes), LEN(sizes), "the allreduces");
  counts(&l0, &c0);
  int64_t x = rank, *all = NULL;
  CALL(hvd_broadcast(&x, 1, HVD_INT64, 0, "bcast"));
  CALL(hvd_allgather(&x, 1, HVD_INT64, (void **)&all, NULL, "gather"));
  CALL(hvd_barrier());
  free(all);
  expect_moves(l0, c0, 0, 0, "broadcast, allgather and barrier");
  /* A process set of every rank reduces flat: its communicator has no
   * hierarchy. */
  int *ranks = malloc((size_t)size * sizeof *ranks);
  for (int r = 0; r < size; r++) ranks[r] = r;
  int set = hvd_add_process_set(ranks, size);
  CALL(set);
  free(ranks);
  counts(&l0, &c0);
  int64_t v[7] = {1, 2, 3, 4, 5, 6, 7};
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = set;
  CALL(hvd_wait(hvd_allreduce_async_opts(v, v, 7, HVD_INT64, HVD_SUM, "pset", &o)));
  CHECK(v[6] == 7 * size, "process set allreduce gave %lld", (long long)v[6]);
  expect_moves(l0, c0, 0, 0, "a process set's allreduce");
  CALL(hvd_shutdown());
  return report_checks("test_hierarchical (hier)", rank, size, checks, failures);
}

static int run_flat(void) {
  CALL(hvd_init());
  uint32_t l, c;
  CHECK(hvd__hier_counts(&l, &c) < 0, "a hierarchy was built for %d ranks (local size %d)",
        size, hvd_local_size());
  allreduce_exact(1, "flat.1");
  allreduce_exact(100003, "flat.big");
  CALL(hvd_shutdown());
  return report_checks("test_hierarchical (flat)", rank, size, checks, failures);
}

/* Rank r's block: r * 3 + (k % 2) int64s (rank 0's empty at even k),
 * each naming its rank and place. */
static size_t block_len(int r, int k) { return (size_t)(r * 3 + (k % 2)); }

static void allgather_exact(int k) {
  char name[32];
  size_t n = block_len(rank, k), total = 0;
  int64_t *mine = calloc(n ? n : 1, sizeof *mine), *all = NULL;
  size_t *counts = calloc((size_t)size, sizeof *counts);
  for (size_t i = 0; i < n; i++) mine[i] = (int64_t)rank * 1000 + (int64_t)i;
  snprintf(name, sizeof name, "hier.gather.%d", k);
  CALL(hvd_allgather(mine, n, HVD_INT64, (void **)&all, counts, name));
  size_t bad = 0, at = 0;
  for (int r = 0; r < size; r++) {
    CHECK(counts[r] == block_len(r, k), "%s: rank %d's count %zu, expected %zu", name, r,
          counts[r], block_len(r, k));
    for (size_t i = 0; i < block_len(r, k); i++) bad += all[at++] != (int64_t)r * 1000 + (int64_t)i;
    total += block_len(r, k);
  }
  CHECK(bad == 0 && at == total, "%s: %zu of %zu elements wrong", name, bad, total);
  free(mine);
  free(all);
  free(counts);
}

static int run_allgather(void) {
  if (rank != 0) setenv("HOROVOD_HIERARCHICAL_ALLGATHER", "0", 1); /* rank 0's wins */
  CALL(hvd_init());
  uint32_t l0, c0;
  counts(&l0, &c0);
  int first = hvd_local_rank() == 0;
  for (int k = 0; k < 4; k++) allgather_exact(k);
  expect_moves(l0, c0, 3 * 4, first ? 2 * 4 : 0, "the allgathers");
  counts(&l0, &c0);
  allreduce_exact(1000, "flat.allreduce");
  expect_moves(l0, c0, 0, 0, "an allreduce");
  CALL(hvd_shutdown());
  return report_checks("test_hierarchical (allgather)", rank, size, checks, failures);
}

/* The last rank's HOROVOD_CROSS_SIZE says one host more than there are;
 * its own values are consistent, so only comparing with the others
 * finds it. */
static int run_mismatch(void) {
  char want[160], value[16];
  const char *cs = getenv("HOROVOD_CROSS_SIZE");
  int cross_size = cs ? atoi(cs) : 1;
  snprintf(want, sizeof want, "rank %d has HOROVOD_CROSS_SIZE=%d, expected %d", size - 1,
           cross_size + 1, cross_size);
  if (rank == size - 1) {
    snprintf(value, sizeof value, "%d", cross_size + 1);
    setenv("HOROVOD_CROSS_SIZE", value, 1);
  }
  int rc = hvd_init();
  CHECK(rc == HVD_E_ENV, "hvd_init returned %s, not HVD_E_ENV", hvd_err_name(rc));
  CHECK(strstr(hvd_last_error(), want) != NULL, "hvd_init's error '%s' does not say '%s'",
        hvd_last_error(), want);
  CHECK(!hvd_is_initialized(), "initialized after a failed hvd_init");
  return report_checks("test_hierarchical (mismatch)", rank, size, checks, failures);
}

int main(int argc, char **argv) {
  limit_stalls();
  const char *r = getenv("HOROVOD_RANK"), *s = getenv("HOROVOD_SIZE");
  rank = r ? atoi(r) : 0; /* known before hvd_init, which mismatch makes fail */
  size = s ? atoi(s) : 1;
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "hier") == 0) return run_hier();
  if (strcmp(mode, "flat") == 0) return run_flat();
  if (strcmp(mode, "mismatch") == 0) return run_mismatch();
  if (strcmp(mode, "allgather") == 0) return run_allgather();
  fprintf(stderr, "usage: test_hierarchical hier|flat|mismatch|allgather\n");
  return 2;
}
