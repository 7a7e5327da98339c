/*
 * hvd_mpi.h -- hvd on a communicator the program made (installed only by
 * builds with MPI; needs <mpi.h>, e.g. compile with mpicc).
 *
 *   MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
 *   MPI_Comm half;
 *   MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
 *   hvd_init_comm(half);            // a job of the ranks of `half`
 *   ...                             // hvd.h's calls, as after hvd_init()
 *   hvd_shutdown();
 *   MPI_Finalize();                 // the program's: hvd never finalises
 *                                   // an MPI it did not initialise
 */
#ifndef HVD_MPI_H
#define HVD_MPI_H

#include <mpi.h>

#include "hvd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hvd_init() for a job of the ranks of `comm` (numbered as comm numbers
 * them), which every one of them calls.  hvd duplicates comm, so the
 * program may free it afterwards; MPI must be initialised already.  The
 * ranks exchange their addresses and a fresh secret through MPI and then
 * talk over hvd's own transports (HOROVOD_CPU_OPERATIONS=mpi: through
 * MPI).  Below MPI_THREAD_MULTIPLE hvd calls MPI only inside this
 * function, on the calling thread; HOROVOD_CPU_OPERATIONS=mpi then fails
 * with HVD_E_ENV saying what is needed.  MPI_COMM_NULL is HVD_E_INVALID. */
HVD_EXTERN int hvd_init_comm(MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* HVD_MPI_H */
