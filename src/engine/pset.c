/*
 * pset.c -- process sets: communicators over subsets of the job's ranks.
 *
 * Sets are created and removed by negotiated requests, which every rank
 * executes in the same cycle, so ids (1, 2, ...) and membership agree
 * everywhere.  Each set's communicator shares the job's transport; only
 * its members use it.  The list is changed by the thread driving the
 * cycles under the engine lock, because application threads query it.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

pset *hvd__pset_find(hvd_engine *e, int id) {
  for (pset *p = e->psets; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

uint32_t hvd__ranks_hash(const int *ranks, int n) { /* FNV-1a over the ranks */
  uint32_t h = 2166136261u;
  for (int i = 0; i < n; i++)
    for (int b = 0; b < 4; b++) h = (h ^ (uint8_t)((uint32_t)ranks[i] >> (8 * b))) * 16777619u;
  return h;
}

static void pset_free(pset *p) {
  if (p->member) hvd__comm_destroy(&p->comm);
  free(p->ranks);
  free(p);
}

int hvd__pset_add(hvd_engine *e, const int *ranks, int n, int *id) {
  pset *p = calloc(1, sizeof *p);
  if (p) p->ranks = malloc((size_t)n * sizeof *p->ranks);
  if (!p || !p->ranks) {
    free(p);
    return hvd__err(HVD_E_NOMEM, "allocating a process set of %d ranks", n);
  }
  memcpy(p->ranks, ranks, (size_t)n * sizeof *ranks);
  p->n = n;
  for (int i = 0; i < n; i++) p->member |= ranks[i] == e->rank;
  if (p->member) {
    int rc = hvd__comm_init_subset(&p->comm, e->global, ranks, n, e->rank);
    if (rc < 0) {
      hvd__comm_destroy(&p->comm);
      p->member = 0;
      pset_free(p);
      return rc;
    }
  }
  pthread_mutex_lock(&e->core.lock);
  p->id = e->next_pset_id++;
  p->next = e->psets;
  e->psets = p;
  pthread_mutex_unlock(&e->core.lock);
  *id = p->id;
  return 0;
}

int hvd__pset_remove(hvd_engine *e, int id) {
  pthread_mutex_lock(&e->core.lock);
  pset **pp = &e->psets;
  while (*pp && (*pp)->id != id) pp = &(*pp)->next;
  pset *p = *pp;
  if (p) *pp = p->next;
  pthread_mutex_unlock(&e->core.lock);
  if (!p) return hvd__err(HVD_E_INVALID, "process set %d does not exist", id);
  pset_free(p);
  e->table.rescan = 1; /* its tensors still waiting now fail: they are ready to */
  return 0;
}

void hvd__engine_set_next_pset_id(hvd_engine *e, int id) {
  pthread_mutex_lock(&e->core.lock); /* read by the engine thread after the add's enqueue */
  e->next_pset_id = id;
  pthread_mutex_unlock(&e->core.lock);
}

void hvd__psets_free(hvd_engine *e) {
  for (pset *p = e->psets, *next; p; p = next) next = p->next, pset_free(p);
  e->psets = NULL;
}
