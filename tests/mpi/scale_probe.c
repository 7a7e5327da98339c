/*
 * scale_probe.c -- a job of many ranks checked in seconds: every
 * collective, exact, and how long the job took to start.
 *
 *   hvdrun -np N scale_probe [BOUND_MS]
 *
 * After hvd_init, one small allreduce (the "first allreduce": start-up is
 * not over before the ranks have reduced once), then each collective at
 * a size or two: allreduce (sum, average, min and max over int32 and
 * float32, and a 64 Ki-element float32 sum that takes the algorithms for
 * large tensors), broadcast from the first and the last rank, allgather
 * and alltoall with counts that differ by rank, reducescatter, a grouped
 * allreduce and a barrier.  Every input is an integer pattern of the
 * rank and the index, and every expected result is computed here from
 * the same pattern (folds over the ranks in int64), so the comparison is
 * exact in float32 too; the average is checked to float32's rounding.
 *
 * Rank 0 prints "scale_probe: started init_ms I first_ms F sockets_rank0
 * S" as soon as the first allreduce returns.  Then every rank prints
 * "scale_probe rank R of N: C checks, F failed", and rank 0 also
 * "scale_probe: init_ms I first_ms F checks_ms C first_unix_ms U":
 * milliseconds from the start of main to hvd_init's return, to the first
 * allreduce's, and for the checks after it, and the wall clock (ms since
 * the epoch) when the first allreduce returned, for bench/scale to time
 * the whole start from the launcher's.  Then "scale_probe: sockets S
 * rss_kb R": the most sockets any rank holds open after the checks (its
 * connections, listeners included) and the largest resident memory of a
 * rank, both the maximum over the ranks (an allreduce).  With BOUND_MS, a first allreduce later than that
 * on any rank is a failed check.
 *
 * Connections are made on first use (src/transport/tcp.c), so the
 * sockets a rank holds follow the collectives it ran: "scale_probe:
 * sockets_init I sockets_allreduce A sockets_end E", each the most over
 * the ranks, after hvd_init, after every allreduce (its algorithms:
 * ring, recursive doubling, Rabenseifner, hierarchical) and after the
 * rest (alltoall needs every pair).  A rank's allreduces may add at most
 * 2 log2 n data connections when n is a power of two: the engine's
 * negotiation is Bruck's allgather (partners r + 2^k and r - 2^k), and
 * recursive doubling's, Rabenseifner's and the ring's partners are among
 * those.  Elsewhere recursive doubling renumbers the ranks beyond the
 * largest power of two, so its partners may differ: at most
 * 3 ceil(log2 n) + 1 then.  More is a failed check.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, checks, failures;

/* Sockets this process holds open: its connections and listeners. */
static int64_t open_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  int64_t n = 0;
  char path[300], link[64];
  for (struct dirent *e; d && (e = readdir(d));) {
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, link, sizeof link - 1);
    if (len > 0 && (link[len] = '\0', strncmp(link, "socket:", 7) == 0)) n++;
  }
  if (d) closedir(d);
  return n;
}

/* Resident memory, KiB (VmRSS). */
static int64_t rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %lld", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

/* Rank r's element i: small integers of both signs. */
static int32_t pattern(int r, size_t i) { return (int32_t)((r * 7 + (int64_t)i * 3) % 101) - 50; }

/* The fold of pattern(., i) over every rank. */
static int64_t fold(hvd_op op, size_t i) {
  int64_t acc = pattern(0, i);
  for (int r = 1; r < size; r++) {
    int64_t v = pattern(r, i);
    acc = op == HVD_MIN ? (v < acc ? v : acc) : op == HVD_MAX ? (v > acc ? v : acc) : acc + v;
  }
  return acc;
}

static void allreduce_int(hvd_op op, size_t n) {
  int32_t *buf = malloc(n * sizeof *buf);
  char name[64];
  for (size_t i = 0; i < n; i++) buf[i] = pattern(rank, i);
  snprintf(name, sizeof name, "int32.%s.%zu", hvd_op_name(op), n);
  CALL(hvd_allreduce(buf, buf, n, HVD_INT32, op, name));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += buf[i] != (int32_t)fold(op, i);
  CHECK(bad == 0, "allreduce %s of %zu int32: %zu elements wrong", hvd_op_name(op), n, bad);
  free(buf);
}

