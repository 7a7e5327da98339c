/*
 * test_negotiate.c -- the engine's negotiation (negotiate.c), driven by
 * hand: an engine without a thread or a communicator, fed the messages a
 * cycle would have allgathered.
 *
 * What it checks: ready tensors run in arrival order; allreduces fuse
 * with the later ones of their kind only, in order, up to the threshold;
 * tensors every rank submitted at once (the cached fast path) plan like
 * negotiated ones; a rank out of memory while checking requests fails
 * them with HVD_E_NOMEM, not as a mismatch; and the cost of a cycle does not grow with the
 * tensors in flight.  That last one counts what negotiation looks at
 * (tensors visited, hash chain links probed), not time: with 100, 1,000 or
 * 10,000 names waiting for a rank that has not submitted them, a cycle
 * that adds one and completes one costs the same.  The time per cycle is
 * printed beside it, as a measurement.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "engine/engine_int.h"
#include "request.h"

/* malloc, failing while `fail_size` is set for blocks of exactly that many
 * bytes (the test links with --wrap=malloc). */
void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static size_t fail_size;
void *__wrap_malloc(size_t n) { return fail_size && n == fail_size ? NULL : __real_malloc(n); }

static hvd_engine *engine(int size, size_t threshold) {
  hvd_engine *e;
  assert_int_equal(hvd__engine_alloc(0, size, 64, &e), 0);
  e->fusion_threshold = threshold;
  e->stall.disable = 1;
  return e;
}

/* msgs[q] gets the requests named in names[q] (NULL-terminated lists). */
typedef struct {
  hvd_msg m[4];
} cycle_input;

static void add_req(hvd_msg *m, hvd_request r) {
  m->reqs = realloc(m->reqs, (m->nreq + 1) * sizeof *m->reqs);
  m->reqs[m->nreq++] = r;
}

/* One cycle: negotiates in, frees it, returns the responses. */
static response *run(hvd_engine *e, cycle_input *in, int *n) {
  response *rs = NULL;
  int shutdown = 0;
  assert_int_equal(hvd__negotiate(e, in->m, &rs, n, &shutdown), 0);
  assert_int_equal(shutdown, 0);
  for (int q = 0; q < e->size; q++) hvd__msg_free(&in->m[q]);
  e->cycle++;
  return rs;
}

static void expect_items(const response *r, const char *const *names, int n) {
  assert_int_equal(r->n, n);
  for (int i = 0; i < n; i++) assert_string_equal(r->items[i]->req.name, names[i]);
}

/* ---- order and fusion ---- */

static void test_arrival_order_and_fusion_by_kind(void **state) {
  (void)state;
  hvd_engine *e = engine(2, 1000);
  cycle_input in = {0};
  /* Rank 0 submits a, b (float64), c, d, e; rank 1 nothing yet. */
  add_req(&in.m[0], req_allreduce("a", HVD_FLOAT32, 100));
  add_req(&in.m[0], req_allreduce("b", HVD_FLOAT64, 10));
  add_req(&in.m[0], req_allreduce("c", HVD_FLOAT32, 100));
  add_req(&in.m[0], req_allreduce("d", HVD_FLOAT32, 100));
  add_req(&in.m[0], req_allreduce("e", HVD_FLOAT32, 10));
  int n;
  response *rs = run(e, &in, &n);
  assert_int_equal(n, 0);
  hvd__responses_free(rs, n);
  /* Rank 1 submits them in another order: the table's (arrival) order
   * decides.  a, c fit under 1000 bytes (800), d does not: the response
   * ends there (no skipping ahead to e), b is another kind. */
  add_req(&in.m[1], req_allreduce("e", HVD_FLOAT32, 10));
  add_req(&in.m[1], req_allreduce("d", HVD_FLOAT32, 100));
  add_req(&in.m[1], req_allreduce("c", HVD_FLOAT32, 100));
  add_req(&in.m[1], req_allreduce("b", HVD_FLOAT64, 10));
  add_req(&in.m[1], req_allreduce("a", HVD_FLOAT32, 100));
  rs = run(e, &in, &n);
  assert_int_equal(n, 3);
  expect_items(&rs[0], (const char *[]){"a", "c"}, 2);
  expect_items(&rs[1], (const char *[]){"b"}, 1);
  expect_items(&rs[2], (const char *[]){"d", "e"}, 2);
  hvd__responses_free(rs, n);
  assert_null(e->table.head);
  assert_int_equal(e->table.by_name.n, 0);
  hvd__engine_dealloc(e);
}

