/*
 * testing.h -- what the multi-rank test programs in tests/mpi/ share.
 *
 * tests/CMakeLists.txt builds each source in tests/mpi/ as a program of
 * its own; this header holds the helpers they would otherwise each carry a
 * copy of, as macros and static inline functions only, so a program pays
 * for what it uses and nothing else:
 *
 *   CHECK(cond, fmt, ...)  counts a check; when cond is false, counts a
 *                          failure and prints "rank R: FAIL at line L: ..."
 *                          to stderr.  The program defines `rank`, `checks`
 *                          and `failures` (int, or atomic_int where CHECK
 *                          runs on several threads).
 *   CALL(expr)             a call that must succeed for the rest of the test
 *                          to make sense: a negative result (an HVD_E_* code,
 *                          as an int or a hvd_handle) prints it and exits 1.
 *                          Uses `rank` too.
 *   report_checks()        the last line, "PROG rank R of N: C checks, F
 *                          failed", and the exit status.
 *   limit_stalls()         a hang in the engine fails the test instead.
 *   init_or_complain()     hvd_init(), saying why on stderr when it fails.
 *   learn_job()            rank and size from an hvd_init/hvd_shutdown, for
 *                          programs that init several times with settings.
 *   LEN, now, sleep_ms     array length, monotonic seconds, a pause.
 *   mix, fnv, shuffled     deterministic inputs: splitmix64, FNV-1a of a
 *                          buffer, a seeded permutation.
 *   half                   GCC's binary16 type (x86-64), the reference
 *                          float16 conversion.
 *   raise_later()          signals this process from a second thread.
 */
#ifndef HVD_TESTS_MPI_TESTING_H
#define HVD_TESTS_MPI_TESTING_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hvd.h>

/* ---- assertions ---- */

#define CHECK(cond, ...)                                             \
  do {                                                               \
    checks++;                                                        \
    if (!(cond)) {                                                   \
      failures++;                                                    \
      fprintf(stderr, "rank %d: FAIL at line %d: ", rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                  \
      fputc('\n', stderr);                                           \
    }                                                                \
  } while (0)

/* hvd's int functions return 0 or a negative HVD_E_* code, its handles are
 * >= 0 or a negative code: either way, negative is the failure. */
#define CALL(expr)                                                                       \
  do {                                                                                   \
    int64_t rc_ = (expr);                                                                \
    if (rc_ < 0) {                                                                       \
      fprintf(stderr, "rank %d: line %d: %s returned %s: %s\n", rank, __LINE__, #expr,   \
              hvd_err_name((int)rc_), hvd_last_error());                                 \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* Prints the summary line of a CHECK-counting program; its exit status. */
static inline int report_checks(const char *program, int rank, int size, int checks,
                                int failures) {
  printf("%s rank %d of %d: %d checks, %d failed\n", program, rank, size, checks, failures);
  return failures != 0;
}

/* ---- the job ---- */

/* A hang in the engine fails the test instead: unless the caller says
 * otherwise, the stall inspector gives up on a tensor after 20 s. */
static inline void limit_stalls(void) {
  setenv("HOROVOD_STALL_CHECK_TIME_SECONDS", "5", 0);
  setenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "20", 0);
}

/* hvd_init(); on failure prints "hvd_init: <why>" and returns 1. */
/* Returns 0, or 1 after saying why on stderr. */
static inline int learn_job(int *rank_out, int *size_out) {
  if (hvd_init() != 0) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  *rank_out = hvd_rank();
  *size_out = hvd_size();
  hvd_shutdown();
  return 0;
}

static inline int init_or_complain(void) {
  if (hvd_init() != 0) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  return 0;
}

/* ---- small helpers ---- */

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void sleep_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* ---- deterministic inputs ---- */

static inline uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* FNV-1a of n bytes: results compared across steps and ranks by hash. */
static inline uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}

/* order = a permutation of 0 .. n-1 given by seed (Fisher-Yates driven by
 * mix): each rank passes its own seed to enqueue in its own order. */
static inline void shuffled(int *order, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) order[i] = (int)i;
  uint64_t s = mix(seed);
  for (size_t i = n; i-- > 1;) {
    s = mix(s);
    size_t j = (size_t)(s % (i + 1));
    int tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
}

/* GCC's binary16 type, x86-64 only: the independent float16 reference. */
__extension__ typedef _Float16 half;

/* ---- losing a rank ---- */

typedef struct {
  int signal, ms;
} testing_strike;

static inline void *testing_strike_run(void *arg) {
  const testing_strike *s = arg;
  sleep_ms(s->ms);
  raise(s->signal);
  return NULL;
}

/* Raises sig (SIGKILL, SIGSTOP: the whole process) ms from now, from a
 * second thread, so the calling thread can be inside a collective then. */
static inline void raise_later(int sig, int ms) {
  static testing_strike strike;
  strike = (testing_strike){sig, ms};
  pthread_t t;
  pthread_create(&t, NULL, testing_strike_run, &strike);
}

#endif
