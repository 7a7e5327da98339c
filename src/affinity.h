/*
 * affinity.h -- HOROVOD_THREAD_AFFINITY: the CPU the engine thread runs on.
 */
#ifndef HVD_AFFINITY_H
#define HVD_AFFINITY_H

#include <pthread.h>

/* Pins thread t as HOROVOD_THREAD_AFFINITY says for the rank that is
 * local rank `local_rank` of `local_size` on its host: to the
 * local_rank-th CPU of the list (Horovod's reading).  Unset: nothing.
 * A list with fewer CPUs than the host has ranks, or a CPU the process
 * may not run on: a warning, and the thread is not pinned (Horovod logs
 * and goes on too).  hvd_init checks the text before (env.h's CORES);
 * what is not a list of CPU numbers is warned about here too. */
void hvd__affinity_apply(pthread_t t, int local_rank, int local_size);

#endif /* HVD_AFFINITY_H */
