/*
 * mpi_controller.h -- MPI as the rest of libhvd sees it: no MPI type
 * crosses this line, so the core builds the same with and without MPI.
 *
 * With HVD_WITH_MPI (CMake; on when Open MPI's development files are
 * found) src/mpi/ implements these; without it src/mpi_off/ does, and
 * every one says there is no MPI.  What MPI does for hvd:
 *
 *   - forms the job (HVD_MEET_MPI): under mpirun, `srun --mpi=pmix`, or
 *     on a communicator the program gives hvd_init_comm(); the ranks
 *     exchange their rendezvous entries and a fresh secret through MPI
 *     and then talk over hvd's own transports;
 *   - with HOROVOD_CPU_OPERATIONS=mpi, runs the data collectives
 *     (coll.h's hvd_coll_ops) while hvd's engine keeps negotiation,
 *     fusion and the timeline.
 *
 * Only the thread calling hvd_init (forming the job) and the engine
 * thread (collectives) ever call MPI inside hvd.
 */
#ifndef HVD_MPI_CONTROLLER_H
#define HVD_MPI_CONTROLLER_H

#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "comm.h"

/* 1 in builds with MPI. */
int hvd__mpi_built(void);

/* Forms the job through MPI (job->meet.kind == HVD_MEET_MPI): initialises
 * MPI if the program has not (at MPI_THREAD_MULTIPLE), takes
 * MPI_COMM_WORLD, or the communicator of job->meet.mpi_comm, or the group
 * of job->ranks; fills in job's rank, size, local rank and size and checks
 * them against what the environment said (HVD_E_ENV naming the variable);
 * exchanges every rank's entry (listening on *listen_fd, made here) and a
 * fresh secret (*key) from rank 0.  Everything before `deadline`.
 * *table (job->size entries) is malloc()ed. */
int hvd__mpi_meet(hvd_job *job, uint64_t deadline, hvd_rdzv_entry **table, int *listen_fd,
                  hvd_secret *key);

/* Makes c's data collectives run through MPI (c->coll): HVD_E_UNSUPPORTED
 * without MPI, HVD_E_ENV when the job was not formed through MPI or MPI
 * is below MPI_THREAD_MULTIPLE (naming what is needed). */
int hvd__mpi_ops_attach(hvd_comm *c);

/* When MPI is finalised, if hvd initialised it. */
typedef enum {
  HVD_MPI_FINALIZE, /* now: hvd_shutdown of an intact job */
  HVD_MPI_AT_EXIT,  /* at the process's exit: this rank left a job it never joined */
  HVD_MPI_NEVER     /* the job broke (a lost rank): finalising could wait forever on
                       the dead, so the process exits without it */
} hvd_mpi_end;

/* hvd_shutdown, or a failed hvd_init: lets go of hvd's communicator
 * (unless NEVER) and finalises MPI as `how` says. */
void hvd__mpi_release(hvd_mpi_end how);

/* What MPI's finalisation at the process's exit does first, when hvd
 * initialised MPI (api.c's hvd_shutdown if hvd is initialised, returning
 * 1 then; 0 if it was not).  Set before the job is formed. */
void hvd__mpi_on_exit(int (*shutdown)(void));

/* hvd_mpi_enabled() and hvd_mpi_threads_supported(). */
int hvd__mpi_enabled(void);
int hvd__mpi_threads_supported(void);

#endif /* HVD_MPI_CONTROLLER_H */
