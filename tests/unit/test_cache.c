/*
 * test_cache.c -- the response cache (cache.h).
 *
 * Cache ids travel between ranks as bits, so the cache must be right and
 * deterministic: besides lookup, touch and eviction cases, long random
 * runs check every id against a naive reference model (linear search, a
 * "last used" clock) and two caches fed the same puts against each other.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/cache.h"
#include "rng.h"
#include "request.h"

static rng gen = {0x853c49e6748fea9bull};

static hvd_cache *create(uint32_t capacity) {
  hvd_cache *c;
  assert_int_equal(hvd__cache_create(capacity, &c), 0);
  assert_int_equal(hvd__cache_capacity(c), capacity);
  return c;
}

static void put(hvd_cache *c, const char *name, uint64_t count) {
  hvd_request r = req_allreduce(name, HVD_FLOAT32, count);
  hvd__cache_put(c, &r);
}

static int64_t find(const hvd_cache *c, const char *name, uint64_t count) {
  hvd_request r = req_allreduce(name, HVD_FLOAT32, count);
  return hvd__cache_find(c, &r);
}

/* ---- basics ---- */

static void test_find_get_put(void **state) {
  (void)state;
  hvd_cache *c = create(4);
  assert_int_equal(find(c, "a", 1), -1);
  assert_null(hvd__cache_get(c, 0));
  put(c, "a", 1);
  put(c, "b", 2);
  put(c, "c", 3);
  assert_int_equal(find(c, "a", 1), 0); /* ids are slots, in order of arrival */
  assert_int_equal(find(c, "b", 2), 1);
  assert_int_equal(find(c, "c", 3), 2);
  assert_int_equal(find(c, "a", 2), -1); /* same name, other parameters */
  assert_int_equal(find(c, "d", 1), -1);
  assert_string_equal(hvd__cache_get(c, 1)->name, "b");
  assert_true(hvd__cache_get(c, 2)->count == 3);
  assert_null(hvd__cache_get(c, 3)); /* empty slot */
  assert_null(hvd__cache_get(c, 4)); /* out of range */
  assert_null(hvd__cache_get(c, UINT32_MAX));

  hvd_request r = req_allreduce("b", HVD_FLOAT32, 2);
  r.prescale = 0.5; /* any field makes a different request */
  assert_int_equal(hvd__cache_find(c, &r), -1);
  hvd__cache_destroy(c);
  hvd__cache_destroy(NULL);
}

static void test_eviction_is_lru(void **state) {
  (void)state;
  hvd_cache *c = create(3);
  put(c, "a", 1);
  put(c, "b", 1);
  put(c, "c", 1);
  put(c, "d", 1); /* full: a is the least recently used */
  assert_int_equal(find(c, "a", 1), -1);
  assert_int_equal(find(c, "d", 1), 0); /* a's slot */
  put(c, "e", 1);                       /* then b */
  assert_int_equal(find(c, "b", 1), -1);
  assert_int_equal(find(c, "e", 1), 1);
  assert_int_equal(find(c, "c", 1), 2);
  hvd__cache_destroy(c);
}

static void test_touch_changes_order(void **state) {
  (void)state;
  hvd_cache *c = create(3);
  put(c, "a", 1);
  put(c, "b", 1);
  put(c, "c", 1);
  put(c, "a", 1); /* touched: b is now the oldest */
  assert_int_equal(find(c, "a", 1), 0);
  put(c, "d", 1);
  assert_int_equal(find(c, "b", 1), -1);
  assert_int_equal(find(c, "a", 1), 0);
  assert_int_equal(find(c, "d", 1), 1);
  put(c, "c", 1); /* order now a, d, c: a goes next */
  put(c, "e", 1);
  assert_int_equal(find(c, "a", 1), -1);
  assert_int_equal(find(c, "e", 1), 0);
  assert_int_equal(find(c, "c", 1), 2);
  assert_int_equal(find(c, "d", 1), 1);
  hvd__cache_destroy(c); /* find never touches: nothing else to check */
}

static void test_replace_same_name(void **state) {
  (void)state;
  hvd_cache *c = create(3);
  put(c, "a", 10);
  put(c, "b", 1);
  put(c, "a", 12); /* new parameters: one entry, same id, most recent */
  assert_int_equal(find(c, "a", 10), -1);
  assert_int_equal(find(c, "a", 12), 0);
  put(c, "c", 1);
  assert_int_equal(find(c, "c", 1), 2); /* a third slot was still free */
  assert_null(hvd__cache_get(c, 3));
  put(c, "d", 1); /* b, not a, is the oldest */
  assert_int_equal(find(c, "b", 1), -1);
  assert_int_equal(find(c, "a", 12), 0);
  assert_int_equal(find(c, "d", 1), 1);
  hvd__cache_destroy(c);
}

