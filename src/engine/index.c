/*
 * index.c -- the engine's hash index (index.h): chained buckets, a power
 * of two of them, doubled when the items outnumber them.
 */
#include <stdlib.h>

#include "hash.h"
#include "index.h"

#define MIN_SLOTS 64

uint64_t hvd__index_key(const char *name, int32_t process_set) {
  /* splitmix64's finaliser spreads the set over every bit of the key */
  uint64_t k = hvd__hash_str(name) ^ ((uint64_t)(uint32_t)process_set * 0x9e3779b97f4a7c15ull);
  k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
  k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

static void link_in(hvd_ilink **head, hvd_ilink *l) {
  l->next = *head;
  l->pprev = head;
  if (*head) (*head)->pprev = &l->next;
  *head = l;
}

/* Doubles the table (or makes the first); keeps it as it is when memory
 * is short, and falls back on the one slot inside the index when not
 * even the first table can be had. */
static void grow(hvd_index *x) {
  size_t slots = x->slot ? 2 * (x->mask + 1) : MIN_SLOTS;
  hvd_ilink **s = calloc(slots, sizeof *s);
  if (!s) {
    if (!x->slot) x->slot = &x->one, x->mask = 0;
    return;
  }
  for (size_t i = 0; x->slot && i <= x->mask; i++)
    for (hvd_ilink *l = x->slot[i], *next; l; l = next) {
      next = l->next;
      link_in(&s[l->key & (slots - 1)], l);
    }
  if (x->slot != &x->one) free(x->slot);
  x->slot = s;
  x->mask = slots - 1;
}

void hvd__index_add(hvd_index *x, hvd_ilink *l, uint64_t key) {
  if (!x->slot || x->n > x->mask) grow(x);
  l->key = key;
  link_in(&x->slot[key & x->mask], l);
  x->n++;
}

void hvd__index_remove(hvd_index *x, hvd_ilink *l) {
  if (!l->pprev) return; /* not in an index */
  *l->pprev = l->next;
  if (l->next) l->next->pprev = l->pprev;
  l->next = NULL;
  l->pprev = NULL;
  x->n--;
}

hvd_ilink *hvd__index_first(hvd_index *x, uint64_t key) {
  if (!x->slot) return NULL;
  for (hvd_ilink *l = x->slot[key & x->mask]; l; l = l->next) {
    x->probes++;
    if (l->key == key) return l;
  }
  return NULL;
}

hvd_ilink *hvd__index_next(hvd_index *x, hvd_ilink *l) {
  uint64_t key = l->key;
  for (l = l->next; l; l = l->next) {
    x->probes++;
    if (l->key == key) return l;
  }
  return NULL;
}

hvd_ilink *hvd__index_walk(const hvd_index *x, const hvd_ilink *l) {
  if (!x->slot) return NULL;
  if (l && l->next) return l->next;
  for (size_t i = l ? (l->key & x->mask) + 1 : 0; i <= x->mask; i++)
    if (x->slot[i]) return x->slot[i];
  return NULL;
}

void hvd__index_free(hvd_index *x) {
  if (x->slot != &x->one) free(x->slot);
  x->slot = NULL;
  x->mask = x->n = 0;
}
