/*
 * cache.h -- the response cache: tensors seen before negotiate with a bit.
 *
 * Every rank keeps an identical cache: entries are added and touched only
 * when a response is executed, which happens in the same order on every
 * rank, so an entry's id (its slot) means the same tensor everywhere.  A
 * rank that enqueues a tensor equal to a cached entry (hvd__request_equal)
 * sends the entry's id as one bit instead of the full request.
 *
 * Capacity is HOROVOD_CACHE_CAPACITY (Horovod's default 1024; 0 disables
 * the cache).  When full, the least recently executed entry is replaced.
 */
#ifndef HVD_CACHE_H
#define HVD_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "request.h"

typedef struct hvd_cache hvd_cache;

int hvd__cache_create(uint32_t capacity, hvd_cache **out);
void hvd__cache_destroy(hvd_cache *c);
uint32_t hvd__cache_capacity(const hvd_cache *c);
/* Ids in use: 0 .. used-1 (the same on every rank). */
uint32_t hvd__cache_used(const hvd_cache *c);

/* The id of the entry equal to req, or -1. */
int64_t hvd__cache_find(const hvd_cache *c, const hvd_request *req);

/* The request stored under id, or NULL if the slot is empty or out of range. */
const hvd_request *hvd__cache_get(const hvd_cache *c, uint32_t id);

/* Records that req was executed: touches its entry if present (same name,
 * equal), replaces an entry of the same name with different parameters,
 * or inserts it, evicting the least recently used entry when full.
 * Returns the id whose request changed (replaced or evicted), which
 * someone holding that id must look up again, or -1. */
int64_t hvd__cache_put(hvd_cache *c, const hvd_request *req);

/* The same for id's own request, known to be equal (the fast path ran
 * the tensor it holds under id): only the LRU order moves. */
void hvd__cache_touch(hvd_cache *c, uint32_t id);

#endif /* HVD_CACHE_H */