static void test_capacity_zero(void **state) {
  (void)state;
  hvd_cache *c = create(0);
  put(c, "a", 1);
  assert_int_equal(find(c, "a", 1), -1);
  assert_null(hvd__cache_get(c, 0));
  hvd__cache_destroy(c);
}

static void test_capacity_too_large(void **state) {
  (void)state;
  hvd_cache *c = (hvd_cache *)&c;
  assert_int_equal(hvd__cache_create(UINT32_MAX, &c), HVD_E_INVALID);
  assert_null(c);
}

/* Long names, and names that differ only at the end, are distinct. */
static void test_long_names(void **state) {
  (void)state;
  hvd_cache *c = create(8);
  hvd_request a = req_allreduce("", HVD_FLOAT32, 1), b;
  memset(a.name, 'x', HVD_NAME_MAX - 1);
  b = a;
  b.name[HVD_NAME_MAX - 2] = 'y';
  hvd__cache_put(c, &a);
  hvd__cache_put(c, &b);
  assert_int_equal(hvd__cache_find(c, &a), 0);
  assert_int_equal(hvd__cache_find(c, &b), 1);
  hvd__cache_destroy(c);
}

/* ---- against a reference model ---- */

/* The obvious implementation: linear search, evict the smallest clock. */
typedef struct {
  uint32_t capacity, used;
  hvd_request *req;
  uint64_t *last, clock;
} model;

static void model_put(model *m, const hvd_request *r) {
  uint32_t s = 0;
  while (s < m->used && strcmp(m->req[s].name, r->name) != 0) s++;
  if (s == m->used && m->used < m->capacity) {
    m->used++;
  } else if (s == m->used) {
    s = 0;
    for (uint32_t i = 1; i < m->used; i++)
      if (m->last[i] < m->last[s]) s = i;
  }
  m->req[s] = *r;
  m->last[s] = ++m->clock;
}

static int64_t model_find(const model *m, const hvd_request *r) {
  for (uint32_t s = 0; s < m->used; s++)
    if (hvd__request_equal(&m->req[s], r)) return s;
  return -1;
}

/* A random request over `names` names, each in one of two variants. */
static hvd_request random_req(uint32_t names) {
  char name[64];
  snprintf(name, sizeof name, "model.layer%llu.grad", (unsigned long long)(rng_next(&gen) % names));
  return req_allreduce(name, HVD_FLOAT32, 100 + rng_next(&gen) % 2);
}

static void run_against_model(uint32_t capacity, uint32_t names, int puts) {
  model m = {.capacity = capacity};
  m.req = calloc(capacity ? capacity : 1, sizeof *m.req);
  m.last = calloc(capacity ? capacity : 1, sizeof *m.last);
  hvd_cache *a = create(capacity), *b = create(capacity);

  for (int i = 0; i < puts; i++) {
    hvd_request r = random_req(names), probe = random_req(names);
    assert_int_equal(hvd__cache_find(a, &probe), model_find(&m, &probe));
    hvd__cache_put(a, &r);
    hvd__cache_put(b, &r);
    if (capacity) model_put(&m, &r);
    int64_t id = hvd__cache_find(a, &r);
    assert_int_equal(id, hvd__cache_find(b, &r));
    assert_int_equal(id, model_find(&m, &r));
    assert_true(capacity == 0 || id >= 0); /* what was just put is there */
  }
  /* Every id means the same request in both caches and the model. */
  for (uint32_t id = 0; id <= capacity; id++) {
    const hvd_request *ra = hvd__cache_get(a, id), *rb = hvd__cache_get(b, id);
    if (id >= m.used) {
      assert_null(ra);
      assert_null(rb);
      continue;
    }
    assert_non_null(ra);
    assert_non_null(rb);
    assert_true(hvd__request_equal(ra, rb));
    assert_true(hvd__request_equal(ra, &m.req[id]));
  }
  hvd__cache_destroy(a);
  hvd__cache_destroy(b);
  free(m.req);
  free(m.last);
}

static void test_random_against_model(void **state) {
  (void)state;
  run_against_model(1024, 3000, 10000); /* Horovod's default capacity */
  run_against_model(1024, 800, 5000);   /* everything fits: only touches */
  run_against_model(7, 20, 5000);       /* long hash chains, constant eviction */
  run_against_model(1, 3, 1000);
  run_against_model(0, 3, 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_get_put),        cmocka_unit_test(test_eviction_is_lru),
      cmocka_unit_test(test_touch_changes_order), cmocka_unit_test(test_replace_same_name),
      cmocka_unit_test(test_capacity_zero),       cmocka_unit_test(test_capacity_too_large),
      cmocka_unit_test(test_long_names),          cmocka_unit_test(test_random_against_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
