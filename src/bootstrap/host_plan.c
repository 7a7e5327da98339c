/*
 * host_plan.c -- grouping ranks by host, and checking the launcher's word
 * for it (host_plan.h).
 *
 * The ranks are sorted by (host name, local rank); each run of one host
 * name is a host.  A host gets shared memory when it has more than one
 * rank, every one of them wants it (no HOROVOD_SHM_DISABLE), and the
 * launcher's placement holds: as many ranks as each says HOROVOD_LOCAL_SIZE,
 * local ranks 0..n-1 once each, all running on one machine.
 */
#include "host_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int by_host(const void *a, const void *b, void *arg) {
  const hvd_rdzv_entry *t = arg;
  const hvd_rdzv_entry *x = &t[*(const int *)a], *y = &t[*(const int *)b];
  int c = strcmp(x->hostname, y->hostname);
  if (c) return c;
  if (x->local_rank != y->local_rank) return x->local_rank < y->local_rank ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

enum { HOST_SHM, HOST_TCP, HOST_MISPLACED };

/* The verdict on one host's ranks (sorted by local rank); why says what
 * is wrong with a misplacement. */
static int judge(const hvd_rdzv_entry *t, const int *ranks, int n, char *why, size_t cap) {
  const hvd_rdzv_entry *first = &t[ranks[0]];
  for (int i = 0; i < n; i++)
    if (!t[ranks[i]].shm) return HOST_TCP;
  if (n == 1) return HOST_TCP;
  for (int i = 0; i < n; i++) {
    const hvd_rdzv_entry *e = &t[ranks[i]];
    if (e->local_size != (uint32_t)n) {
      snprintf(why, cap, "rank %u says HOROVOD_LOCAL_SIZE=%u, but %d ranks name host '%s'",
               e->rank, e->local_size, n, e->hostname);
      return HOST_MISPLACED;
    }
    if (e->local_rank != (uint32_t)i) { /* sorted: a repeat, or a gap before it */
      if (i > 0 && t[ranks[i - 1]].local_rank == e->local_rank)
        snprintf(why, cap, "ranks %u and %u of host '%s' both say HOROVOD_LOCAL_RANK=%u",
                 t[ranks[i - 1]].rank, e->rank, e->hostname, e->local_rank);
      else
        snprintf(why, cap, "no rank of host '%s' says HOROVOD_LOCAL_RANK=%d", e->hostname, i);
      return HOST_MISPLACED;
    }
    if (strcmp(e->host_id, first->host_id) != 0) {
      snprintf(why, cap, "ranks %u and %u were placed on host '%.64s' but run on different "
               "machines (%s and %s)", first->rank, e->rank, e->hostname, first->host_id,
               e->host_id);
      return HOST_MISPLACED;
    }
  }
  return HOST_SHM;
}

/* This rank's host as the plan needs it. */
static int take_host(hvd_host_plan *p, const int *ranks, int n, int rank, int verdict) {
  p->members = malloc((size_t)n * sizeof *p->members);
  if (!p->members) return hvd__err(HVD_E_NOMEM, "planning a host of %d ranks", n);
  memcpy(p->members, ranks, (size_t)n * sizeof *ranks);
  p->n = n;
  for (int i = 0; i < n; i++)
    if (ranks[i] == rank) p->me = i;
  p->shm = verdict == HOST_SHM;
  return 0;
}

int hvd__host_plan(const hvd_rdzv_entry *table, int size, int rank, hvd_host_plan *out) {
  memset(out, 0, sizeof *out);
  int *order = malloc((size_t)size * sizeof *order);
  if (!order) return hvd__err(HVD_E_NOMEM, "planning the hosts of %d ranks", size);
  for (int r = 0; r < size; r++) order[r] = r;
  qsort_r(order, (size_t)size, sizeof *order, by_host, (void *)table);
  int hosts = 0, with_shm = 0, rc = 0;
  for (int at = 0, n; at < size; at += n) {
    char why[sizeof out->why] = "";
    for (n = 1; at + n < size &&
                strcmp(table[order[at + n]].hostname, table[order[at]].hostname) == 0;
         n++) {
    }
    int verdict = judge(table, order + at, n, why, sizeof why);
    hosts++;
    with_shm += verdict == HOST_SHM;
    if (strcmp(table[order[at]].hostname, table[rank].hostname) != 0) continue;
    rc = take_host(out, order + at, n, rank, verdict);
    if (verdict == HOST_MISPLACED) snprintf(out->why, sizeof out->why, "%s", why);
  }
  free(order);
  if (rc < 0) return rc;
  out->mode = with_shm == 0 ? HVD_PLAN_TCP : hosts == 1 ? HVD_PLAN_SHM : HVD_PLAN_HYBRID;
  if (out->mode == HVD_PLAN_SHM) /* the segment's numbers are the job's */
    for (int i = 0; i < size; i++) out->members[i] = i, out->me = rank;
  return 0;
}

void hvd__host_plan_free(hvd_host_plan *p) {
  free(p->members);
  memset(p, 0, sizeof *p);
}

void hvd__layout_local(hvd_rdzv_entry *table, int size) {
  for (int r = 0; r < size; r++) {
    uint32_t before = 0, all = 0;
    for (int q = 0; q < size; q++) {
      if (strcmp(table[q].hostname, table[r].hostname) != 0) continue;
      all++;
      before += q < r;
    }
    table[r].local_rank = before;
    table[r].local_size = all;
  }
}

void hvd__layout_cross(const hvd_rdzv_entry *table, int size, int rank, int *cross_rank,
                       int *cross_size) {
  *cross_rank = *cross_size = 0;
  for (int q = 0; q < size; q++) {
    if (table[q].local_rank != table[rank].local_rank) continue;
    ++*cross_size;
    *cross_rank += q < rank;
  }
}
