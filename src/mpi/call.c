/*
 * call.c -- calling MPI from hvd: its state in hvd (mpi_int.h), a failed
 * call as hvd's error, and waiting for a request with a deadline.  The
 * rest of src/mpi is built over it: the controller (controller.c),
 * forming the job (meet.c), the collectives (ops.c) and hvd's types and
 * ops as MPI's (types.c).
 */
#include <sched.h>

#include "mpi_int.h"
#include "transport/live.h"

/* Tests of a request before waiting starts to yield the core. */
#define SPINS_BEFORE_YIELD 4096

hvd_mpi_state hvd__mpi = {0, MPI_THREAD_SINGLE, MPI_COMM_NULL, 0, 0};

int hvd__mpi_fail(int mpi_rc, const char *what) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(mpi_rc, text, &len);
  return hvd__err(HVD_E_PEER_LOST, "%s failed: %s", what, text);
}

int hvd__mpi_wait(MPI_Request *req, uint64_t deadline, const char *what, const char *knob) {
  for (unsigned long spins = 0;; spins++) {
    int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return hvd__mpi_fail(rc, what);
    if (done) return 0;
    if ((spins & 255) == 255) hvd__live_beat(); /* MPI's wait is this rank's: alive */
    if ((spins & 255) == 255 && hvd__now_ms() >= deadline)
      return hvd__err(HVD_E_TIMEOUT, "%s: not done within the deadline (%s); a rank is lost "
                      "or stuck", what, knob);
    if (spins >= SPINS_BEFORE_YIELD) sched_yield(); /* ranks may outnumber cores */
  }
}
