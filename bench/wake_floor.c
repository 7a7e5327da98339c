/*
 * wake_floor.c -- the floor under a collective of n processes sharing
 * this host's cores: n plain processes doing rounds of sleep and wake,
 * each round a barrier on one futex word (all but the last to arrive
 * sleep; the last wakes them all with one call), and nothing else.
 * A collective of n ranks can take no fewer wake-ups per round when the
 * ranks outnumber the cores, so bench/scale divides hvd's time per round
 * (hvd-bench --steps) by this.
 *
 *   wake_floor N ROUNDS [BATCHES]
 *
 * Prints "wake_floor,N,us_per_round": the median over BATCHES (default 5)
 * of the time of ROUNDS rounds, divided by ROUNDS; after one untimed
 * batch, with every process started.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  _Alignas(64) _Atomic uint64_t arrived; /* over every round */
  _Alignas(64) _Atomic uint32_t wake;    /* the futex word */
  _Alignas(64) double batch_us[64];      /* process 0's timings */
} shared;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Round k (from 1) of n processes. */
static void round_k(shared *s, uint64_t k, uint64_t n) {
  uint32_t seq = atomic_load(&s->wake);
  if (atomic_fetch_add(&s->arrived, 1) + 1 == k * n) {
    atomic_fetch_add(&s->wake, 1);
    syscall(SYS_futex, &s->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    return;
  }
  while (atomic_load(&s->arrived) < k * n) {
    syscall(SYS_futex, &s->wake, FUTEX_WAIT, seq, NULL, NULL, 0);
    seq = atomic_load(&s->wake);
  }
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int n = argc > 2 ? atoi(argv[1]) : 0, rounds = argc > 2 ? atoi(argv[2]) : 0;
  int batches = argc > 3 ? atoi(argv[3]) : 5;
  if (n < 1 || rounds < 1 || batches < 1 || batches > 64) {
    fprintf(stderr, "usage: wake_floor N ROUNDS [BATCHES <= 64]\n");
    return 2;
  }
  shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return perror("mmap"), 1;
  for (int p = 0; p < n; p++) {
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid > 0) continue;
    uint64_t k = 0;
    for (int b = 0; b <= batches; b++) { /* batch 0: everyone started, untimed */
      double t0 = now_us();
      for (int r = 0; r < rounds; r++) round_k(s, ++k, (uint64_t)n);
      if (p == 0 && b > 0) s->batch_us[b - 1] = (now_us() - t0) / rounds;
    }
    _exit(0);
  }
  int failed = 0;
  for (int p = 0; p < n; p++) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  if (failed) return fprintf(stderr, "wake_floor: a process failed\n"), 1;
  qsort(s->batch_us, (size_t)batches, sizeof(double), by_value);
  printf("wake_floor,%d,%.2f\n", n, s->batch_us[batches / 2]);
  return 0;
}
