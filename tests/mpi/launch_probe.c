/*
 * launch_probe.c -- one program for every launcher (hvdrun, mpirun, srun,
 * srun --mpi=pmix): who hvd says each rank is, a digest of the results of
 * a fixed set of collectives, and when it started and joined.
 *
 * Each rank prints one line:
 *
 *   launch_probe: rank R of N local L of LS cross C of CS host H mpi M
 *     digest D start_ns S init_ns I
 *
 * D is a 64-bit FNV-1a hash of every result (allreduces of several sizes
 * and dtypes and ops, fused and alone, a broadcast, an allgather, an
 * alltoall, a reducescatter) of data that depends only on the rank and
 * the job's size; the program checks that every rank has the same D and
 * exits 1 otherwise, so launchers that form the same job must print the
 * same D.  S and I are CLOCK_REALTIME at the start of main and when
 * hvd_init returned (the start-up benchmark compares them across ranks).
 *
 *   --die R   rank R kills itself (SIGKILL) after the first collective;
 *             the others keep reducing until hvd fails them, print
 *             "launch_probe: rank X: error: <message>" and exit 1.
 *   --quit R  rank R leaves the same way with _exit(3) instead: a death
 *             that mpirun, told not to abort on an exit status, leaves to
 *             the survivors to notice.
 *   --ranks LIST   hvd_init_ranks() with LIST (comma-separated); a rank
 *             left out prints "launch_probe: left out: <message>" and
 *             exits 0.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvd.h"

static uint64_t digest = 1469598103934665603ull;

static void hash(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) digest = (digest ^ b[i]) * 1099511628211ull;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Deterministic values of rank r's i-th element: with fractions, so the
 * order of summation shows in the bits. */
static float value(int r, size_t i) {
  uint32_t x = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (float)(x % 20001u) / 1000.0f - 10.0f;
}

static int fail(const char *what) {
  fprintf(stderr, "launch_probe: rank %d: error: %s: %s\n", hvd_rank(), what, hvd_last_error());
  return 1;
}

/* Allreduces: float32 sums alone and fused (async, then waited), an
 * average, float16 and bfloat16 sums, int32 sums, float64 max. */
static int allreduces(int me) {
  static const size_t sizes[] = {1, 7, 1000, 65537, 1 << 20};
  const size_t n = sizeof sizes / sizeof sizes[0];
  float *bufs[5];
  hvd_handle h[5];
  for (size_t k = 0; k < n; k++) {
    bufs[k] = malloc(sizes[k] * sizeof(float));
    for (size_t i = 0; i < sizes[k]; i++) bufs[k][i] = value(me, i + k);
  }
  char name[32];
  for (size_t k = 0; k < n; k++) { /* enqueued together: fused */
    snprintf(name, sizeof name, "f32.%zu", k);
    h[k] = hvd_allreduce_async(bufs[k], bufs[k], sizes[k], HVD_FLOAT32, HVD_SUM, name);
  }
  int rc = 0;
  for (size_t k = 0; k < n; k++)
    if (hvd_wait(h[k]) != 0 && rc == 0) rc = fail("fused float32 allreduce");
  for (size_t k = 0; k < n && rc == 0; k++) hash(bufs[k], sizes[k] * sizeof(float));
  if (rc == 0 && hvd_allreduce(bufs[4], bufs[4], sizes[4], HVD_FLOAT32, HVD_AVERAGE, "avg") != 0)
    rc = fail("float32 average");
  if (rc == 0) hash(bufs[4], sizes[4] * sizeof(float));
  uint16_t *half = malloc(4096 * sizeof *half);
  for (int d = 0; rc == 0 && d < 2; d++) {
    hvd_dtype t = d ? HVD_BFLOAT16 : HVD_FLOAT16;
    hvd_convert(bufs[2], HVD_FLOAT32, half, t, 1000);
    if (hvd_allreduce(half, half, 1000, t, HVD_SUM, d ? "bf16" : "f16") != 0)
      rc = fail("16-bit allreduce");
    hash(half, 1000 * sizeof *half);
  }
  int32_t ints[333];
  for (int i = 0; i < 333; i++) ints[i] = me * 1000 + i;
  if (rc == 0 && hvd_allreduce(ints, ints, 333, HVD_INT32, HVD_SUM, "i32") != 0)
    rc = fail("int32 allreduce");
  for (int i = 0; rc == 0 && i < 333; i++) /* an exact reference */
    if (ints[i] != 1000 * (hvd_size() * (hvd_size() - 1) / 2) + hvd_size() * i)
      rc = (fprintf(stderr, "launch_probe: int32 sum wrong at %d\n", i), 1);
  hash(ints, sizeof ints);
  double mx[100];
  for (int i = 0; i < 100; i++) mx[i] = value(me, (size_t)i) * 1e-3;
  if (rc == 0 && hvd_allreduce(mx, mx, 100, HVD_FLOAT64, HVD_MAX, "f64max") != 0)
    rc = fail("float64 max");
  hash(mx, sizeof mx);
  free(half);
  for (size_t k = 0; k < n; k++) free(bufs[k]);
  return rc;
}