static void allreduce_float(hvd_op op, size_t n) {
  float *buf = malloc(n * sizeof *buf);
  char name[64];
  for (size_t i = 0; i < n; i++) buf[i] = (float)pattern(rank, i);
  snprintf(name, sizeof name, "float32.%s.%zu", hvd_op_name(op), n);
  CALL(hvd_allreduce(buf, buf, n, HVD_FLOAT32, op, name));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    hvd_op fop = op == HVD_AVERAGE ? HVD_SUM : op;
    double want = (double)fold(fop, i) / (op == HVD_AVERAGE ? size : 1);
    bad += op == HVD_AVERAGE ? fabs(buf[i] - want) > 1e-6 * (1 + fabs(want)) : buf[i] != want;
  }
  CHECK(bad == 0, "allreduce %s of %zu float32: %zu elements wrong", hvd_op_name(op), n, bad);
  free(buf);
}

static void broadcast_from(int root) {
  int32_t buf[100];
  char name[32];
  for (int i = 0; i < 100; i++) buf[i] = rank == root ? root * 1000 + i : -1;
  snprintf(name, sizeof name, "bcast.%d", root);
  CALL(hvd_broadcast(buf, 100, HVD_INT32, root, name));
  int bad = 0;
  for (int i = 0; i < 100; i++) bad += buf[i] != root * 1000 + i;
  CHECK(bad == 0, "broadcast from %d: %d elements wrong", root, bad);
}

/* Rank r sends r % 3 + 1 elements, r * 10 + j. */
static void allgather(void) {
  int32_t mine[3];
  size_t count = (size_t)(rank % 3 + 1), *counts = malloc((size_t)size * sizeof *counts);
  void *out = NULL;
  for (size_t j = 0; j < count; j++) mine[j] = rank * 10 + (int32_t)j;
  CALL(hvd_allgather(mine, count, HVD_INT32, &out, counts, "allgather"));
  const int32_t *got = out;
  int bad = 0;
  for (int r = 0, at = 0; r < size; r++) {
    bad += counts[r] != (size_t)(r % 3 + 1);
    for (int j = 0; j < r % 3 + 1; j++) bad += got[at++] != r * 10 + j;
  }
  CHECK(bad == 0, "allgather: %d counts or elements wrong", bad);
  free(out);
  free(counts);
}

/* Rank r sends (r + q) % 2 + 1 elements to rank q: r * 100000 + q * 10 + j. */
static void alltoall(void) {
  size_t *send = malloc((size_t)size * sizeof *send), *recv = malloc((size_t)size * sizeof *recv);
  size_t total = 0;
  for (int q = 0; q < size; q++) total += send[q] = (size_t)((rank + q) % 2 + 1);
  int32_t *buf = malloc(total * sizeof *buf), *at = buf;
  for (int q = 0; q < size; q++)
    for (size_t j = 0; j < send[q]; j++) *at++ = rank * 100000 + q * 10 + (int32_t)j;
  void *out = NULL;
  CALL(hvd_alltoall(buf, send, HVD_INT32, &out, recv, "alltoall"));
  const int32_t *got = out;
  int bad = 0;
  for (int r = 0; r < size; r++) {
    bad += recv[r] != (size_t)((r + rank) % 2 + 1);
    for (int j = 0; j < (r + rank) % 2 + 1; j++) bad += *got++ != r * 100000 + rank * 10 + j;
  }
  CHECK(bad == 0, "alltoall: %d counts or elements wrong", bad);
  free(out);
  free(buf);
  free(send);
  free(recv);
}

static void reducescatter(void) {
  size_t n = 2 * (size_t)size + 1, first = 0;
  int32_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
  for (size_t i = 0; i < n; i++) in[i] = pattern(rank, i);
  CALL(hvd_reducescatter(in, out, n, HVD_INT32, HVD_SUM, "reducescatter"));
  for (int r = 0; r < rank; r++) first += hvd_reducescatter_count(n, r);
  size_t mine = hvd_reducescatter_count(n, rank), bad = 0;
  for (size_t i = 0; i < mine; i++) bad += out[i] != (int32_t)fold(HVD_SUM, first + i);
  CHECK(mine == n / (size_t)size + ((size_t)rank < n % (size_t)size),
        "reducescatter: %zu "
        "elements here",
        mine);
  CHECK(bad == 0, "reducescatter: %zu elements wrong", bad);
  free(in);
  free(out);
}

