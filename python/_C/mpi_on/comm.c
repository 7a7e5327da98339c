/*
 * comm.c -- hvd._C's init on an MPI communicator, in builds with MPI:
 * mpi4py hands over a communicator as its Fortran handle
 * (comm.py2f()), which MPI_Comm_f2c makes a C one again.
 */
#include <mpi.h>

#include "../pyhvd.h"
#include "hvd_mpi.h"

int pyhvd_init_comm(long fortran_handle) {
  return hvd_init_comm(MPI_Comm_f2c((MPI_Fint)fortran_handle));
}
