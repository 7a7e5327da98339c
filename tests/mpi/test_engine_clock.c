/*
 * test_engine_clock.c -- a blocking small operation on an idle engine
 * reads no clock on its way (engine/engine.c, hvd__engine_clock_ns).
 *
 * On a VM a clock read costs 20-25 ns, a tenth of a whole small
 * allreduce; the engine used to read it three times per call (a cycle's
 * start, its end, the stall inspector's look).  This program counts the
 * calls of clock_gettime() made by its own thread (it defines the
 * function, so libhvd's calls land here, and forwards them to the
 * kernel) around loops of blocking calls of cached tensors:
 *
 *   allreduce    200 calls of one tensor (the fast path's agreement at
 *                np 1, the rider at np 2 and more): none.
 *   in turn      two tensors and a broadcast called in turn: none.
 *
 * Only at np 1 is the count exact: with peers, a rank that arrives first
 * waits in the transport, which reads the clock for its deadline once it
 * stops spinning.  With more ranks the results are still checked, and the
 * count printed.
 */
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, failures, checks;

static _Thread_local int counting;
static _Thread_local long reads;

/* Every clock_gettime() of this process, libhvd's included (exported:
 * the build hides symbols by default). */
__attribute__((visibility("default"))) int clock_gettime(clockid_t clk, struct timespec *ts) {
  if (counting) reads++;
  return (int)syscall(SYS_clock_gettime, clk, ts);
}

#define LOOPS 200

static void allreduce_once(const char *name, int i) {
  float v[2] = {(float)(rank + 1), (float)i};
  CALL(hvd_allreduce(v, v, 2, HVD_FLOAT32, HVD_SUM, name));
  float want0 = (float)(size * (size + 1) / 2), want1 = (float)(size * i);
  CHECK(v[0] == want0 && v[1] == want1, "%s call %d: {%g, %g}, expected {%g, %g}", name, i,
        (double)v[0], (double)v[1], (double)want0, (double)want1);
}

static void broadcast_once(int i) {
  int32_t v = rank == 0 ? i : -1;
  CALL(hvd_broadcast(&v, 1, HVD_INT32, 0, "clock.bcast"));
  CHECK(v == i, "broadcast call %d: %d, expected %d", i, (int)v, i);
}

/* The clock reads of this thread over LOOPS rounds of body, after two
 * untimed rounds (the first negotiates in full and fills the cache). */
static long reads_over(void (*body)(int)) {
  body(-2);
  body(-1);
  reads = 0;
  counting = 1;
  for (int i = 0; i < LOOPS; i++) body(i);
  counting = 0;
  return reads;
}

static void one_tensor(int i) { allreduce_once("clock.one", i); }

static void in_turn(int i) {
  allreduce_once("clock.loss", i);
  allreduce_once("clock.metric", i);
  broadcast_once(i);
}

static void check_reads(const char *what, long n) {
  if (rank == 0) printf("%s: %ld clock reads in %d rounds\n", what, n, LOOPS);
  if (size == 1)
    CHECK(n == 0, "%s: %ld clock reads by the calling thread in %d rounds on an idle engine",
          what, n, LOOPS);
}

int main(void) {
  limit_stalls();
  if (init_or_complain() != 0) return 1;
  rank = hvd_rank();
  size = hvd_size();
  check_reads("one tensor", reads_over(one_tensor));
  check_reads("in turn", reads_over(in_turn));
  hvd_shutdown();
  return report_checks("test_engine_clock", rank, size, checks, failures);
}
