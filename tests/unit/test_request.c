/*
 * test_request.c -- comparing requests and the mismatch messages (request.h).
 *
 * A mismatch message is the user's whole diagnosis of a bug in their
 * program, so these tests read it: the tensor's name, the field, and what
 * every rank sent must all be there, grouped when ranks agree, and the
 * message must stay bounded however many ranks there are.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "engine/request.h"

#define MAX_RANKS 64

static hvd_request make(const char *name, int type) {
  hvd_request r;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "%s", name);
  r.type = (uint8_t)type;
  r.dtype = HVD_FLOAT32;
  r.op = type == HVD_REQ_ALLREDUCE || type == HVD_REQ_REDUCESCATTER ? HVD_SUM : 0;
  r.count = type == HVD_REQ_ALLGATHER || type == HVD_REQ_ALLTOALL ? 0 : 10;
  r.prescale = r.postscale = 1.0;
  return r;
}

/* n copies of base, rank i's request reqs[i] from rank i. */
typedef struct {
  hvd_request req[MAX_RANKS];
  const hvd_request *ptr[MAX_RANKS];
  int rank[MAX_RANKS];
  int n;
} job;

static void job_init(job *j, const hvd_request *base, int n) {
  j->n = n;
  for (int i = 0; i < n; i++) {
    j->req[i] = *base;
    j->ptr[i] = &j->req[i];
    j->rank[i] = i;
  }
}

static int job_check(const job *j) { return hvd__requests_check(j->ptr, j->rank, j->n); }

/* Checks fail with HVD_E_MISMATCH and a message holding every substring. */
static void expect_mismatch(const job *j, const char *const *words, size_t nwords) {
  hvd__err_clear();
  assert_int_equal(job_check(j), HVD_E_MISMATCH);
  const char *msg = hvd_last_error();
  for (size_t i = 0; i < nwords; i++) {
    if (!strstr(msg, words[i])) fail_msg("'%s' is not in \"%s\"", words[i], msg);
  }
}

#define EXPECT_MISMATCH(j, ...)                                   \
  do {                                                            \
    const char *const words_[] = {__VA_ARGS__};                   \
    expect_mismatch((j), words_, HVD__ARRAY_LEN(words_));         \
  } while (0)

/* ---- names and equality ---- */

static void test_type_names(void **state) {
  (void)state;
  assert_string_equal(hvd__req_type_name(HVD_REQ_ALLREDUCE), "allreduce");
  assert_string_equal(hvd__req_type_name(HVD_REQ_BROADCAST), "broadcast");
  assert_string_equal(hvd__req_type_name(HVD_REQ_ALLGATHER), "allgather");
  assert_string_equal(hvd__req_type_name(HVD_REQ_ALLTOALL), "alltoall");
  assert_string_equal(hvd__req_type_name(HVD_REQ_REDUCESCATTER), "reducescatter");
  assert_string_equal(hvd__req_type_name(HVD_REQ_BARRIER), "barrier");
  assert_string_equal(hvd__req_type_name(HVD_REQ_PSET_ADD), "add_process_set");
  assert_string_equal(hvd__req_type_name(HVD_REQ_PSET_REMOVE), "remove_process_set");
  assert_string_equal(hvd__req_type_name(HVD_REQ__COUNT), "unknown");
  assert_string_equal(hvd__req_type_name(-1), "unknown");
}

static void test_equal_per_field(void **state) {
  (void)state;
  const hvd_request a = make("layer1.weight", HVD_REQ_ALLREDUCE);
  hvd_request b = a;
  assert_true(hvd__request_equal(&a, &b));

  /* Each field alone makes the requests differ. */
  for (int field = 0; field < 12; field++) {
    b = a;
    switch (field) {
    case 0: b.name[0] = 'L'; break;
    case 1: b.type = HVD_REQ_BROADCAST; break;
    case 2: b.dtype = HVD_FLOAT64; break;
    case 3: b.op = HVD_AVERAGE; break;
    case 4: b.root = 1; break;
    case 5: b.count = 11; break;
    case 6: b.prescale = 0.5; break;
    case 7: b.postscale = 2.0; break;
    case 8: b.process_set = 1; break;
    case 9: b.group_size = 2; break;
    case 10: b.on_device = 1; break;
    default: b.group_index = 1; break;
    }
    if (hvd__request_equal(&a, &b)) fail_msg("field %d ignored", field);
    if (hvd__request_equal(&b, &a)) fail_msg("field %d ignored (reversed)", field);
  }
}

