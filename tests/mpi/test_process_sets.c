/*
 * test_process_sets.c -- collectives over subsets of the job.
 *
 * At any job size:
 *   - the global set (id 0) answers rank/size/included like the job;
 *   - a one-member set {last rank}: its member reduces alone, every other
 *     rank gets HVD_E_INVALID when it tries to use it;
 *   - unknown ids and bad rank lists are HVD_E_INVALID, nothing breaks.
 * With 4 or more ranks, the two disjoint sets {0,2} and {1,3}:
 *   - ids 1, 2, ... in order of creation; set ranks are the sorted ranks;
 *   - many allreduces enqueued on each set at once, a global allreduce
 *     among them: every result over its own set;
 *   - an allgather per set, in set-rank order;
 *   - the sets run independently: {0,2} completes while {1,3} is idle;
 *   - remove a set: its id is refused; add it again: it works;
 *   - the same name used in both sets at once is two different tensors.
 * Inputs are small integers, references exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, failures, checks;

#define COUNT 500

/* Rank who's input element i of tensor k: a small integer. */
static float input(int k, int who, int i) { return (float)((who + 1) * 10 + (i + 3 * k) % 9); }

/* A set as a sorted list of global ranks. */
typedef struct {
  int id;
  int n;
  int ranks[8];
} pset;

static int member(const pset *s, int who) {
  for (int j = 0; j < s->n; j++)
    if (s->ranks[j] == who) return 1;
  return 0;
}

/* The opts for a collective on set s (NULL: the global set). */
static hvd_opts on(const pset *s) {
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = s ? s->id : 0;
  return o;
}

/* Enqueues an allreduce (SUM) of tensor k on set s (NULL: global). */
static hvd_handle enqueue(const pset *s, const char *name, int k, float *buf) {
  for (int i = 0; i < COUNT; i++) buf[i] = input(k, rank, i);
  hvd_opts o = on(s);
  return hvd_allreduce_async_opts(buf, buf, COUNT, HVD_FLOAT32, HVD_SUM, name, &o);
}

/* Waits h and checks buf holds the sum of tensor k over s's members. */
static void check_sum(const pset *s, const char *name, int k, hvd_handle h, const float *buf) {
  int rc = h < 0 ? (int)h : hvd_wait(h);
  CHECK(rc == 0, "%s on set %d: %s: %s", name, s ? s->id : 0, hvd_err_name(rc),
        hvd_last_error());
  if (rc != 0) return;
  int bad = 0;
  for (int i = 0; i < COUNT; i++) {
    float want = 0;
    for (int q = 0; q < size; q++)
      if (!s || member(s, q)) want += input(k, q, i);
    bad += buf[i] != want;
  }
  CHECK(bad == 0, "%s on set %d: %d of %d elements are not the set's sum", name, s ? s->id : 0,
        bad, COUNT);
}

/* A blocking allreduce on s, checked. */
static void allreduce_on(const pset *s, const char *name, int k) {
  float buf[COUNT];
  check_sum(s, name, k, enqueue(s, name, k, buf), buf);
}

/* A call that must fail with HVD_E_INVALID (an enqueue may fail at once
 * or in its wait). */
static void expect_invalid(int64_t rc_or_handle, int is_handle, const char *what) {
  int rc = (int)rc_or_handle;
  if (is_handle && rc_or_handle >= 0) rc = hvd_wait(rc_or_handle);
  CHECK(rc == HVD_E_INVALID, "%s: expected HVD_E_INVALID, got %s (%s)", what,
        rc < 0 ? hvd_err_name(rc) : "success", rc < 0 ? hvd_last_error() : "");
}

/* The queries on s agree with its membership. */
static void check_queries(const pset *s) {
  int in = member(s, rank), pos = -1;
  for (int j = 0; j < s->n; j++)
    if (s->ranks[j] == rank) pos = j;
  int r = hvd_process_set_rank(s->id), n = hvd_process_set_size(s->id),
      inc = hvd_process_set_included(s->id);
  CHECK(inc == in, "set %d: included %d, expected %d", s->id, inc, in);
  CHECK(n == s->n, "set %d: size %d, expected %d", s->id, n, s->n);
  if (in) CHECK(r == pos, "set %d: rank %d, expected %d", s->id, r, pos);
  else CHECK(r == HVD_E_INVALID, "set %d: rank of a non-member is %d, expected HVD_E_INVALID",
             s->id, r);
}

