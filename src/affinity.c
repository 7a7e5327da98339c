/*
 * affinity.c -- pinning the engine thread (affinity.h).
 *
 * Horovod pins its background thread when HOROVOD_THREAD_AFFINITY lists
 * one CPU per rank of the host; horovodrun --thread-affinity N sets the
 * variable to a single N, which therefore pins only a job of one rank per
 * host.  hvd reads the variable the same way (hvdrun takes a list too).
 * Only the engine's own thread is pinned: a caller that drives a cycle
 * itself (engine.c) runs where the caller runs.
 */
#include "affinity.h"

#include <sched.h>
#include <string.h>

#include "common.h"
#include "env.h"

void hvd__affinity_apply(pthread_t t, int local_rank, int local_size) {
  const char *name = hvd__params[HVD_P_THREAD_AFFINITY].name;
  int core, count;
  if (hvd__param_cores(HVD_P_THREAD_AFFINITY, local_rank, &core, &count) < 0) {
    hvd__log(HVD_LOG_WARNING, "%s; the engine thread is not pinned", hvd_last_error());
    return;
  }
  if (count == 0) return;
  if (count < local_size) {
    if (local_rank == 0)
      hvd__log(HVD_LOG_WARNING, "%s='%s' names %d CPU%s for the %d ranks of this host (one "
               "each is needed): the engine threads are not pinned", name,
               hvd__param_raw(HVD_P_THREAD_AFFINITY), count, count == 1 ? "" : "s", local_size);
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((size_t)core, &set);
  int rc = pthread_setaffinity_np(t, sizeof set, &set);
  if (rc != 0)
    hvd__log(HVD_LOG_WARNING, "%s: cannot pin the engine thread of local rank %d to CPU %d: "
             "%s; it runs unpinned", name, local_rank, core, strerror(rc));
  else
    hvd__log(HVD_LOG_DEBUG, "%s: the engine thread runs on CPU %d", name, core);
}
