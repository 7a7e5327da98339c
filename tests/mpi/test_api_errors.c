/*
 * test_api_errors.c -- bad input is an error code and a message, never a
 * crash, and it does not break the job: the next good call still works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hvd.h>

#include "testing.h"

static int failures, checks;

/* Asserts that `rc` is `want` and the message contains `needle`. */
static void expect(int line, int rc, int want, const char *needle) {
  checks++;
  const char *msg = hvd_last_error();
  if (rc == want && (!needle || strcasestr(msg, needle))) return;
  failures++;
  fprintf(stderr, "FAIL line %d: got %s '%s', expected %s containing '%s'\n", line,
          hvd_err_name(rc), msg, hvd_err_name(want), needle ? needle : "");
}
#define EXPECT(expr, want, needle) expect(__LINE__, (expr), (want), (needle))

static void before_init(void) {
  float x = 1;
  EXPECT(hvd_is_initialized(), 0, NULL);
  EXPECT(hvd_rank(), HVD_E_NOT_INITIALIZED, "hvd_init");
  EXPECT(hvd_size(), HVD_E_NOT_INITIALIZED, "hvd_init");
  EXPECT(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "early"), HVD_E_NOT_INITIALIZED,
         "hvd_init");
  EXPECT(hvd_barrier(), HVD_E_NOT_INITIALIZED, "hvd_init");
  EXPECT(hvd_shutdown(), 0, NULL);
}

static void bad_arguments(int size) {
  float buf[8] = {0};
  void *out = NULL;
  size_t counts[64] = {0};
  EXPECT(hvd_init(), HVD_E_ALREADY_INITIALIZED, "already");
  EXPECT(hvd_allreduce(NULL, buf, 5, HVD_FLOAT32, HVD_SUM, "w1"), HVD_E_INVALID, "'w1'");
  EXPECT(hvd_allreduce(buf, NULL, 5, HVD_FLOAT32, HVD_SUM, "w2"), HVD_E_INVALID, "recvbuf");
  EXPECT(hvd_allreduce(buf, buf, 1, (hvd_dtype)42, HVD_SUM, "w3"), HVD_E_INVALID, "dtype");
  EXPECT(hvd_allreduce(buf, buf, 1, HVD_FLOAT32, (hvd_op)17, "w4"), HVD_E_INVALID, "op");
  EXPECT(hvd_allreduce(buf, buf, 1, HVD_INT32, HVD_ADASUM, "w5"), HVD_E_UNSUPPORTED,
         "adasum");
  EXPECT(hvd_reducescatter(buf, buf, 1, HVD_FLOAT32, HVD_ADASUM, "w5b"), HVD_E_UNSUPPORTED,
         "adasum");
  EXPECT(hvd_allreduce(buf, buf, 1, HVD_BOOL, HVD_AVERAGE, "w6"), HVD_E_UNSUPPORTED, "bool");
  EXPECT(hvd_allreduce(buf, buf + 1, 4, HVD_FLOAT32, HVD_SUM, "w7"), HVD_E_INVALID, "overlap");
  EXPECT(hvd_broadcast(buf, 1, HVD_FLOAT32, -1, "w8"), HVD_E_INVALID, "root_rank -1");
  EXPECT(hvd_broadcast(buf, 1, HVD_FLOAT32, size, "w9"), HVD_E_INVALID, "root_rank");
  EXPECT(hvd_broadcast(NULL, 3, HVD_INT8, 0, "w10"), HVD_E_INVALID, "NULL");
  EXPECT(hvd_allgather(buf, 1, HVD_FLOAT32, NULL, NULL, "w11"), HVD_E_INVALID, "recvbuf");
  EXPECT(hvd_allgather(NULL, 2, HVD_FLOAT32, &out, NULL, "w12"), HVD_E_INVALID, "sendbuf");
  EXPECT(hvd_alltoall(buf, NULL, HVD_FLOAT32, &out, NULL, "w13"), HVD_E_INVALID, "sendcounts");
  counts[0] = SIZE_MAX;
  counts[size > 1 ? 1 : 0] = SIZE_MAX;
  EXPECT(hvd_alltoall(buf, counts, HVD_FLOAT32, &out, NULL, "w14"), HVD_E_INVALID, "");
  EXPECT(hvd_reducescatter(buf, NULL, 64, HVD_FLOAT32, HVD_SUM, "w15"), HVD_E_INVALID,
         "recvbuf");
  EXPECT(hvd_allreduce(buf, buf, SIZE_MAX / 2, HVD_FLOAT32, HVD_SUM, "w16"), HVD_E_INVALID,
         "overflow");
  /* Empty is fine, even with NULL buffers. */
  EXPECT(hvd_allreduce(NULL, NULL, 0, HVD_FLOAT32, HVD_SUM, "empty"), 0, NULL);
  EXPECT(hvd_broadcast(NULL, 0, HVD_FLOAT32, 0, "empty_b"), 0, NULL);
}

static void still_works(int size) {
  int v = 1;
  EXPECT(hvd_allreduce(&v, &v, 1, HVD_INT32, HVD_SUM, "after_errors"), 0, NULL);
  checks++;
  if (v != size) failures++, fprintf(stderr, "FAIL: sum of ones is %d, expected %d\n", v, size);
}

int main(void) {
  before_init();
  if (init_or_complain() != 0) return 1;
  int size = hvd_size();
  bad_arguments(size);
  still_works(size);
  EXPECT(hvd_shutdown(), 0, NULL);
  EXPECT(hvd_is_initialized(), 0, NULL);
  EXPECT(hvd_shutdown(), 0, NULL);
  if (size == 1) { /* init again after shutdown */
    EXPECT(hvd_init(), 0, NULL);
    still_works(1);
    EXPECT(hvd_shutdown(), 0, NULL);
  }
  printf("test_api_errors: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
