/*
 * controller.c -- MPI's life inside hvd (mpi_controller.h).
 *
 * hvd uses the program's MPI when the program initialised it (and never
 * finalises it then), and otherwise initialises MPI itself at
 * MPI_THREAD_MULTIPLE and finalises it in hvd_shutdown, or at the
 * process's exit when the program never calls hvd_shutdown (mpirun ends a
 * job in error when a process that initialised MPI exits without
 * finalising it) -- but never after the job broke: finalising waits for
 * every process, the dead included, and the process must be able to
 * exit.  Below
 * MPI_THREAD_MULTIPLE (a program that asked for MPI_THREAD_SINGLE, say)
 * hvd still forms the job through MPI, on the thread that calls hvd_init,
 * before its engine thread exists, and then never calls MPI again: its
 * own transports carry everything.  HOROVOD_CPU_OPERATIONS=mpi, which
 * calls MPI from the engine thread, needs MPI_THREAD_MULTIPLE and is
 * refused otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "mpi_int.h"

int hvd__mpi_built(void) { return 1; }
int hvd__mpi_enabled(void) { return hvd__mpi.enabled; }

int hvd__mpi_threads_supported(void) {
  int init = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&init);
  if (init) MPI_Query_thread(&level);
  return init && level == MPI_THREAD_MULTIPLE;
}

static const char *level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
  }
}

static int (*exit_shutdown)(void); /* api.c's, hvd__mpi_on_exit */

void hvd__mpi_on_exit(int (*shutdown)(void)) { exit_shutdown = shutdown; }

/* At exit: what hvd_shutdown would have done, if the program did not. */
static void at_exit(void) {
  if (!hvd__mpi.ours) return;
  if (exit_shutdown && exit_shutdown()) return; /* finalised unless the job broke */
  int fin = 1;
  MPI_Finalized(&fin);
  if (!fin && !hvd__mpi.dead) MPI_Finalize();
  hvd__mpi.ours = 0;
}

int hvd__mpi_start(void) {
  int init = 0, fin = 0;
  MPI_Finalized(&fin);
  if (fin)
    return hvd__err(HVD_E_ENV, "MPI was finalised (by an earlier hvd_shutdown, or by the "
                    "program) and cannot start again in this process");
  MPI_Initialized(&init);
  if (init) {
    hvd__mpi.ours = 0;
    MPI_Query_thread(&hvd__mpi.thread_level);
  } else {
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &hvd__mpi.thread_level);
    if (rc != MPI_SUCCESS) return hvd__mpi_fail(rc, "MPI_Init_thread");
    hvd__mpi.ours = 1;
    static int registered;
    if (!registered++) atexit(at_exit);
  }
  if (hvd__mpi.thread_level < MPI_THREAD_MULTIPLE)
    hvd__log(HVD_LOG_DEBUG, "MPI runs at %s: hvd forms the job through MPI on this thread and "
             "then uses only its own transports", level_name(hvd__mpi.thread_level));
  return 0;
}

int hvd__mpi_ops_attach(hvd_comm *c) {
  if (!hvd__mpi.enabled)
    return hvd__err(HVD_E_ENV, "HOROVOD_CPU_OPERATIONS=mpi needs a job formed through MPI "
                    "(started by mpirun, srun --mpi=pmix or hvdrun --mpi, or hvd_init_comm()); "
                    "this one was started by something else");
  if (hvd__mpi.thread_level < MPI_THREAD_MULTIPLE)
    return hvd__err(HVD_E_ENV, "HOROVOD_CPU_OPERATIONS=mpi: MPI was initialised at %s, and "
                    "hvd calls MPI from its background thread, which needs "
                    "MPI_THREAD_MULTIPLE: call MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) "
                    "or let hvd initialise MPI", level_name(hvd__mpi.thread_level));
  c->coll = &hvd__mpi_coll_ops;
  return 0;
}

void hvd__mpi_release(hvd_mpi_end how) {
  hvd__mpi.enabled = 0;
  if (how == HVD_MPI_NEVER) { /* nothing that may wait for the dead */
    hvd__mpi.dead = 1;
    return;
  }
  if (hvd__mpi.comm != MPI_COMM_NULL) MPI_Comm_free(&hvd__mpi.comm);
  hvd__mpi_types_free();
  if (how == HVD_MPI_FINALIZE && hvd__mpi.ours) {
    MPI_Finalize();
    hvd__mpi.ours = 0;
  }
}
