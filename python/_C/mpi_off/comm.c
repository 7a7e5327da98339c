/*
 * comm.c -- hvd._C's init on an MPI communicator, in builds without MPI:
 * there is none to take.
 */
#include "../pyhvd.h"

int pyhvd_init_comm(long fortran_handle) {
  (void)fortran_handle;
  return HVD_E_UNSUPPORTED;
}
