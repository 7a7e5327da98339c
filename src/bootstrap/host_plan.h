/*
 * host_plan.h -- which ranks share a host, and so which transport joins
 * them, decided from the rendezvous table alone.
 *
 * The launcher says which ranks it placed together: the same
 * HOROVOD_HOSTNAME (each rank registers it as `hostname`) and
 * HOROVOD_LOCAL_RANK/SIZE.  Before a segment of shared memory joins them,
 * that claim is checked against where they really run (`host_id`: the
 * kernel's node name and boot id): a launcher that got it wrong costs
 * speed (TCP, with a warning), never a wrong result or a hang.
 *
 * Every rank gets the same table, so every rank computes the same plan:
 * the transport the job uses is agreed without another message.
 */
#ifndef HVD_HOST_PLAN_H
#define HVD_HOST_PLAN_H

#include "rdzv/rdzv.h"

typedef enum {
  HVD_PLAN_TCP,    /* no shared memory anywhere */
  HVD_PLAN_SHM,    /* one host, every rank in one segment (numbered as the job) */
  HVD_PLAN_HYBRID  /* several hosts, shared memory on at least one */
} hvd_plan_mode;

typedef struct {
  hvd_plan_mode mode;
  /* This rank's host: the job's ranks placed there, in local-rank order
   * (in rank order under HVD_PLAN_SHM, where the segment's numbers must
   * be the job's); n is 1 for a rank alone. */
  int *members;
  int n, me;
  int shm;       /* this rank's host sets up shared memory */
  char why[768]; /* why this host may not (a misplacement), or "" */
} hvd_host_plan;

/* Plans for `rank` from the table of `size` entries.  HVD_E_NOMEM only:
 * a table that makes no sense means TCP (and why says so). */
int hvd__host_plan(const hvd_rdzv_entry *table, int size, int rank, hvd_host_plan *out);
void hvd__host_plan_free(hvd_host_plan *p);

/* Numbers the ranks of each host name 0, 1, ... in rank order: each
 * entry's local_rank and local_size, for a job whose launcher did not
 * (MPI, a sub-job of hvd_init_ranks()). */
void hvd__layout_local(hvd_rdzv_entry *table, int size);

/* Horovod's cross rank and size of `rank`: its place among the ranks of
 * its local rank, in rank order, and how many there are. */
void hvd__layout_cross(const hvd_rdzv_entry *table, int size, int rank, int *cross_rank,
                       int *cross_size);

#endif /* HVD_HOST_PLAN_H */
