/*
 * test_staging.c -- the staging pipeline (src/gpu/staging.c) against a
 * host-memory stand-in for the device's copies (host_copier.h), so that
 * its chunking, overlap and completion order are checked without a GPU.
 *
 * The "collective" is staging_ref.h's position-dependent transform, whose
 * result is computed independently.  Overlap is shown without timing: the copy of chunk 1 is held back until
 * the collective of chunk 0 has run, which only a pipelined run survives.
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
#include "gpu/staging.h"
#include "host_copier.h"
#include "staging_ref.h"

typedef struct {
  host_copier *h;
  size_t elem, chunk; /* the chunk the pipeline must cut (whole elements) */
  size_t calls, next_offset;
  size_t fail_at;   /* chunk index + 1 whose collective fails; 0: none */
  int release_after_first; /* hc_release() once chunk 0's collective ran */
  size_t queued_at_first; /* copies queued when chunk 0's collective began */
} collective;

/* In place, on one chunk; checks the chunks arrive in order and whole. */
static int transform(void *arg, void *host, size_t offset, size_t bytes) {
  collective *c = arg;
  hc_log(c->h, HC_FN, offset);
  if (offset != c->next_offset || offset % c->elem != 0 || bytes % c->elem != 0 ||
      bytes == 0 || bytes > c->chunk)
    return hvd__err(HVD_E_INVALID, "chunk at %zu of %zu bytes out of order or shape", offset,
                    bytes);
  if (c->calls == 0) {
    pthread_mutex_lock(&c->h->mu);
    c->queued_at_first = c->h->copies_queued;
    pthread_mutex_unlock(&c->h->mu);
  }
  c->calls++;
  c->next_offset += bytes;
  if (c->fail_at && c->calls == c->fail_at) return hvd__err(HVD_E_PEER_LOST, "rank 1 lost");
  staging_ref_apply(host, offset, bytes);
  if (c->calls == 1 && c->release_after_first) hc_release(c->h);
  return 0;
}

static void set_device_buffers(host_copier *h, const void *src, void *dst) {
  pthread_mutex_lock(&h->mu);
  h->dev_src = src;
  h->dev_dst = dst;
  h->nlog = 0;
  pthread_mutex_unlock(&h->mu);
}

/* One run of n bytes; returns its code and checks the result on success. */
static int run_and_check(hvd__staging *s, collective *c, size_t n, int in_place) {
  unsigned char *src = malloc(n + 1), *dst = in_place ? src : malloc(n + 1);
  unsigned char *want = malloc(n + 1);
  staging_ref_fill(src, want, n, (unsigned)n);
  set_device_buffers(c->h, src, dst);
  c->calls = c->next_offset = 0;
  int rc = hvd__staging_run(s, dst, src, n, c->elem, transform, c, hvd__deadline_in(20000));
  if (rc == 0) {
    assert_int_equal(c->next_offset, n);
    assert_int_equal(c->calls, (n + c->chunk - 1) / c->chunk);
    assert_memory_equal(dst, want, n);
  }
  /* Whatever happened, no copy is left queued. */
  pthread_mutex_lock(&c->h->mu);
  assert_int_equal(c->h->done, c->h->queued);
  pthread_mutex_unlock(&c->h->mu);
  if (!in_place) free(dst);
  free(src);
  free(want);
  return rc;
}

/* Every combination of element size, length, chunk size and slot count,
 * in place and not: the result is right and chunks are cut on elements. */
static void test_results_for_every_shape(void **state) {
  (void)state;
  host_copier *h = hc_create(0);
  hvd__copier cp = hc_copier(h);
  const size_t elems[] = {1, 2, 4, 12}, counts[] = {0, 1, 7, 16, 100, 1023};
  const size_t chunks[] = {12, 16, 64, 1000};
  const int slots[] = {1, 2, 3, 8};
  int runs = 0;
  for (size_t ci = 0; ci < HVD__ARRAY_LEN(chunks); ci++)
    for (size_t si = 0; si < HVD__ARRAY_LEN(slots); si++) {
      hvd__staging *s;
      assert_int_equal(hvd__staging_create(&s, &cp, chunks[ci], slots[si]), 0);
      for (size_t ei = 0; ei < HVD__ARRAY_LEN(elems); ei++)
        for (size_t ni = 0; ni < HVD__ARRAY_LEN(counts); ni++) {
          collective c = {.h = h, .elem = elems[ei], .chunk = chunks[ci] / elems[ei] * elems[ei]};
          int rc = run_and_check(s, &c, counts[ni] * elems[ei], runs % 2);
          if (rc != 0) fail_msg("%zu x %zu bytes, chunk %zu, %d slots: %s", counts[ni],
                                elems[ei], chunks[ci], slots[si], hvd_last_error());
          runs++;
        }
      hvd__staging_destroy(s);
    }
  assert_int_equal(h->pinned_live, 0);
  assert_int_equal(h->freed_while_busy, 0);
  hc_destroy(h);
}