static void test_mismatch_fails_alone(void **state) {
  (void)state;
  hvd_engine *e = engine(2, 1 << 20);
  cycle_input in = {0};
  add_req(&in.m[0], req_allreduce("x", HVD_FLOAT32, 4));
  add_req(&in.m[0], req_allreduce("y", HVD_FLOAT32, 4));
  add_req(&in.m[0], req_allreduce("z", HVD_FLOAT32, 4));
  add_req(&in.m[1], req_allreduce("x", HVD_FLOAT32, 4));
  add_req(&in.m[1], req_allreduce("y", HVD_FLOAT32, 5)); /* disagrees */
  add_req(&in.m[1], req_allreduce("z", HVD_FLOAT32, 4));
  int n;
  response *rs = run(e, &in, &n);
  assert_int_equal(n, 2);
  expect_items(&rs[0], (const char *[]){"x", "z"}, 2);
  assert_int_equal(rs[0].error, 0);
  expect_items(&rs[1], (const char *[]){"y"}, 1);
  assert_int_equal(rs[1].error, HVD_E_MISMATCH);
  assert_non_null(strstr(rs[1].errmsg, "rank 1 sent 5"));
  hvd__responses_free(rs, n);
  hvd__engine_dealloc(e);
}

/* A rank that cannot allocate what checking the ranks' requests takes
 * says so, HVD_E_NOMEM: the ranks did not disagree. */
static void test_out_of_memory_checking_is_not_a_mismatch(void **state) {
  (void)state;
  hvd_engine *e = engine(3, 1 << 20);
  cycle_input in = {0};
  for (int q = 0; q < 3; q++) add_req(&in.m[q], req_allreduce("w", HVD_FLOAT32, 4));
  int n;
  fail_size = 3 * sizeof(hvd_request *); /* the 3 requests being compared */
  response *rs = run(e, &in, &n);
  fail_size = 0;
  assert_int_equal(n, 1);
  expect_items(&rs[0], (const char *[]){"w"}, 1);
  assert_int_equal(rs[0].error, HVD_E_NOMEM);
  assert_non_null(strstr(rs[0].errmsg, "out of memory checking 'w'"));
  hvd__responses_free(rs, n);
  hvd__engine_dealloc(e);
}

/* The fast path's tensors (every rank submitted the cached request) plan
 * as negotiated ones do: in order, fused. */
