/*
 * mpi_int.h -- the MPI controller's private state, shared by its files:
 *   call.c        the state, a failed call as hvd's error, waiting
 *   controller.c  MPI's life in hvd: initialise or adopt it, hvd's own
 *                 communicator, release
 *   init_comm.c   hvd_init_comm(), over the rest of hvd as hvd_init is
 *   meet.c        forming the job: entries and a fresh secret through MPI
 *   ops.c         the collectives through MPI (HOROVOD_CPU_OPERATIONS=mpi)
 *   types.c       hvd's dtypes and ops as MPI's, with user-defined ops
 *                 over reduce.c's kernels where MPI's own would differ
 */
#ifndef HVD_MPI_INT_H
#define HVD_MPI_INT_H

#include <mpi.h>

#include "coll/coll.h"
#include "mpi_controller.h"

typedef struct {
  int ours;         /* hvd called MPI_Init_thread, so hvd finalises it */
  int thread_level; /* what MPI provides */
  MPI_Comm comm;    /* hvd's own (a duplicate), errors returned; MPI_COMM_NULL */
  int enabled;      /* the current job was formed through MPI */
  int dead;         /* a job broke: MPI is never finalised */
} hvd_mpi_state;

/* The thread driving the engine's cycles and hvd_init only
 * (mpi_controller.h); call.c's. */
extern hvd_mpi_state hvd__mpi;

/* Waits for req, calling MPI_Test (which is what drives MPI's progress),
 * until `deadline`: HVD_E_TIMEOUT naming `what` and the variable that set
 * the deadline (`knob`), HVD_E_PEER_LOST with MPI's error string when MPI
 * fails.  A request left behind by a timeout is abandoned: MPI cannot
 * cancel a collective, and the communicator is broken from then on. */
int hvd__mpi_wait(MPI_Request *req, uint64_t deadline, const char *what, const char *knob);

/* An MPI return code as hvd's error (HVD_E_PEER_LOST), naming the call. */
int hvd__mpi_fail(int mpi_rc, const char *what);

/* Starts MPI (or adopts the program's) for forming a job; HVD_E_ENV when
 * it was finalised already (controller.c). */
int hvd__mpi_start(void);

/* types.c: MPI's datatype and op for an hvd dtype and op (AVERAGE: the
 * sum, divided afterwards by the caller), creating hvd's user-defined ops
 * at first use; freed by hvd__mpi_types_free() before MPI is finalised. */
int hvd__mpi_type(hvd_dtype dtype, MPI_Datatype *type);
int hvd__mpi_op(hvd_dtype dtype, hvd_op op, MPI_Datatype *type, MPI_Op *mop);
void hvd__mpi_types_free(void);

/* ops.c's table. */
extern const hvd_coll_ops hvd__mpi_coll_ops;

#endif /* HVD_MPI_INT_H */