static void test_equal_names_as_strings(void **state) {
  (void)state;
  hvd_request a = make("grad", HVD_REQ_ALLREDUCE), b = a;
  memset(b.name + 5, 'x', 10); /* bytes after the NUL do not count */
  assert_true(hvd__request_equal(&a, &b));
  snprintf(b.name, sizeof b.name, "grad2");
  assert_false(hvd__request_equal(&a, &b));
}

static void test_equal_scales_bitwise(void **state) {
  (void)state;
  hvd_request a = make("grad", HVD_REQ_ALLREDUCE), b = a;
  a.prescale = 0.0;
  b.prescale = -0.0; /* == says equal; they scale to different zeros */
  assert_false(hvd__request_equal(&a, &b));
  a.prescale = b.prescale = NAN; /* == says unequal; the same bits are equal */
  assert_true(hvd__request_equal(&a, &b));
  a.prescale = b.prescale = 1.0;
  a.postscale = 0.1;
  b.postscale = nextafter(0.1, 1.0);
  assert_false(hvd__request_equal(&a, &b));
}

/* ---- agreement ---- */

static void test_check_agreement(void **state) {
  (void)state;
  job j;
  for (int type = 0; type < HVD_REQ__COUNT; type++) {
    hvd_request base = make("t", type);
    for (int n = 0; n <= 8; n++) {
      job_init(&j, &base, n);
      assert_int_equal(job_check(&j), 0);
    }
  }
}

/* Fields a collective does not negotiate may differ freely. */
static void test_check_ignores_fields_not_negotiated(void **state) {
  (void)state;
  job j;
  hvd_request base = make("t", HVD_REQ_BROADCAST);
  job_init(&j, &base, 3);
  j.req[1].op = HVD_MAX;
  assert_int_equal(job_check(&j), 0);

  base = make("t", HVD_REQ_ALLREDUCE);
  job_init(&j, &base, 3);
  j.req[2].root = 2;
  assert_int_equal(job_check(&j), 0);

  base = make("t", HVD_REQ_ALLGATHER);
  job_init(&j, &base, 3);
  j.req[1].count = 5; /* never sent for allgather, but not looked at either */
  j.req[1].op = HVD_MIN;
  j.req[2].root = 1;
  assert_int_equal(job_check(&j), 0);

  /* A barrier moves no tensor: only its process set matters. */
  base = make("b", HVD_REQ_BARRIER);
  job_init(&j, &base, 3);
  j.req[1].dtype = HVD_INT8;
  j.req[1].count = 3;
  j.req[2].prescale = 2;
  j.req[2].group_size = 3;
  assert_int_equal(job_check(&j), 0);
}

/* ---- one mismatch per field ---- */

static void test_mismatch_count_exact(void **state) {
  (void)state;
  job j;
  hvd_request base = make("grad", HVD_REQ_ALLREDUCE);
  job_init(&j, &base, 2);
  j.req[1].count = 12;
  assert_int_equal(job_check(&j), HVD_E_MISMATCH);
  assert_string_equal(hvd_last_error(),
                      "Mismatched allreduce tensor counts for 'grad': rank 0 sent 10, "
                      "rank 1 sent 12");
}

