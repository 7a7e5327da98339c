/*
 * cache.c -- the response cache: `capacity` slots, a hash index by name,
 * and least-recently-used order.
 *
 * An entry's id is its slot index, and ids must mean the same tensor on
 * every rank, so slot choice depends only on the sequence of puts: a new
 * entry takes the next never-used slot (slots are never emptied, so that
 * is the lowest free one) or, when all are used, the slot of the least
 * recently used entry.  Nothing depends on the hash function or on
 * addresses.
 *
 * The engine looks up every enqueued tensor, so lookup by name is O(1): a
 * chained hash table whose chains run through the slots (`bucket` holds
 * the first slot of each chain, `chain` the next).  LRU order is a doubly
 * linked list through the slots, most recent first, so touching and
 * evicting are O(1) too.  One cache belongs to one engine and is used
 * only by the thread driving its cycles, one at a time; it has no lock.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "hash.h"
#include "engine/cache.h"

#define NIL UINT32_MAX
/* Bounds the arrays (and keeps bucket sizing from overflowing); far past
 * any useful HOROVOD_CACHE_CAPACITY. */
#define CAPACITY_MAX (1u << 24)

struct hvd_cache {
  uint32_t capacity, used; /* slots [0, used) hold entries */
  hvd_request *slot;
  uint32_t *prev, *next;   /* LRU list through the slots */
  uint32_t head, tail;     /* most and least recently used */
  uint32_t *chain;         /* next slot in the same bucket */
  uint32_t *bucket;        /* first slot of each bucket, or NIL */
  uint32_t mask;           /* buckets - 1 (a power of two) */
};


int hvd__cache_create(uint32_t capacity, hvd_cache **out) {
  *out = NULL;
  if (capacity > CAPACITY_MAX)
    return hvd__err(HVD_E_INVALID, "cache capacity %u exceeds %u", (unsigned)capacity,
                    CAPACITY_MAX);
  uint32_t buckets = 1;
  while (buckets < capacity) buckets <<= 1; /* load factor <= 1 */

  hvd_cache *c = calloc(1, sizeof *c);
  if (!c) goto nomem;
  c->capacity = capacity;
  c->head = c->tail = NIL;
  c->mask = buckets - 1;
  size_t n = capacity ? capacity : 1; /* malloc(0) may return NULL */
  c->slot = calloc(n, sizeof *c->slot);
  c->prev = calloc(n, sizeof *c->prev);
  c->next = calloc(n, sizeof *c->next);
  c->chain = calloc(n, sizeof *c->chain);
  c->bucket = calloc(buckets, sizeof *c->bucket);
  if (!c->slot || !c->prev || !c->next || !c->chain || !c->bucket) goto nomem;
  for (uint32_t b = 0; b < buckets; b++) c->bucket[b] = NIL;
  *out = c;
  return 0;

nomem:
  hvd__cache_destroy(c);
  return hvd__err(HVD_E_NOMEM, "out of memory for a response cache of %u entries",
                  (unsigned)capacity);
}

void hvd__cache_destroy(hvd_cache *c) {
  if (!c) return;
  free(c->slot);
  free(c->prev);
  free(c->next);
  free(c->chain);
  free(c->bucket);
  free(c);
}

uint32_t hvd__cache_capacity(const hvd_cache *c) { return c->capacity; }

/* ---- the index by name ---- */

static uint32_t *bucket_of(const hvd_cache *c, const char *name) {
  return &c->bucket[hvd__hash_str(name) & c->mask];
}

/* The slot holding this name, or NIL. */
static uint32_t lookup(const hvd_cache *c, const char *name) {
  if (c->capacity == 0) return NIL;
  for (uint32_t s = *bucket_of(c, name); s != NIL; s = c->chain[s])
    if (strncmp(c->slot[s].name, name, HVD_NAME_MAX) == 0) return s;
  return NIL;
}

static void index_add(hvd_cache *c, uint32_t s) {
  uint32_t *head = bucket_of(c, c->slot[s].name);
  c->chain[s] = *head;
  *head = s;
}

static void index_remove(hvd_cache *c, uint32_t s) {
  uint32_t *link = bucket_of(c, c->slot[s].name);
  while (*link != s) link = &c->chain[*link]; /* s is indexed: the walk ends */
  *link = c->chain[s];
}

/* ---- LRU order ---- */

static void lru_unlink(hvd_cache *c, uint32_t s) {
  if (c->prev[s] != NIL) c->next[c->prev[s]] = c->next[s];
  else c->head = c->next[s];
  if (c->next[s] != NIL) c->prev[c->next[s]] = c->prev[s];
  else c->tail = c->prev[s];
}

static void lru_push_front(hvd_cache *c, uint32_t s) {
  c->prev[s] = NIL;
  c->next[s] = c->head;
  if (c->head != NIL) c->prev[c->head] = s;
  else c->tail = s;
  c->head = s;
}

/* ---- the interface ---- */

int64_t hvd__cache_find(const hvd_cache *c, const hvd_request *req) {
  uint32_t s = lookup(c, req->name);
  return s != NIL && hvd__request_equal(&c->slot[s], req) ? (int64_t)s : -1;
}

const hvd_request *hvd__cache_get(const hvd_cache *c, uint32_t id) {
  return id < c->used ? &c->slot[id] : NULL;
}

int64_t hvd__cache_put(hvd_cache *c, const hvd_request *req) {
  if (c->capacity == 0) return -1;
  uint32_t s = lookup(c, req->name);
  int64_t changed = -1;
  if (s != NIL) { /* touch; new parameters replace the old in the same slot */
    if (!hvd__request_equal(&c->slot[s], req)) changed = s;
    c->slot[s] = *req;
    lru_unlink(c, s);
  } else {
    if (c->used < c->capacity) {
      s = c->used++;
    } else { /* evict the least recently used */
      s = c->tail;
      index_remove(c, s);
      lru_unlink(c, s);
      changed = s;
    }
    c->slot[s] = *req;
    index_add(c, s);
  }
  lru_push_front(c, s);
  return changed;
}

void hvd__cache_touch(hvd_cache *c, uint32_t id) {
  if (id >= c->used) return;
  lru_unlink(c, id);
  lru_push_front(c, id);
}

uint32_t hvd__cache_used(const hvd_cache *c) { return c->used; }
