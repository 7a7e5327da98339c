/*
 * elastic_int.h -- what elastic.c needs from the rest of the library:
 * news of host updates from hvdrun, and leaving one job for the next.
 */
#ifndef HVD_ELASTIC_INT_H
#define HVD_ELASTIC_INT_H

#include <stdint.h>

#include "common.h"

/* The newest host update hvdrun announced to this worker: stamps grow
 * with every announcement (0: none yet), and the kinds seen since the
 * job was formed. */
typedef struct {
  uint64_t stamp;
  int added, removed;
} hvd__elastic_update;

/* What hvdrun has announced so far; never blocks.  All zero outside an
 * elastic job. */
int hvd__elastic_poll_updates(hvd__elastic_update *u);

/* hvd_shutdown() and hvd_init() for the next job of an elastic run,
 * adding the process sets the program added again, with their ids, over
 * those of their ranks that still exist (a set left without any is not
 * added: collectives on it then fail saying it does not exist).  Tries
 * again while a worker is lost in the middle of it; fails when hvdrun
 * refuses the next job (it ended the job: not recoverable). */
int hvd__elastic_reform(void);

/* 1 for the errors after which a new job can go on from the last
 * commit: a worker was lost or the communicator broke. */
int hvd__elastic_recoverable(int rc);

#endif /* HVD_ELASTIC_INT_H */