/* A result that differs by rank (alltoall's, reducescatter's) goes into
 * the digest as every rank's, gathered. */
static int hash_everyones(const void *mine, size_t count, const char *name) {
  void *all = NULL;
  size_t counts[256], total = 0;
  if (hvd_allgather(mine, count, HVD_FLOAT32, &all, counts, name) != 0) return fail(name);
  for (int r = 0; r < hvd_size(); r++) total += counts[r];
  hash(all, total * sizeof(float));
  free(all);
  return 0;
}

/* Broadcast from the last rank, allgather of uneven counts, alltoall,
 * reducescatter. */
static int the_others(int me, int size) {
  float b[513];
  for (int i = 0; i < 513; i++) b[i] = value(me, (size_t)i);
  if (hvd_broadcast(b, 513, HVD_FLOAT32, size - 1, "bcast") != 0) return fail("broadcast");
  hash(b, sizeof b);
  void *out = NULL;
  size_t counts[256];
  if (size > 256) return fail("too many ranks");
  if (hvd_allgather(b, (size_t)me + 1, HVD_FLOAT32, &out, counts, "gather") != 0)
    return fail("allgather");
  hash(out, (size_t)size * ((size_t)size + 1) / 2 * sizeof(float));
  free(out);
  size_t send[256];
  for (int r = 0; r < size; r++) send[r] = 2;
  if (hvd_alltoall(b, send, HVD_FLOAT32, &out, counts, "a2a") != 0) return fail("alltoall");
  int rc = hash_everyones(out, (size_t)size * 2, "a2a.all");
  free(out);
  float rs[513];
  if (rc == 0 && hvd_reducescatter(b, rs, 513, HVD_FLOAT32, HVD_SUM, "rs") != 0)
    return fail("reducescatter");
  return rc ? rc : hash_everyones(rs, hvd_reducescatter_count(513, me), "rs.all");
}

/* Every rank must hold the same digest. */
static int same_everywhere(int size) {
  void *all = NULL;
  size_t counts[256];
  if (hvd_allgather(&digest, 8, HVD_UINT8, &all, counts, "digest") != 0) return fail("digest");
  int rc = 0;
  for (int r = 0; r < size; r++)
    if (memcmp((char *)all + 8 * r, &digest, 8) != 0) {
      fprintf(stderr, "launch_probe: rank %d's digest differs from rank %d's\n", r, hvd_rank());
      rc = 1;
    }
  free(all);
  return rc;
}

/* After the victim is gone: reduce until hvd says so. */
static int outlive(void) {
  float x = 1.0f;
  for (int i = 0; i < 100000; i++)
    if (hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after") != 0) return fail("allreduce");
  fprintf(stderr, "launch_probe: rank %d: the lost rank was never noticed\n", hvd_rank());
  return 2;
}

static int parse_ranks(const char *list, int *ranks) {
  int n = 0;
  for (const char *p = list; *p && n < 256; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
    ranks[n++] = atoi(p);
  return n;
}

int main(int argc, char **argv) {
  uint64_t start = now_ns();
  int die = -1, quit = 0, ranks[256], nranks = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--die") == 0) die = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--quit") == 0) die = atoi(argv[i + 1]), quit = 1;
    if (strcmp(argv[i], "--ranks") == 0) nranks = parse_ranks(argv[i + 1], ranks);
  }
  int rc = nranks ? hvd_init_ranks(ranks, nranks) : hvd_init();
  if (rc == HVD_E_INVALID && nranks) {
    printf("launch_probe: left out: %s\n", hvd_last_error());
    return 0;
  }
  if (rc != 0) {
    fprintf(stderr, "launch_probe: %s\n", hvd_last_error());
    return 1;
  }
  uint64_t init = now_ns();
  int me = hvd_rank(), size = hvd_size();
  rc = allreduces(me);
  if (rc == 0 && die == me && quit) _exit(3);
  if (rc == 0 && die == me) raise(SIGKILL);
  if (rc == 0 && die >= 0) rc = outlive();
  if (rc == 0) rc = the_others(me, size);
  if (rc == 0) rc = same_everywhere(size);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  if (rc == 0)
    printf("launch_probe: rank %d of %d local %d of %d cross %d of %d host %s mpi %d digest "
           "%016llx start_ns %llu init_ns %llu\n", me, size, hvd_local_rank(), hvd_local_size(),
           hvd_cross_rank(), hvd_cross_size(), host, hvd_mpi_enabled(),
           (unsigned long long)digest, (unsigned long long)start, (unsigned long long)init);
  fflush(stdout);
  hvd_shutdown();
  return rc;
}
