/*
 * source_pmi.c -- a rank that MPICH's Hydra (mpiexec) started: PMI_RANK,
 * PMI_SIZE, MPI_LOCALRANKID and MPI_LOCALNRANKS.
 *
 * hvd's MPI is Open MPI's, which cannot join an MPICH job, so such a job
 * meets at rank 0's rendezvous whatever the build: at 127.0.0.1 when
 * every rank is on one host, else at HOROVOD_GLOO_RENDEZVOUS_ADDR, with
 * _HOROVOD_SECRET_KEY (`mpiexec -genv _HOROVOD_SECRET_KEY ...` or the
 * environment) and a port derived from it unless
 * HOROVOD_GLOO_RENDEZVOUS_PORT says.
 */
#include "source.h"

static int present(void) { return hvd__env("PMI_SIZE") != NULL; }

static int read_job(hvd_job *job) {
  HVD__CHECK(hvd__env_world(job, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"));
  job->meet.launcher = "mpiexec";
  if (job->size == 1) return 0;
  return hvd__meet_rank0(job, "mpiexec", job->local_size == job->size ? "127.0.0.1" : NULL, 0,
                         "mpiexec");
}

const hvd_source hvd__source_pmi = {"MPICH", present, read_job};
