/*
 * init_comm.c -- hvd_init_comm() (hvd_mpi.h): hvd_init over a communicator
 * the program made, above the rest of hvd as hvd_init is.
 */
#include "hvd_mpi.h"
#include "mpi_int.h"

int hvd_init_comm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL)
    return hvd__err(HVD_E_INVALID, "hvd_init_comm: MPI_COMM_NULL (a rank outside the "
                    "communicator has no job to join)");
  int init = 0;
  MPI_Initialized(&init);
  if (!init)
    return hvd__err(HVD_E_INVALID, "hvd_init_comm: MPI is not initialised: the program "
                    "initialises MPI before it hands hvd a communicator");
  hvd_init_spec spec = {NULL, 0, &comm};
  return hvd__init(&spec);
}
