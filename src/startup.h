/*
 * startup.h -- the job's communicator, assembled in one place for every
 * program that runs collectives: hvd_init (api.c) and hvd-bench --direct,
 * which runs the collectives without the engine.
 *
 *   hvd__startup_comm   the global communicator over the transport the
 *                       bootstrap built, with this rank's place and the
 *                       collectives' settings from the environment
 *                       (HOROVOD_ALLREDUCE's algorithm,
 *                       HOROVOD_HIERARCHICAL_ALLREDUCE), and MPI's
 *                       collectives when HOROVOD_CPU_OPERATIONS=mpi;
 *   hvd__startup_agree  rank 0's settings win, so that every rank runs the
 *                       same algorithm even where their environments
 *                       differ (ranks that ran different algorithms would
 *                       exchange frames neither expects); then the
 *                       hierarchy is built where it is switched on.
 */
#ifndef HVD_STARTUP_H
#define HVD_STARTUP_H

#include "bootstrap/bootstrap.h"
#include "comm.h"

/* HOROVOD_CPU_OPERATIONS: *mpi 1 for "mpi", 0 for "gloo" (hvd's own);
 * HVD_E_ENV for anything else or for mpi in a build without MPI. */
int hvd__startup_cpu_operations(int *mpi);

/* Builds *c over xport (which it then owns, as hvd__comm_init) for `job`.
 * On failure *c is still to be destroyed (hvd__comm_destroy). */
int hvd__startup_comm(hvd_comm *c, const hvd_job *job, hvd_transport *xport, int cpu_mpi);

/* Collective over c: every rank takes rank 0's allreduce algorithm and
 * hierarchical switch; `tunable` (the autotuner may switch the hierarchy
 * on later, the same on every rank) builds the hierarchy anyway. */
int hvd__startup_agree(hvd_comm *c, int tunable);

#endif /* HVD_STARTUP_H */