static void test_mismatch_each_field(void **state) {
  (void)state;
  job j;
  hvd_request base = make("grad", HVD_REQ_ALLREDUCE);

  job_init(&j, &base, 3);
  j.req[1].type = HVD_REQ_BROADCAST;
  EXPECT_MISMATCH(&j, "'grad'", "collectives", "ranks 0,2 sent allreduce", "rank 1 sent broadcast");

  job_init(&j, &base, 3);
  j.req[2].dtype = HVD_INT32;
  EXPECT_MISMATCH(&j, "'grad'", "allreduce tensor dtypes", "ranks 0-1 sent float32",
                  "rank 2 sent int32");

  job_init(&j, &base, 3);
  j.req[1].count = 12;
  EXPECT_MISMATCH(&j, "'grad'", "counts", "ranks 0,2 sent 10", "rank 1 sent 12");

  job_init(&j, &base, 3);
  j.req[0].op = HVD_AVERAGE;
  EXPECT_MISMATCH(&j, "'grad'", "ops", "rank 0 sent average", "ranks 1-2 sent sum");

  job_init(&j, &base, 3);
  j.req[1].prescale = 0.5;
  EXPECT_MISMATCH(&j, "'grad'", "prescale factors", "ranks 0,2 sent 1", "rank 1 sent 0.5");

  job_init(&j, &base, 3);
  j.req[2].postscale = 0.125;
  EXPECT_MISMATCH(&j, "'grad'", "postscale factors", "ranks 0-1 sent 1", "rank 2 sent 0.125");

  job_init(&j, &base, 3);
  j.req[1].process_set = 3;
  EXPECT_MISMATCH(&j, "'grad'", "process sets", "ranks 0,2 sent 0", "rank 1 sent 3");

  job_init(&j, &base, 3);
  j.req[1].group_size = 2;
  j.req[1].group_index = 1;
  EXPECT_MISMATCH(&j, "'grad'", "groups", "ranks 0,2 sent no group",
                  "rank 1 sent tensor 1 of a group of 2");

  base = make("w", HVD_REQ_BROADCAST);
  job_init(&j, &base, 3);
  j.req[2].root = 2;
  EXPECT_MISMATCH(&j, "'w'", "broadcast tensor root ranks", "ranks 0-1 sent 0", "rank 2 sent 2");

  base = make("grad", HVD_REQ_ALLREDUCE);
  job_init(&j, &base, 3);
  j.req[1].on_device = 1;
  EXPECT_MISMATCH(&j, "Mismatched allreduce tensor memory for 'grad': ranks 0,2 sent host memory, "
                      "rank 1 sent device memory");

  base = make("rs", HVD_REQ_REDUCESCATTER);
  job_init(&j, &base, 2);
  j.req[1].op = HVD_MAX;
  EXPECT_MISMATCH(&j, "'rs'", "reducescatter tensor ops", "rank 0 sent sum", "rank 1 sent max");
}

/* Process set changes name their own fields. */
static void test_mismatch_shapes(void **state) {
  (void)state;
  hvd_request base = make("w", HVD_REQ_ALLREDUCE);
  base.count = 22287;
  base.ndims = 3;
  base.shape[0] = 17, base.shape[1] = 23, base.shape[2] = 57;
  job j;
  job_init(&j, &base, 3);
  assert_int_equal(job_check(&j), 0);
  j.req[0].ndims = 2; /* the same count, another shape */
  j.req[0].shape[1] = 1311;
  const char *words[] = {"Mismatched allreduce tensor shapes for 'w': rank 0 sent [17, 1311], "
                         "ranks 1-2 sent [17, 23, 57]"};
  expect_mismatch(&j, words, 1);
  assert_false(hvd__request_equal(&j.req[0], &j.req[1]));
  /* a different count is reported as counts, as before shapes */
  j.req[0] = base;
  j.req[0].count = 10;
  j.req[0].ndims = 1;
  j.req[0].shape[0] = 10;
  const char *counts[] = {"Mismatched allreduce tensor counts for 'w': rank 0 sent 10"};
  expect_mismatch(&j, counts, 1);
  /* every dimension printed, a shape too long for the message cut */
  char text[64];
  int64_t big[HVD_MAX_DIMS];
  for (int d = 0; d < HVD_MAX_DIMS; d++) big[d] = 1000000007;
  hvd__shape_print(big, HVD_MAX_DIMS, text, sizeof text);
  assert_true(strlen(text) < sizeof text);
  assert_non_null(strstr(text, "...]"));
  hvd__shape_print(base.shape, 3, text, sizeof text);
  assert_string_equal(text, "[17, 23, 57]");
  /* the shape checks */
  char why[160];
  assert_int_equal(hvd__shape_check(base.shape, 3, 22287, why, sizeof why), 0);
  assert_int_equal(hvd__shape_check(base.shape, 3, 22288, why, sizeof why), -1);
  assert_string_equal(why, "shape [17, 23, 57] holds 22287 elements, not 22288");
  assert_int_equal(hvd__shape_check(base.shape, 0, 1, why, sizeof why), -1);
  assert_int_equal(hvd__shape_check(base.shape, HVD_MAX_DIMS + 1, 1, why, sizeof why), -1);
  int64_t zero[2] = {0, -1};
  assert_int_equal(hvd__shape_check(zero, 2, 0, why, sizeof why), -1);
  assert_string_equal(why, "dimension 1 is -1");
  int64_t huge[2] = {1ll << 40, 1ll << 40};
  assert_int_equal(hvd__shape_check(huge, 2, 0, why, sizeof why), -1);
  assert_string_equal(why, "the shape's size overflows");
}