static void test_agreed_tensors_plan_like_negotiated(void **state) {
  (void)state;
  hvd_engine *e = engine(3, 1 << 20);
  for (int i = 0; i < 3; i++) {
    char name[8];
    snprintf(name, sizeof name, "g%d", i);
    hvd_request r = req_allreduce(name, HVD_FLOAT32, 8);
    assert_int_equal(hvd__cache_put(e->cache, &r), -1);
  }
  entry held[3];
  memset(held, 0, sizeof held);
  for (uint32_t id = 0; id < 3; id++) { /* this rank holds them */
    held[id].w.req = *hvd__cache_get(e->cache, id);
    held[id].key = hvd__index_key(held[id].w.req.name, 0);
    held[id].held = -1;
    hvd__unsent_add(&e->core, &held[id]);
  }
  for (uint32_t id = 0; id < 3; id++) assert_int_equal(hvd__negotiate_agreed(e, id), 0);
  response *rs;
  int n;
  assert_int_equal(hvd__negotiate_plan(e, &rs, &n), 0);
  assert_int_equal(n, 1);
  expect_items(&rs[0], (const char *[]){"g0", "g1", "g2"}, 3);
  assert_null(rs[0].items[0]->submitted); /* nothing per rank to keep */
  for (int i = 0; i < 3; i++) assert_ptr_equal(rs[0].items[i]->mine, &held[i]);
  hvd__responses_free(rs, n);
  /* An id nobody put, or one this rank does not hold, is a protocol
   * error, not a crash or a silent zero. */
  assert_int_equal(hvd__negotiate_agreed(e, 7), HVD_E_PROTOCOL);
  hvd_request r = req_allreduce("not.held", HVD_FLOAT32, 8);
  hvd__cache_put(e->cache, &r);
  assert_int_equal(hvd__negotiate_agreed(e, 3), HVD_E_PROTOCOL);
  assert_non_null(strstr(hvd_last_error(), "'not.held'"));
  hvd__engine_dealloc(e);
}

/* ---- the cost of a cycle ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t cost(const hvd_engine *e) {
  return e->table.visits + e->table.by_name.probes + e->core.unsent.probes;
}

#define CYCLES 100

/* `inflight` names submitted by rank 0 only, then CYCLES cycles that each
 * add one more and complete one of the old: the cost per cycle. */
static uint64_t cost_per_cycle(int inflight, double *seconds) {
  hvd_engine *e = engine(2, 1 << 20);
  cycle_input in = {0};
  char name[32];
  for (int i = 0; i < inflight; i++) {
    snprintf(name, sizeof name, "old.%d", i);
    add_req(&in.m[0], req_allreduce(name, HVD_FLOAT32, 1));
  }
  int n;
  response *rs = run(e, &in, &n);
  assert_int_equal(n, 0);
  hvd__responses_free(rs, n);
  uint64_t before = cost(e);
  double t0 = now_s();
  for (int c = 0; c < CYCLES; c++) {
    snprintf(name, sizeof name, "new.%d", c);
    add_req(&in.m[0], req_allreduce(name, HVD_FLOAT32, 1));
    snprintf(name, sizeof name, "old.%d", inflight - 1 - c);
    add_req(&in.m[1], req_allreduce(name, HVD_FLOAT32, 1));
    rs = run(e, &in, &n);
    assert_int_equal(n, 1);
    assert_string_equal(rs[0].items[0]->req.name, name);
    hvd__responses_free(rs, n);
  }
  *seconds = (now_s() - t0) / CYCLES;
  assert_int_equal(e->table.by_name.n, inflight);
  uint64_t per = (cost(e) - before) / CYCLES;
  hvd__engine_dealloc(e);
  return per;
}

static void test_cycle_cost_does_not_grow_with_tensors_in_flight(void **state) {
  (void)state;
  static const int counts[] = {100, 1000, 10000};
  uint64_t per[3];
  for (int i = 0; i < 3; i++) {
    double s;
    per[i] = cost_per_cycle(counts[i], &s);
    printf("%6d names in flight: %3llu tensors and links looked at per cycle, %.2f us per cycle\n",
           counts[i], (unsigned long long)per[i], s * 1e6);
  }
  /* A cycle looks at its two new submissions, one ready tensor and a few
   * hash links, whatever is in flight. */
  assert_true(per[0] <= 16);
  assert_true(per[2] <= per[0] + 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arrival_order_and_fusion_by_kind),
      cmocka_unit_test(test_mismatch_fails_alone),
      cmocka_unit_test(test_out_of_memory_checking_is_not_a_mismatch),
      cmocka_unit_test(test_agreed_tensors_plan_like_negotiated),
      cmocka_unit_test(test_cycle_cost_does_not_grow_with_tensors_in_flight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