/* Every rank calls it with the same list; checks the id if want_id > 0. */
static pset add(const int *ranks, int n, int want_id) {
  pset s = {0, n, {0}};
  s.id = hvd_add_process_set(ranks, n);
  CHECK(s.id > 0, "hvd_add_process_set: %s: %s", hvd_err_name(s.id), hvd_last_error());
  if (want_id > 0) CHECK(s.id == want_id, "new process set got id %d, expected %d", s.id, want_id);
  for (int j = 0; j < n; j++) s.ranks[j] = ranks[j];
  for (int a = 0; a < n; a++) /* sorted, as the set's ranks are */
    for (int b = a + 1; b < n; b++)
      if (s.ranks[b] < s.ranks[a]) {
        int t = s.ranks[a];
        s.ranks[a] = s.ranks[b];
        s.ranks[b] = t;
      }
  return s;
}

static void test_global_set(void) {
  CHECK(hvd_process_set_rank(0) == rank, "global set: rank %d", hvd_process_set_rank(0));
  CHECK(hvd_process_set_size(0) == size, "global set: size %d", hvd_process_set_size(0));
  CHECK(hvd_process_set_included(0) == 1, "global set: included %d",
        hvd_process_set_included(0));
}

/* Unknown ids, bad rank lists, removing the global set: refused, and the
 * job goes on. */
static void test_invalid(void) {
  float x = 1;
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = 99;
  expect_invalid(hvd_process_set_rank(99), 0, "rank in unknown set 99");
  expect_invalid(hvd_process_set_size(99), 0, "size of unknown set 99");
  expect_invalid(hvd_process_set_included(99), 0, "included in unknown set 99");
  expect_invalid(hvd_remove_process_set(99), 0, "removing unknown set 99");
  expect_invalid(hvd_remove_process_set(0), 0, "removing the global set");
  expect_invalid(hvd_allreduce_async_opts(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "ps.unknown", &o), 1,
                 "allreduce on unknown set 99");
  int out_of_range[] = {0, size}, negative[] = {-1}, twice[] = {0, 0};
  expect_invalid(hvd_add_process_set(out_of_range, 2), 0, "a set with a rank out of range");
  expect_invalid(hvd_add_process_set(negative, 1), 0, "a set with a negative rank");
  expect_invalid(hvd_add_process_set(twice, 2), 0, "a set with a rank twice");
  expect_invalid(hvd_add_process_set(NULL, 2), 0, "a set with no rank list");
  expect_invalid(hvd_add_process_set(twice, 0), 0, "an empty set");
  allreduce_on(NULL, "ps.after.invalid", 1);
}

/* {last rank}: its member reduces alone; everyone else is refused. */
static void test_single_member_set(int want_id) {
  int last = size - 1;
  pset s = add(&last, 1, want_id);
  check_queries(&s);
  if (rank == last) {
    allreduce_on(&s, "ps.alone", 2);
  } else {
    float buf[COUNT];
    expect_invalid(enqueue(&s, "ps.alone", 2, buf), 1, "a non-member's allreduce on {last}");
  }
  allreduce_on(NULL, "ps.after.alone", 3); /* the global set is unaffected */
  CALL(hvd_remove_process_set(s.id));
}

/* ---- two disjoint sets: {0,2} and {1,3} (ranks above 3 in neither) ---- */

#define PER_SET 30

static void test_concurrent_sets(const pset *even, const pset *odd) {
  const pset *mine = member(even, rank) ? even : member(odd, rank) ? odd : NULL;
  static float buf[PER_SET][COUNT], global[COUNT];
  hvd_handle h[PER_SET], hg = -1;
  char name[PER_SET][32];
  for (int k = 0; k < PER_SET && mine; k++) {
    snprintf(name[k], sizeof name[k], "ps.%d.%d", mine->id, k);
    CALL(h[k] = enqueue(mine, name[k], k, buf[k]));
    if (k == PER_SET / 2) CALL(hg = enqueue(NULL, "ps.global.mid", 40, global));
  }
  if (!mine) CALL(hg = enqueue(NULL, "ps.global.mid", 40, global));
  for (int k = 0; k < PER_SET && mine; k++) check_sum(mine, name[k], k, h[k], buf[k]);
  check_sum(NULL, "ps.global.mid", 40, hg, global);
}

/* Tensor names belong to their set (as in Horovod, where each set has
 * its own queue): the same name in two disjoint sets is two tensors. */
static void test_same_name_in_two_sets(const pset *even, const pset *odd) {
  const pset *mine = member(even, rank) ? even : member(odd, rank) ? odd : NULL;
  float buf[COUNT];
  CALL(hvd_barrier()); /* both sets submit the name at the same time */
  if (mine) check_sum(mine, "ps.shared", 41, enqueue(mine, "ps.shared", 41, buf), buf);
}

