/*
 * none.c -- mpi_controller.h in a build without MPI (HVD_WITH_MPI=OFF):
 * no job forms through MPI, and HOROVOD_CPU_OPERATIONS=mpi is refused.
 * A job under mpirun still runs: its source (source_ompi.c) meets at
 * rank 0's rendezvous instead.
 */
#include "mpi_controller.h"

int hvd__mpi_built(void) { return 0; }
int hvd__mpi_enabled(void) { return 0; }
int hvd__mpi_threads_supported(void) { return 0; }

int hvd__mpi_meet(hvd_job *job, uint64_t deadline, hvd_rdzv_entry **table, int *listen_fd,
                  hvd_secret *key) {
  (void)job, (void)deadline, (void)table, (void)listen_fd, (void)key;
  return hvd__err(HVD_E_UNSUPPORTED, "this hvd was built without MPI (HVD_WITH_MPI=OFF)");
}

int hvd__mpi_ops_attach(hvd_comm *c) {
  (void)c;
  return hvd__err(HVD_E_UNSUPPORTED, "this hvd was built without MPI");
}

void hvd__mpi_release(hvd_mpi_end how) { (void)how; }

void hvd__mpi_on_exit(int (*shutdown)(void)) { (void)shutdown; }
