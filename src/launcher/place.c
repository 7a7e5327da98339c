/*
 * place.c -- placing ranks on hosts (place.h).
 *
 * With uneven hosts, say 3 and 1 slots, local rank 0 exists on both hosts
 * but local ranks 1 and 2 only on the first: ranks 1 and 2 have
 * cross_size 1 while ranks 0 and 3 have 2 (Horovod's values: the cross
 * communicator of local rank l spans the hosts that have an l).
 */
#include "place.h"

#include <stdlib.h>

int place_ranks(const long *slots, int nhosts, int np, rank_place *out) {
  /* hosts_with[l]: the hosts so far that have a rank with local rank l. */
  int *hosts_with = calloc((size_t)np, sizeof *hosts_with), placed = 0;
  if (!hosts_with) return -1;
  for (int h = 0; h < nhosts && placed < np; h++) {
    int used = slots[h] < np - placed ? (int)slots[h] : np - placed;
    for (int l = 0; l < used; l++) out[placed + l] = (rank_place){l, used, hosts_with[l]++, 0};
    placed += used;
  }
  for (int r = 0; r < placed; r++) out[r].cross_size = hosts_with[out[r].local_rank];
  free(hosts_with);
  return placed == np ? 0 : -1;
}