/* An allgather on each set concatenates its members in set-rank order;
 * recvcounts has one entry per member, indexed by set rank. */
static void test_set_allgather(const pset *s) {
  if (!member(s, rank)) return;
  int32_t in[3] = {rank * 100, rank * 100 + 1, rank * 100 + 2};
  void *out = NULL;
  size_t counts[8] = {0};
  hvd_opts o = on(s);
  hvd_handle h;
  char name[32];
  snprintf(name, sizeof name, "ps.gather.%d", s->id);
  CALL(h = hvd_allgather_async(in, (size_t)rank % 3 + 1, HVD_INT32, &out, counts, name, &o));
  int rc = hvd_wait(h);
  CHECK(rc == 0, "allgather on set %d: %s: %s", s->id, hvd_err_name(rc), hvd_last_error());
  if (rc != 0) return;
  int counts_right = 1;
  for (int j = 0; j < s->n; j++) {
    size_t n = (size_t)s->ranks[j] % 3 + 1;
    counts_right &= counts[j] == n;
    CHECK(counts[j] == n, "allgather on set %d: set rank %d's count %zu, expected %zu", s->id, j,
          counts[j], n);
  }
  size_t off = 0;
  for (int j = 0; j < s->n && counts_right; j++) { /* only read what arrived */
    int q = s->ranks[j];
    for (size_t e = 0; e < counts[j]; e++)
      CHECK(((int32_t *)out)[off + e] == q * 100 + (int)e,
            "allgather on set %d: element %zu of set rank %d is %d", s->id, e, j,
            ((int32_t *)out)[off + e]);
    off += counts[j];
  }
  free(out);
}

/* {0,2} completes while {1,3} sit idle for 1.5 s before their own op. */
static void test_sets_independent(const pset *even, const pset *odd) {
  float buf[COUNT];
  CALL(hvd_barrier());
  if (member(even, rank)) {
    double t0 = now();
    allreduce_on(even, "ps.quick", 50);
    double took = now() - t0;
    CHECK(took < 1.0, "set {0,2}'s allreduce took %.2f s: it waited for the idle set {1,3}",
          took);
  } else if (member(odd, rank)) {
    sleep_ms(1500);
    check_sum(odd, "ps.slow", 51, enqueue(odd, "ps.slow", 51, buf), buf);
  }
  CALL(hvd_barrier());
}

static void test_two_sets(void) {
  int even_ranks[] = {2, 0}, odd_ranks[] = {1, 3}; /* any order; the set sorts them */
  pset even = add(even_ranks, 2, 1), odd = add(odd_ranks, 2, 2);
  check_queries(&even);
  check_queries(&odd);
  test_concurrent_sets(&even, &odd);
  allreduce_on(NULL, "ps.global.between", 60);
  test_set_allgather(&even);
  test_set_allgather(&odd);
  test_sets_independent(&even, &odd);
  if (rank == 0) {
    float buf[COUNT];
    expect_invalid(enqueue(&odd, "ps.intruder", 61, buf), 1, "rank 0's allreduce on {1,3}");
  }

  /* Removed: its id is refused everywhere.  Added again: it works. */
  CALL(hvd_remove_process_set(even.id));
  expect_invalid(hvd_process_set_size(even.id), 0, "size of a removed set");
  float buf[COUNT];
  expect_invalid(enqueue(&even, "ps.removed", 62, buf), 1, "allreduce on a removed set");
  if (member(&odd, rank)) allreduce_on(&odd, "ps.odd.after.removal", 63); /* unaffected */
  pset again = add(even_ranks, 2, 0);
  CHECK(again.id != odd.id, "the re-added set got the live set %d's id", odd.id);
  check_queries(&again);
  if (member(&again, rank)) allreduce_on(&again, "ps.readded", 64);
  test_same_name_in_two_sets(&again, &odd);
  CALL(hvd_remove_process_set(again.id));
  CALL(hvd_remove_process_set(odd.id));
  allreduce_on(NULL, "ps.global.end", 65);
}

int main(void) {
  limit_stalls();
  CALL(hvd_init());
  rank = hvd_rank();
  size = hvd_size();
  test_global_set();
  if (size >= 4) test_two_sets();
  test_single_member_set(size >= 4 ? 0 : 1); /* the first set of the job gets id 1 */
  test_invalid();
  CALL(hvd_shutdown());
  return report_checks("test_process_sets", rank, size, checks, failures);
}
