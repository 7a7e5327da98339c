/*
 * test_device_memory.c -- hvd_opts.device: where a call's buffers are,
 * negotiated between the ranks (include/hvd.h, docs/gpu.md).
 *
 *   - a device below HVD_DEVICE_CPU is refused at the call;
 *   - a rank with host memory against ranks with device memory fails on
 *     every rank with HVD_E_MISMATCH naming the collective, the tensor
 *     and which ranks sent which memory (allreduce, allgather, a group);
 *   - every rank with device memory (each its own ordinal: the ordinal is
 *     not negotiated) agrees; an Adasum allreduce, which the device path
 *     does not run yet, fails on every rank with HVD_E_UNSUPPORTED "not
 *     supported yet" (test_device_staged runs what it does run);
 *   - the job goes on: a host allreduce afterwards gives the right sum.
 * The buffers are host memory throughout: nothing here reaches a copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, checks, failures;

static hvd_opts on(int device) {
  hvd_opts o = HVD_OPTS_INIT;
  o.device = device;
  return o;
}

static void expect(int rc, int code, const char *what, const char *a, const char *b) {
  const char *msg = hvd_last_error();
  CHECK(rc == code && strstr(msg, a) && (!b || strstr(msg, b)),
        "%s: %s '%s', expected %s with '%s'%s%s", what, hvd_err_name(rc), msg,
        hvd_err_name(code), a, b ? " and " : "", b ? b : "");
}

static void bad_ordinal(void) {
  hvd_opts o = on(-2);
  float x = 1.0f;
  hvd_handle h = hvd_allreduce_async_opts(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "bad.device", &o);
  expect((int)(h < 0 ? h : hvd_wait(h)), HVD_E_INVALID, "device -2",
         "opts->device is -2: HVD_DEVICE_CPU (-1) or a CUDA device ordinal", "'bad.device'");
}

/* Rank 0 host memory, the others device memory: a mismatch at np > 1. */
static void host_against_device(void) {
  hvd_opts o = on(rank == 0 ? HVD_DEVICE_CPU : rank);
  float x[4] = {1, 2, 3, 4};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 4, HVD_FLOAT32, HVD_SUM, "mixed", &o));
  char others[64];
  if (size == 2)
    snprintf(others, sizeof others, "rank 1 sent device memory");
  else
    snprintf(others, sizeof others, "ranks 1-%d sent device memory", size - 1);
  if (size > 1)
    expect(rc, HVD_E_MISMATCH, "allreduce",
           "Mismatched allreduce tensor memory for 'mixed': rank 0 sent host memory", others);

  void *out = NULL;
  rc = hvd_wait(hvd_allgather_async(x, 2, HVD_FLOAT32, &out, NULL, "mixed.gather", &o));
  if (size > 1)
    expect(rc, HVD_E_MISMATCH, "allgather",
           "Mismatched allgather tensor memory for 'mixed.gather': rank 0 sent host memory",
           others);
  free(out);

  const void *in[2] = {x, x + 2};
  void *res[2] = {x, x + 2};
  size_t counts[2] = {2, 2};
  rc = hvd_wait(hvd_grouped_allreduce_async(in, res, counts, 2, HVD_FLOAT32, HVD_SUM,
                                            "mixed.group", &o));
  if (size > 1)
    expect(rc, HVD_E_MISMATCH, "grouped allreduce",
           "Mismatched allreduce tensor memory for 'mixed.group.", others);
}

/* Every rank on its own device: agreed (the ordinal is not negotiated),
 * and refused by what the device path does not run yet. */
static void all_on_device(void) {
  hvd_opts o = on(rank);
  float x[4] = {1, 2, 3, 4};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 4, HVD_FLOAT32, HVD_ADASUM, "dev.adasum", &o));
  if ((size & (size - 1)) == 0) /* else refused at the call: not a power of two */
    expect(rc, HVD_E_UNSUPPORTED, "all on device", "allreduce 'dev.adasum': device memory",
           "not supported yet for Adasum");
  else
    expect(rc, HVD_E_UNSUPPORTED, "all on device", "allreduce 'dev.adasum'",
           "power-of-two number of ranks");
  CHECK(x[0] == 1 && x[3] == 4, "a refused allreduce wrote its buffer");
}

static void job_goes_on(void) {
  float x = (float)rank;
  int rc = hvd_wait(hvd_allreduce_async(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after"));
  float want = (float)size * (float)(size - 1) / 2;
  CHECK(rc == 0 && x == want, "host allreduce afterwards: %s, %g (want %g)", hvd_last_error(),
        (double)x, (double)want);
}

int main(void) {
  limit_stalls();
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  bad_ordinal();
  host_against_device();
  all_on_device();
  job_goes_on();
  hvd_shutdown();
  return report_checks("test_device_memory", rank, size, checks, failures);
}
