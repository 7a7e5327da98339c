/*
 * mpirun.h -- hvdrun --mpi: the job started by Open MPI's mpirun instead of
 * hvdrun's own launcher, as horovodrun --mpi does.
 */
#ifndef HVDRUN_MPIRUN_H
#define HVDRUN_MPIRUN_H

#include "hosts.h"
#include "options.h"

/* Replaces hvdrun with mpirun for the job o describes on the hosts hvdrun
 * planned (checked as for its own launcher; rank 0 goes to the first);
 * returns only when mpirun cannot be run, with hvdrun's exit status (127)
 * after saying why. */
int mpirun_exec(const hvdrun_options *o, const host_plan *hosts);

#endif /* HVDRUN_MPIRUN_H */