static void grouped(void) {
  static const size_t n[3] = {1, 17, 300};
  float *bufs[3];
  for (int t = 0; t < 3; t++) {
    bufs[t] = malloc(n[t] * sizeof(float));
    for (size_t i = 0; i < n[t]; i++) bufs[t][i] = (float)pattern(rank, i + (size_t)t);
  }
  CALL(hvd_grouped_allreduce((const void *const *)bufs, (void *const *)bufs, n, 3, HVD_FLOAT32,
                             HVD_SUM, "grouped"));
  size_t bad = 0;
  for (int t = 0; t < 3; t++) {
    for (size_t i = 0; i < n[t]; i++) bad += bufs[t][i] != (float)fold(HVD_SUM, i + (size_t)t);
    free(bufs[t]);
  }
  CHECK(bad == 0, "grouped allreduce: %zu elements wrong", bad);
}

/* What the allreduces may add to a rank's sockets (see the top). */
static void check_allreduce_sockets(const int64_t *sockets) {
  int log2n = 0;
  while ((1 << log2n) < size) log2n++;
  int most = (1 << log2n) == size ? 2 * log2n : 3 * log2n + 1;
  int64_t added = sockets[1] - sockets[0];
  CHECK(added <= most,
        "the allreduces left %lld more sockets open, at most %d expected at %d ranks",
        (long long)added, most, size);
}

int main(int argc, char **argv) {
  double t0 = now(), bound_ms = argc > 1 ? atof(argv[1]) : 0;
  limit_stalls();
  if (init_or_complain() != 0) return 1;
  double t_init = now();
  int64_t sockets[3] = {open_sockets(), 0, 0}; /* after init, allreduces, the rest */
  rank = hvd_rank();
  size = hvd_size();
  allreduce_int(HVD_SUM, 4); /* the first allreduce: every rank has met */
  double t_first = now();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  if (rank == 0) { /* at once: a job that fails later has started all the same */
    printf("scale_probe: started init_ms %.0f first_ms %.0f sockets_rank0 %lld\n",
           (t_init - t0) * 1e3, (t_first - t0) * 1e3, (long long)open_sockets());
    fflush(stdout);
  }
  CHECK(!bound_ms || (t_first - t0) * 1e3 <= bound_ms,
        "the first allreduce returned %.0f ms "
        "after the start, beyond %.0f ms",
        (t_first - t0) * 1e3, bound_ms);
  static const hvd_op ops[] = {HVD_SUM, HVD_MIN, HVD_MAX};
  for (size_t k = 0; k < LEN(ops); k++) {
    allreduce_int(ops[k], 1000);
    allreduce_float(ops[k], 33);
  }
  allreduce_float(HVD_AVERAGE, 257);
  allreduce_float(HVD_SUM, (size_t)64 << 10);
  grouped();
  sockets[1] = open_sockets();
  check_allreduce_sockets(sockets);
  broadcast_from(0);
  broadcast_from(size - 1);
  allgather();
  alltoall();
  reducescatter();
  CALL(hvd_barrier());
  double t_end = now();
  sockets[2] = open_sockets();
  int64_t most[5] = {sockets[2], rss_kb(), sockets[0], sockets[1], sockets[2]};
  CALL(hvd_allreduce(most, most, 5, HVD_INT64, HVD_MAX, "most"));
  if (rank == 0)
    printf("scale_probe: init_ms %.0f first_ms %.0f checks_ms %.0f first_unix_ms %lld\n",
           (t_init - t0) * 1e3, (t_first - t0) * 1e3, (t_end - t_first) * 1e3,
           (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000);
  if (rank == 0)
    printf("scale_probe: sockets %lld rss_kb %lld\n", (long long)most[0], (long long)most[1]);
  if (rank == 0)
    printf("scale_probe: sockets_init %lld sockets_allreduce %lld sockets_end %lld\n",
           (long long)most[2], (long long)most[3], (long long)most[4]);
  CALL(hvd_shutdown());
  return report_checks("scale_probe", rank, size, checks, failures);
}