/* Index in the log of the entry (kind, offset), or fail. */
static size_t log_index(const host_copier *h, int kind, size_t offset) {
  for (size_t i = 0; i < h->nlog; i++)
    if (h->log[i].kind == kind && h->log[i].offset == offset) return i;
  fail_msg("no log entry %d at %zu", kind, offset);
  return 0;
}

/* With slow copies: each chunk's copy in completes before its collective,
 * the collective before its copy back; collectives and copies back run in
 * chunk order; a slot is refilled only after its result left it. */
static void test_completion_order(void **state) {
  (void)state;
  host_copier *h = hc_create(300);
  hvd__copier cp = hc_copier(h);
  hvd__staging *s;
  const size_t chunk = 64, n = 6 * chunk + 8;
  const int slots = 2;
  assert_int_equal(hvd__staging_create(&s, &cp, chunk, slots), 0);
  collective c = {.h = h, .elem = 4, .chunk = chunk};
  assert_int_equal(run_and_check(s, &c, n, 0), 0);
  for (size_t k = 0; k * chunk < n; k++) {
    size_t in = log_index(h, HC_D2H, k * chunk), fn = log_index(h, HC_FN, k * chunk);
    size_t out = log_index(h, HC_H2D, k * chunk);
    assert_true(in < fn && fn < out);
    if (k > 0) {
      assert_true(log_index(h, HC_FN, (k - 1) * chunk) < fn);
      assert_true(log_index(h, HC_H2D, (k - 1) * chunk) < out);
    }
    if ((k + slots) * chunk < n) assert_true(out < log_index(h, HC_D2H, (k + slots) * chunk));
  }
  hvd__staging_destroy(s);
  hc_destroy(h);
}

/* The copy of chunk 1 is held until chunk 0's collective has run: a
 * pipeline that waited for it first would time out.  Chunk 1's copy was
 * already queued when chunk 0's collective began. */
static void test_collective_overlaps_next_copy(void **state) {
  (void)state;
  host_copier *h = hc_create(0);
  h->hold_copy_at = 2; /* copies are queued d2h 0, d2h 1, ... */
  hvd__copier cp = hc_copier(h);
  hvd__staging *s;
  assert_int_equal(hvd__staging_create(&s, &cp, 64, 2), 0);
  collective c = {.h = h, .elem = 4, .chunk = 64, .release_after_first = 1};
  int rc = run_and_check(s, &c, 4 * 64, 0);
  if (rc != 0) fail_msg("not pipelined: %s", hvd_last_error());
  assert_true(c.queued_at_first >= 2);
  assert_true(log_index(h, HC_FN, 0) < log_index(h, HC_D2H, 64));
  hvd__staging_destroy(s);
  hc_destroy(h);
}

/* A collective's failure is returned with the chunk it happened in, after
 * the queued copies finished; the pipeline stays usable. */
static void test_collective_error(void **state) {
  (void)state;
  host_copier *h = hc_create(100);
  hvd__copier cp = hc_copier(h);
  hvd__staging *s;
  assert_int_equal(hvd__staging_create(&s, &cp, 64, 3), 0);
  collective c = {.h = h, .elem = 4, .chunk = 64, .fail_at = 3};
  assert_int_equal(run_and_check(s, &c, 5 * 64 - 4, 0), HVD_E_PEER_LOST);
  assert_string_equal(hvd_last_error(), "staged chunk 2 of 5 (bytes 128..192): rank 1 lost");
  c.fail_at = 0;
  assert_int_equal(run_and_check(s, &c, 5 * 64 - 4, 1), 0);
  hvd__staging_destroy(s);
  assert_int_equal(h->freed_while_busy, 0);
  assert_int_equal(h->pinned_live, 0);
  hc_destroy(h);
}

