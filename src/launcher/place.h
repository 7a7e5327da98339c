/*
 * place.h -- which host each rank runs on, and the HOROVOD_LOCAL_* and
 * HOROVOD_CROSS_* values that follow from it.
 */
#ifndef HVDRUN_PLACE_H
#define HVDRUN_PLACE_H

typedef struct {
  int local_rank, local_size; /* among the ranks on this rank's host */
  int cross_rank, cross_size; /* among the ranks with this local rank */
} rank_place;

/* Places np ranks on nhosts hosts the way horovodrun does: host by host,
 * in order, slots[h] ranks on host h until np are placed (later hosts get
 * none).  local_size is the host's rank count; cross_size is the number
 * of hosts with a rank of this local rank, cross_rank this host's index
 * among them.  out has np entries.  0, or -1 when the slots do not cover
 * np (or out of memory). */
int place_ranks(const long *slots, int nhosts, int np, rank_place *out);

#endif /* HVDRUN_PLACE_H */
