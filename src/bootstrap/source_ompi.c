/*
 * source_ompi.c -- a rank that Open MPI's mpirun started:
 * OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE.
 *
 * Built with MPI, the job forms through MPI (which must then agree with
 * these variables).  Built without, rank 0 hosts the rendezvous: at
 * 127.0.0.1 when every rank is on one host, else at
 * HOROVOD_GLOO_RENDEZVOUS_ADDR (rank 0's host), with _HOROVOD_SECRET_KEY
 * (`mpirun -x _HOROVOD_SECRET_KEY`) and a port derived from it unless
 * HOROVOD_GLOO_RENDEZVOUS_PORT says; without the secret, the error says
 * that a build with MPI would need none.
 */
#include "env.h"
#include "mpi_controller.h"
#include "source.h"

static int present(void) { return hvd__env("OMPI_COMM_WORLD_SIZE") != NULL; }

static int read_job(hvd_job *job) {
  HVD__CHECK(hvd__env_world(job, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"));
  job->meet.launcher = "mpirun";
  if (hvd__mpi_built()) {
    job->meet.kind = HVD_MEET_MPI;
    return 0;
  }
  if (job->size == 1) return 0;
  if (!hvd__param_raw(HVD_P_SECRET_KEY)) /* what a build with MPI would not need */
    return hvd__err(HVD_E_ENV, "_HOROVOD_SECRET_KEY is not set: this hvd was built without MPI, "
                    "so a job mpirun starts meets at rank 0's rendezvous and authenticates "
                    "every connection with a secret its ranks share: export "
                    "_HOROVOD_SECRET_KEY=$(hvdrun --make-secret) and pass it on with mpirun -x "
                    "_HOROVOD_SECRET_KEY; a build with MPI (libopenmpi-dev present when hvd is "
                    "built; hvdrun --check-build says) forms the job through MPI and needs no "
                    "secret");
  return hvd__meet_rank0(job, "mpirun", job->local_size == job->size ? "127.0.0.1" : NULL, 0,
                         "mpirun");
}

const hvd_source hvd__source_ompi = {"Open MPI", present, read_job};