/* Allgather and alltoall negotiate the dimensions after the first: each
 * rank's first is its own (kept as 0, so the cache still hits when it
 * changes), and no shape at all agrees only with no shape. */
static void test_mismatch_rows(void **state) {
  (void)state;
  hvd_request base = make("g", HVD_REQ_ALLGATHER);
  base.ndims = 3;
  base.shape[1] = 10, base.shape[2] = 17;
  job j;
  job_init(&j, &base, 3);
  assert_int_equal(job_check(&j), 0);
  j.req[2].shape[1] = 20;
  EXPECT_MISMATCH(&j, "Mismatched allgather tensor dimensions after the first for 'g': "
                      "ranks 0-1 sent [*, 10, 17], rank 2 sent [*, 20, 17]");
  base.type = HVD_REQ_ALLTOALL;
  job_init(&j, &base, 2);
  j.req[1].ndims = 2;
  EXPECT_MISMATCH(&j, "Mismatched alltoall tensor dimensions after the first for 'g': "
                      "rank 0 sent [*, 10, 17], rank 1 sent [*, 10]");
  j.req[1].ndims = 0;
  EXPECT_MISMATCH(&j, "rank 1 sent no shape");
  /* what a request may carry: 0 dims, or a first dimension of 0 */
  char why[160];
  assert_int_equal(hvd__rows_check(base.shape, 0, why, sizeof why), 0);
  assert_int_equal(hvd__rows_check(base.shape, 3, why, sizeof why), 0);
  assert_int_equal(hvd__rows_check(base.shape, HVD_MAX_DIMS + 1, why, sizeof why), -1);
  base.shape[0] = 4;
  assert_int_equal(hvd__rows_check(base.shape, 3, why, sizeof why), -1);
  assert_string_equal(why, "dimension 0 is 4");
  base.shape[0] = 0, base.shape[2] = -1;
  assert_int_equal(hvd__rows_check(base.shape, 3, why, sizeof why), -1);
  assert_string_equal(why, "dimension 2 is -1");
}

static void test_mismatch_process_set_changes(void **state) {
  (void)state;
  job j;
  hvd_request base = make("pset.add", HVD_REQ_PSET_ADD);
  base.count = 3;
  base.root = (int32_t)0x89abcdefu;
  job_init(&j, &base, 2);
  j.req[1].count = 4;
  EXPECT_MISMATCH(&j, "Mismatched add_process_set set sizes for 'pset.add': rank 0 sent 3, "
                      "rank 1 sent 4");
  job_init(&j, &base, 2);
  j.req[0].root = 0x1234;
  EXPECT_MISMATCH(&j, "add_process_set rank lists", "rank 0 sent ranks hashing to 0x00001234",
                  "rank 1 sent ranks hashing to 0x89abcdef");

  base = make("pset.remove", HVD_REQ_PSET_REMOVE);
  base.root = 2;
  job_init(&j, &base, 3);
  j.req[2].root = 5;
  EXPECT_MISMATCH(&j, "Mismatched remove_process_set process set ids for 'pset.remove': "
                      "ranks 0-1 sent 2, rank 2 sent 5");

  base = make("b", HVD_REQ_BARRIER);
  job_init(&j, &base, 2);
  j.req[1].process_set = 1;
  EXPECT_MISMATCH(&j, "Mismatched barrier process sets for 'b': rank 0 sent 0, rank 1 sent 1");
}

/* Fields are checked in a fixed order: the first differing one is named. */
static void test_mismatch_first_field_wins(void **state) {
  (void)state;
  job j;
  hvd_request base = make("grad", HVD_REQ_ALLREDUCE);
  job_init(&j, &base, 2);
  j.req[1].count = 12;
  j.req[1].dtype = HVD_FLOAT16;
  j.req[1].postscale = 3;
  EXPECT_MISMATCH(&j, "dtypes", "rank 1 sent float16");
  assert_null(strstr(hvd_last_error(), "count"));
}

