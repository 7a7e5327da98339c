/*
 * index.h -- a hash index of the engine's tensors by (process set, name).
 *
 * The engine keeps thousands of tensors in flight (a model's gradients,
 * or a rank far ahead of the others), and every cycle looks some of them
 * up by name: the pending table, this rank's unsent entries, the names in
 * flight.  Lists scanned per lookup make a cycle cost grow with what is in
 * flight; this index makes a lookup O(1) whatever the count.
 *
 * It is intrusive (as the Linux kernel's hlist): an item embeds an
 * hvd_ilink and is found again with HVD_CONTAINER_OF, so adding and
 * removing allocate nothing per item.  Items are matched by a 64-bit key
 * (hvd__index_key); the caller compares names on a key match.  Adding
 * never fails: when the table cannot grow it keeps its size and its
 * chains get longer.  A zeroed hvd_index is an empty one.  Not thread-safe: each index has one owner (the
 * engine's lock, or the thread driving the cycle).
 */
#ifndef HVD_INDEX_H
#define HVD_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define HVD_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

typedef struct hvd_ilink {
  struct hvd_ilink *next, **pprev; /* pprev: the pointer that points here */
  uint64_t key;
} hvd_ilink;

typedef struct {
  hvd_ilink **slot;
  size_t mask;    /* slots - 1; 0 slots while empty */
  size_t n;       /* items */
  uint64_t probes; /* links looked at by lookups: what a lookup costs, for tests */
  hvd_ilink *one;  /* the only slot, when memory for a table is short */
} hvd_index;

/* The key of a tensor: its name's hash mixed with its process set. */
uint64_t hvd__index_key(const char *name, int32_t process_set);

void hvd__index_add(hvd_index *x, hvd_ilink *l, uint64_t key);
void hvd__index_remove(hvd_index *x, hvd_ilink *l);

/* The first item with this key, then the next with the same key. */
hvd_ilink *hvd__index_first(hvd_index *x, uint64_t key);
hvd_ilink *hvd__index_next(hvd_index *x, hvd_ilink *l);

/* Every item, in no particular order: the one after l (NULL: the
 * first).  To remove items while walking, take the next before removing
 * the current one. */
hvd_ilink *hvd__index_walk(const hvd_index *x, const hvd_ilink *l);

void hvd__index_free(hvd_index *x);

#endif /* HVD_INDEX_H */
