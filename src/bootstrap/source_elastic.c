/*
 * source_elastic.c -- a worker of an elastic job (hvdrun --min-np/--max-np
 * ...): HOROVOD_ELASTIC=1 and HOROVOD_ELASTIC_WORKER_ID, hvdrun's
 * rendezvous as for a fixed job, HOROVOD_HOSTNAME.  Its rank, size and
 * local and cross values are not in the environment: hvdrun gives them
 * at the rendezvous, anew for every job it forms (rdzv_elastic.h).
 */
#include <string.h>

#include "env.h"
#include "source.h"

static int present(void) {
  const char *v = hvd__param_raw(HVD_P_ELASTIC);
  return v && strcmp(v, "0") != 0;
}

static int read_job(hvd_job *job) {
  const char *v = hvd__param_raw(HVD_P_ELASTIC);
  long worker;
  if (strcmp(v, "1") != 0)
    return hvd__err(HVD_E_ENV, "HOROVOD_ELASTIC='%s': expected 1 (or 0, or unset)", v);
  HVD__CHECK(hvd__env_int("HOROVOD_ELASTIC_WORKER_ID", 0, 0x7fffffffL, &worker));
  job->rank = job->size = job->local_rank = job->local_size = -1;
  job->cross_rank = job->cross_size = -1;
  HVD__CHECK(hvd__launcher_hostname(job));
  job->meet.kind = HVD_MEET_ELASTIC;
  job->meet.launcher = "hvdrun (elastic)";
  job->meet.worker = (uint32_t)worker;
  return hvd__meet_hvdrun(&job->meet);
}

const hvd_source hvd__source_elastic = {"hvdrun elastic", present, read_job};
