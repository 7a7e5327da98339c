/*
 * source_pmix.c -- a task of `srun --mpi=pmix`, in a build with MPI:
 * SLURM's variables and PMIX_RANK, but no OMPI_COMM_WORLD_*.  The job
 * forms through MPI (over PMIx); what SLURM says of the step is checked
 * as for a plain srun task (source_slurm.c), and must agree with
 * PMIX_RANK and, later, with MPI.  Without MPI in the build the SLURM
 * source takes such a task: rank 0's rendezvous.
 */
#include "mpi_controller.h"
#include "source.h"

static int present(void) {
  return hvd__env("PMIX_RANK") && hvd__env("SLURM_PROCID") && hvd__mpi_built();
}

static int read_job(hvd_job *job) {
  hvd_slurm_step s;
  HVD__CHECK(hvd__slurm_step(job, &s));
  hvd__slurm_hostlist_free(&s.nodes);
  HVD__CHECK(hvd__env_agree("PMIX_RANK", job->rank, "SLURM_PROCID"));
  job->meet.launcher = "srun --mpi=pmix";
  job->meet.kind = HVD_MEET_MPI;
  return 0;
}

const hvd_source hvd__source_pmix = {"PMIx", present, read_job};
