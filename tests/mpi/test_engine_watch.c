/*
 * test_engine_watch.c -- the engine's thread watching for work after a
 * cycle it ran (engine/engine.c, watch_for_work).
 *
 * Python's waits poll rather than drive the engine (python/_C/wait.c), so
 * every small operation a Python loop waits for at once is run by the
 * engine's thread; it used to sleep after each and be woken for the next
 * (tens of microseconds).  This program waits the same way, polling, in a
 * loop of 400 small allreduces, each checked against its closed form.
 * With a core for every rank the engine's thread must have taken some of
 * them while it watched (counted through the internal hvd__watch_count);
 * with more ranks than cores it must never watch.  Linked with libhvd's
 * objects for hvd__watch_count() and hvd__core_each().
 */
#include <sched.h>

#include <hvd.h>

#include "api_hooks.h"
#include "common.h"
#include "testing.h"

static int rank, size, failures, checks;

#define LOOPS 400

/* Enqueues and polls until done, as Python's synchronize() does. */
static void polled_allreduce(int i) {
  float v = (float)(rank + 1) * (float)(i % 7);
  hvd_handle h = hvd_allreduce_async(&v, &v, 1, HVD_FLOAT32, HVD_SUM, "watch.loop");
  CALL(h);
  int rc;
  while ((rc = hvd_poll(h)) == 0) sched_yield();
  CALL(rc);
  CALL(hvd_wait(h));
  float want = (float)(size * (size + 1) / 2) * (float)(i % 7);
  CHECK(v == want, "loop %d: %g, expected %g", i, (double)v, (double)want);
}

int main(void) {
  limit_stalls();
  if (init_or_complain() != 0) return 1;
  rank = hvd_rank();
  size = hvd_size();
  for (int i = 0; i < LOOPS; i++) polled_allreduce(i);
  uint64_t watched = 0;
  CALL(hvd__watch_count(&watched));
  if (hvd__core_each(hvd_local_size()))
    CHECK(watched > 0, "a core per rank (%d ranks, %d cores): none of %d operations was taken "
          "while the engine's thread watched", size, hvd__cpus(), LOOPS);
  else
    CHECK(watched == 0, "%d ranks on %d cores: the engine's thread watched %llu times", size,
          hvd__cpus(), (unsigned long long)watched);
  if (rank == 0)
    printf("%d ranks, %d cores: %llu of %d operations taken while watching\n", size,
           hvd__cpus(), (unsigned long long)watched, LOOPS);
  hvd_shutdown();
  return report_checks("test_engine_watch", rank, size, checks, failures);
}
