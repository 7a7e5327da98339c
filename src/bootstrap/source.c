/*
 * source.c -- the table of sources (source.h) and hvd__job_from_env(),
 * which asks them in order.  The sources are built over the helpers they
 * share (source_env.c).
 */
#include "source.h"

#include <string.h>

static const hvd_source *const sources[] = {
    &hvd__source_elastic, &hvd__source_hvdrun, &hvd__source_ompi, &hvd__source_pmix, &hvd__source_pmi,
    &hvd__source_slurm,
};

/* No launcher: a job of one rank. */
static void alone(hvd_job *job) {
  job->size = job->local_size = job->cross_size = 1;
  job->cross_rank = 0;
  job->source = "none";
  job->meet.kind = HVD_MEET_ALONE;
  job->meet.launcher = "nothing";
  hvd__own_hostname(job);
}

int hvd__job_from_env(hvd_job *job) {
  memset(job, 0, sizeof *job);
  job->cross_rank = job->cross_size = -1;
  job->control_fd = -1;
  hvd__host_id(job->host_id);
  for (size_t i = 0; i < HVD__ARRAY_LEN(sources); i++) {
    if (!sources[i]->present()) continue;
    job->source = sources[i]->name;
    int rc = sources[i]->read(job);
    if (rc < 0) return rc;
    if (job->size == 1 && job->meet.kind != HVD_MEET_MPI) { /* nobody to meet */
      job->meet.kind = HVD_MEET_ALONE;
      job->cross_rank = 0;
      job->cross_size = 1;
    }
    return 0;
  }
  alone(job);
  return 0;
}