static void test_mismatch_scales_never_print_alike(void **state) {
  (void)state;
  job j;
  hvd_request base = make("grad", HVD_REQ_ALLREDUCE);
  base.prescale = 0.1;
  job_init(&j, &base, 2);
  j.req[1].prescale = nextafter(0.1, 1.0);
  EXPECT_MISMATCH(&j, "rank 0 sent 0.1,", "rank 1 sent 0.10000000000000002");
  job_init(&j, &base, 2);
  j.req[0].prescale = 0.0;
  j.req[1].prescale = -0.0;
  EXPECT_MISMATCH(&j, "rank 0 sent 0,", "rank 1 sent -0");
}

/* ---- grouping and bounds ---- */

static void test_mismatch_groups_ranks(void **state) {
  (void)state;
  job j;
  hvd_request base = make("grad", HVD_REQ_ALLREDUCE);
  job_init(&j, &base, 8);
  j.req[3].count = 12;
  j.req[6].count = 12;
  j.req[7].count = 7;
  EXPECT_MISMATCH(&j, "ranks 0-2,4-5 sent 10, ranks 3,6 sent 12, rank 7 sent 7");
}

/* Ranks are the caller's, in the caller's order (e.g. a process set's). */
static void test_mismatch_uses_given_ranks(void **state) {
  (void)state;
  job j;
  hvd_request base = make("grad", HVD_REQ_ALLREDUCE);
  job_init(&j, &base, 4);
  const int ranks[] = {4, 5, 6, 9};
  memcpy(j.rank, ranks, sizeof ranks);
  j.req[3].count = 3;
  EXPECT_MISMATCH(&j, "ranks 4-6 sent 10, rank 9 sent 3");
}

static void test_mismatch_bounded(void **state) {
  (void)state;
  job j;
  hvd_request base = make("", HVD_REQ_ALLREDUCE);
  memset(base.name, 'n', HVD_NAME_MAX - 1); /* the longest name */

  /* Every rank different: the message is cut with "...". */
  job_init(&j, &base, MAX_RANKS);
  for (int i = 0; i < MAX_RANKS; i++) j.req[i].count = 1000000000000ull + (uint64_t)i;
  EXPECT_MISMATCH(&j, base.name, "counts", "rank 0 sent 1000000000000, rank 1 sent");
  const char *msg = hvd_last_error();
  assert_true(strlen(msg) < 900);
  assert_string_equal(msg + strlen(msg) - 3, "...");

  /* Two values, alternating: rank lists cannot collapse into ranges. */
  job_init(&j, &base, MAX_RANKS);
  for (int i = 0; i < MAX_RANKS; i += 2) j.req[i].dtype = HVD_INT8;
  EXPECT_MISMATCH(&j, "ranks 0,2,4,6,");
  assert_true(strlen(hvd_last_error()) < 900);

  /* Many ranks in two blocks: short and complete. */
  job_init(&j, &base, MAX_RANKS);
  for (int i = 32; i < MAX_RANKS; i++) j.req[i].op = HVD_MIN;
  EXPECT_MISMATCH(&j, "ranks 0-31 sent sum, ranks 32-63 sent min");
  assert_null(strstr(hvd_last_error(), "..."));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_type_names),
      cmocka_unit_test(test_equal_per_field),
      cmocka_unit_test(test_equal_names_as_strings),
      cmocka_unit_test(test_equal_scales_bitwise),
      cmocka_unit_test(test_check_agreement),
      cmocka_unit_test(test_check_ignores_fields_not_negotiated),
      cmocka_unit_test(test_mismatch_count_exact),
      cmocka_unit_test(test_mismatch_each_field),
      cmocka_unit_test(test_mismatch_shapes),
      cmocka_unit_test(test_mismatch_rows),
      cmocka_unit_test(test_mismatch_process_set_changes),
      cmocka_unit_test(test_mismatch_first_field_wins),
      cmocka_unit_test(test_mismatch_scales_never_print_alike),
      cmocka_unit_test(test_mismatch_groups_ranks),
      cmocka_unit_test(test_mismatch_uses_given_ranks),
      cmocka_unit_test(test_mismatch_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