/* A copy refused when queued (the first copy back, copy 3) names its chunk. */
static void test_copy_error(void **state) {
  (void)state;
  host_copier *h = hc_create(0);
  h->fail_copy_at = 3;
  hvd__copier cp = hc_copier(h);
  hvd__staging *s;
  assert_int_equal(hvd__staging_create(&s, &cp, 64, 2), 0);
  collective c = {.h = h, .elem = 4, .chunk = 64};
  assert_int_equal(run_and_check(s, &c, 4 * 64, 0), HVD_E_SYSTEM);
  assert_string_equal(hvd_last_error(),
                      "staged chunk 0 of 4 (bytes 0..64): stand-in: copy 3 refused");
  hvd__staging_destroy(s);
  hc_destroy(h);
}

/* A copy that never completes: HVD_E_TIMEOUT at the deadline; its copies
 * still queued, the pipeline is broken (later runs HVD_E_ABORTED) and
 * leaves the pinned memory to them rather than free it under them. */
static void test_deadline_breaks_the_pipeline(void **state) {
  (void)state;
  host_copier *h = hc_create(0);
  h->hold_copy_at = 1;
  hvd__copier cp = hc_copier(h);
  hvd__staging *s;
  assert_int_equal(hvd__staging_create(&s, &cp, 64, 2), 0);
  unsigned char src[128] = {0}, dst[128];
  set_device_buffers(h, src, dst);
  collective c = {.h = h, .elem = 4, .chunk = 64};
  assert_int_equal(hvd__staging_run(s, dst, src, sizeof src, 4, transform, &c,
                                    hvd__deadline_in(200)),
                   HVD_E_TIMEOUT);
  assert_string_equal(hvd_last_error(), "staged chunk 0 of 2 (bytes 0..64): stand-in: copies "
                      "not done by the deadline");
  assert_int_equal(c.calls, 0);
  assert_int_equal(hvd__staging_run(s, dst, src, sizeof src, 4, transform, &c,
                                    hvd__deadline_in(200)),
                   HVD_E_ABORTED);
  assert_string_equal(hvd_last_error(), "staging: an earlier run's copies did not finish");
  hvd__staging_destroy(s);
  assert_int_equal(h->pinned_live, 1);
  hc_destroy(h); /* lets the held copy finish, then frees what was left */
}

static void test_bad_arguments(void **state) {
  (void)state;
  host_copier *h = hc_create(0);
  hvd__copier cp = hc_copier(h);
  hvd__staging *s;
  assert_int_equal(hvd__staging_create(&s, &cp, 64, 0), HVD_E_INVALID);
  assert_string_equal(hvd_last_error(), "staging: bad pipeline shape (0 slots of 64 bytes)");
  assert_int_equal(hvd__staging_create(&s, &cp, 0, 2), HVD_E_INVALID);
  h->fail_alloc = 1;
  assert_int_equal(hvd__staging_create(&s, &cp, 64, 2), HVD_E_NOMEM);
  assert_string_equal(hvd_last_error(),
                      "staging: setting up 2 slots of 64 bytes: stand-in: no pinned memory");
  h->fail_alloc = 0;
  assert_int_equal(hvd__staging_create(&s, &cp, 8, 2), 0);
  collective c = {.h = h, .elem = 4, .chunk = 8};
  unsigned char buf[24] = {0};
  assert_int_equal(hvd__staging_run(s, buf, buf, 10, 4, transform, &c, HVD__NEVER),
                   HVD_E_INVALID);
  assert_string_equal(hvd_last_error(),
                      "staging: 10 bytes is not a whole number of 4-byte elements");
  assert_int_equal(hvd__staging_run(s, buf, buf, 24, 12, transform, &c, HVD__NEVER),
                   HVD_E_INVALID);
  assert_string_equal(hvd_last_error(), "staging: a 12-byte element does not fit a 8-byte chunk");
  assert_int_equal(c.calls, 0);
  hvd__staging_destroy(s);
  hc_destroy(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_results_for_every_shape),
      cmocka_unit_test(test_completion_order),
      cmocka_unit_test(test_collective_overlaps_next_copy),
      cmocka_unit_test(test_collective_error),
      cmocka_unit_test(test_copy_error),
      cmocka_unit_test(test_deadline_breaks_the_pipeline),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
