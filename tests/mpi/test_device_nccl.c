/*
 * test_device_nccl.c -- device tensors through the engine's NCCL path
 * (src/engine/device_nccl.c) on a GPU: HOROVOD_GPU_OPERATIONS=NCCL (set
 * here when unset), the tensors cudaMalloc()ed on device local_rank, each
 * call made on the device path and again on the host path, the results
 * compared bit for bit after copying them back.
 *
 *   hvdrun -np 1 test_device_nccl     (scripts/gpu-check.sh: nccl-engine-np1;
 *                                      np N needs N GPUs: NCCL refuses two
 *                                      ranks on one)
 *     allreduce of float32 (small integers: every sum exact in any order),
 *     float64, float16, int32 (wrapping), int64, int8, uint8 and bool with
 *     Sum, Min, Max, Product, Average; in and out of place; 1 element to
 *     1.25 M; scale factors (float32, float64 and float16 Sum and Average,
 *     through ncclRedOpCreatePreMulSum, float16's scalar rounded to half); six enqueued at once and a group (one
 *     response: through the fusion buffer); broadcast of 1 byte and 3 MiB
 *     from the last rank; reducescatter (counts dividing by the size and
 *     not: ncclReduceScatter and the allreduce-and-keep-a-share); allgather
 *     and alltoall of 0 to 300000 elements per rank, uneven (ncclAllGather,
 *     or a group of ncclBroadcast; ncclSend/ncclRecv), into device memory
 *     hvd allocates, against the host path's results and counts; a tensor
 *     written by work still queued on the caller's stream (hvd_opts.stream:
 *     NCCL's stream waits for it); a process set (a communicator of its
 *     own); the
 *     refusals, each on every rank with the tensor's name, the buffer
 *     untouched and the job going on: scale factors on int32, int16,
 *     Adasum, a tensor on another device than the path's.
 *
 *   HOROVOD_HIERARCHICAL_ALLREDUCE=1 hvdrun -np 4 -H localhost:2,127.0.0.1:2 \
 *       test_device_nccl hier        (on tests/fake_gpu's libraries: two
 *                                      emulated hosts of two ranks; needs two
 *                                      GPUs per host on real ones)
 *     the allreduces above (not the integer Average, which is flat) through
 *     the hierarchical form: ncclReduceScatter within the host, hvd's
 *     allreduce across hosts, ncclAllGather; the cross step counted.
 *
 *   hvdrun -np 1 test_device_nccl nccl_error    (on tests/fake_gpu's NCCL
 *                                      with FAKE_NCCL_FAIL=1) an NCCL
 *     error fails the tensor naming it and NCCL's message; the engine
 *     stops (the communicator may be mid-collective), later calls fail,
 *     and shutdown does not hang.
 *
 *   HOROVOD_HIERARCHICAL_ALLREDUCE=1 hvdrun -np 4 -H localhost:2,127.0.0.1:2 \
 *       test_device_nccl hier_error  the same failure in the hierarchical
 *                                      form's first NCCL step, on every rank.
 *
 * Without a GPU (or without NCCL in the build) it says why and exits 77,
 * or 1 with HVD_TEST_EXPECT_GPU=1 (scripts/gpu-check.sh on a GPU).
 * ctest runs it on tests/fake_gpu's CPU stand-ins for libcudart and
 * libnccl (tests/CMakeLists.txt).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"

#if !defined(HVD_WITH_CUDA) || !defined(HVD_WITH_NCCL)
int main(void) {
  const char *v = getenv("HVD_TEST_EXPECT_GPU");
  int expect = v && strcmp(v, "1") == 0;
  printf("%s: this build has no NCCL (HVD_WITH_NCCL is off)\n",
         expect ? "FAILED (HVD_TEST_EXPECT_GPU=1)" : "SKIPPED");
  return expect ? 1 : 77;
}
#else
#include "../unit/gpu_required.h"
#include "api_hooks.h"
#include "gpu/cuda/cudart.h"

static int rank, size, device, checks, failures;
static const hvd__cudart *rt;

static void *dev_alloc(size_t n) {
  void *p = NULL;
  CALL(hvd__cudart_check(rt, rt->Malloc(&p, n ? n : 1), "cudaMalloc"));
  return p;
}

static void upload(void *dev, const void *host, size_t n) {
  CALL(hvd__cudart_check(rt, rt->Memcpy(dev, host, n, cudaMemcpyHostToDevice), "upload"));
}

static void download(void *host, const void *dev, size_t n) {
  CALL(hvd__cudart_check(rt, rt->Memcpy(host, dev, n, cudaMemcpyDeviceToHost), "download"));
}

static void dev_free(void *p) { rt->Free(p); }

static int pset; /* the process set of the device calls: 0, the global one */

static hvd_opts on_device(void) {
  hvd_opts o = HVD_OPTS_INIT;
  o.device = device;
  o.process_set = pset;
  return o;
}

#include "device_both.h"

/* hier: the hierarchical allreduce runs Average and scale factors as a
 * pre-multiplied sum, on floating-point types only; an integer Average takes
 * the flat path, whose communicator of every rank the one-GPU machine
 * (and the stand-in) cannot make. */
static void allreduces(int hier) {
  static const size_t counts[] = {1, 1000, 1310720 + 3};
  for (size_t k = 0; k < LEN(counts); k++) {
    allreduce_both(HVD_FLOAT32, HVD_SUM, counts[k], 1, 1.0, 1.0);
    allreduce_both(HVD_FLOAT32, HVD_SUM, counts[k], 0, 1.0, 1.0);
    allreduce_both(HVD_INT32, HVD_SUM, counts[k], 0, 1.0, 1.0);
  }
  static const hvd_dtype dtypes[] = {HVD_FLOAT64, HVD_FLOAT16, HVD_INT64, HVD_INT8, HVD_UINT8,
                                     HVD_BOOL};
  static const hvd_op ops[] = {HVD_SUM, HVD_MIN, HVD_MAX, HVD_PRODUCT};
  for (size_t d = 0; d < LEN(dtypes); d++)
    for (size_t k = 0; k < LEN(ops); k++) allreduce_both(dtypes[d], ops[k], 4099, 1, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_MAX, 300000, 0, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_MIN, 300000, 1, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_PRODUCT, 1000, 1, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_AVERAGE, 300000, 1, 1.0, 1.0);
  if (!hier) allreduce_both(HVD_INT32, HVD_AVERAGE, 300000, 0, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_SUM, 300000, 0, 0.5, 4.0);
  allreduce_both(HVD_FLOAT64, HVD_SUM, 3000, 1, 0.25, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_AVERAGE, 3000, 1, 2.0, 1.0);
  allreduce_both(HVD_FLOAT16, HVD_SUM, 4099, 1, 0.25, 1.0);
  allreduce_both(HVD_FLOAT16, HVD_AVERAGE, 3000, 0, 2.0, 1.0);
}

/* HOROVOD_HIERARCHICAL_ALLREDUCE=1 on hosts hvdrun emulates: a device
 * allreduce takes the hierarchical form, whose one host step is hvd's
 * allreduce on the cross communicator (its count advances by exactly one)
 * and which leaves the host communicator of hvd's own hierarchy alone
 * (NCCL's within the host does that part). */
static void hierarchy_used(void) {
  enum { N = 1000 };
  float x[N], *dx = dev_alloc(sizeof x);
  for (int i = 0; i < N; i++) x[i] = (float)(i + rank);
  upload(dx, x, sizeof x);
  hvd_opts o = on_device();
  uint32_t local0, cross0, local1, cross1;
  CALL(hvd_wait(hvd_allreduce_async_opts(dx, dx, N, HVD_FLOAT32, HVD_SUM, "hier.first", &o)));
  CALL(hvd__hier_counts(&local0, &cross0));
  CALL(hvd_wait(hvd_allreduce_async_opts(dx, dx, N, HVD_FLOAT32, HVD_SUM, "hier.second", &o)));
  CALL(hvd__hier_counts(&local1, &cross1));
  CHECK(cross1 - cross0 == 1 && local1 == local0,
        "a hierarchical NCCL allreduce moved the cross count by %u and the local one by %u "
        "(expected 1 and 0)", cross1 - cross0, local1 - local0);
  dev_free(dx);
}

/* A process set of every rank: its own NCCL communicator, made at its
 * first call; the results are the global set's. */
static void process_set(void) {
  int *ranks = malloc((size_t)size * sizeof *ranks);
  for (int i = 0; i < size; i++) ranks[i] = i;
  int id = hvd_add_process_set(ranks, size);
  CHECK(id > 0, "hvd_add_process_set: %s", hvd_last_error());
  if (id > 0) {
    pset = id;
    allreduce_both(HVD_FLOAT32, HVD_SUM, 1000, 0, 1.0, 1.0);
    broadcast_both(100);
    reducescatter_both(HVD_INT32, HVD_SUM, 1001);
    pset = 0;
    CHECK(hvd_remove_process_set(id) == 0, "hvd_remove_process_set: %s", hvd_last_error());
  }
  free(ranks);
}

/* Each refused on every rank naming the tensor, the buffer untouched. */
static void refusals(void) {
  enum { N = 8 };
  int32_t x[N], orig[N];
  for (int i = 0; i < N; i++) x[i] = orig[i] = i + 1;
  int32_t *dx = dev_alloc(sizeof x);
  upload(dx, x, sizeof x);
  hvd_opts o = on_device();
  o.prescale_factor = 2.0;
  int rc = hvd_wait(hvd_allreduce_async_opts(dx, dx, N, HVD_INT32, HVD_SUM, "int.scaled", &o));
  expect_refused(rc, HVD_E_UNSUPPORTED, "allreduce 'int.scaled'",
                 "applies scale factors (prescale 2, postscale 1) to floating-point Sum");
  o = on_device();
  rc = hvd_wait(hvd_allreduce_async_opts(dx, dx, N / 2, HVD_INT16, HVD_SUM, "int16", &o));
  expect_refused(rc, HVD_E_UNSUPPORTED, "allreduce 'int16'", "NCCL has no reduction for int16");
  if ((size & (size - 1)) == 0) { /* else refused at the call */
    rc = hvd_wait(hvd_allreduce_async_opts(dx, dx, N, HVD_FLOAT32, HVD_ADASUM, "adasum", &o));
    expect_refused(rc, HVD_E_UNSUPPORTED, "allreduce 'adasum'", "not supported yet for Adasum");
  }
  int count = 0;
  rt->GetDeviceCount(&count);
  o.device = count; /* no such device: this rank's path runs on `device` */
  rc = hvd_wait(hvd_allreduce_async_opts(dx, dx, N, HVD_INT32, HVD_SUM, "other.device", &o));
  expect_refused(rc, HVD_E_INVALID, "allreduce 'other.device'", "has no NCCL path for device");
  download(x, dx, sizeof x);
  CHECK(memcmp(x, orig, sizeof x) == 0, "a refused call wrote its buffer");
  dev_free(dx);
}

static void job_goes_on(void) {
  float x = 1.0f, *dx = dev_alloc(sizeof x);
  upload(dx, &x, sizeof x);
  hvd_opts o = on_device();
  int rc = hvd_wait(hvd_allreduce_async_opts(dx, dx, 1, HVD_FLOAT32, HVD_SUM, "after", &o));
  download(&x, dx, sizeof x);
  CHECK(rc == 0 && x == (float)size, "an NCCL allreduce afterwards: %s, %g", hvd_last_error(),
        (double)x);
  x = 1.0f;
  rc = hvd_wait(hvd_allreduce_async(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after.host"));
  CHECK(rc == 0 && x == (float)size, "a host allreduce afterwards: %s, %g", hvd_last_error(),
        (double)x);
  dev_free(dx);
}

/* An NCCL failure past the agreement: the tensor fails naming itself and
 * NCCL's text, and the engine stops rather than risk a communicator left
 * mid-collective. */
static void nccl_error(const char *call) {
  float x = 1.0f, *dx = dev_alloc(sizeof x);
  upload(dx, &x, sizeof x);
  hvd_opts o = on_device();
  int rc = hvd_wait(hvd_allreduce_async_opts(dx, dx, 1, HVD_FLOAT32, HVD_SUM, "broken", &o));
  const char *msg = hvd_last_error();
  CHECK(rc == HVD_E_SYSTEM && strstr(msg, "allreduce 'broken'") &&
            strstr(msg, call) && strstr(msg, "FAKE_NCCL_FAIL is set"),
        "an NCCL error: %s '%s'", hvd_err_name(rc), msg);
  rc = hvd_wait(hvd_allreduce_async(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after.broken"));
  CHECK(rc < 0, "a call after the engine stopped: %s", hvd_err_name(rc));
  dev_free(dx);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ops";
  limit_stalls();
  gpu_required(hvd__cudart_get(&rt));
  gpu_required(hvd__cudart_device_count(rt));
  setenv("HOROVOD_GPU_OPERATIONS", "NCCL", 0);
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  device = hvd_local_rank();
  CALL(hvd__cudart_check(rt, rt->SetDevice(device), "cudaSetDevice"));
  if (strcmp(mode, "nccl_error") == 0 || strcmp(mode, "hier_error") == 0) {
    nccl_error(strcmp(mode, "hier_error") == 0 ? "ncclReduceScatter (within the host): "
                                               : "ncclAllReduce: ");
    hvd_shutdown();
    return report_checks("test_device_nccl", rank, size, checks, failures);
  }
  if (strcmp(mode, "hier") == 0) {
    allreduces(1);
    many_at_once(NULL);
    hierarchy_used();
    job_goes_on();
    hvd_shutdown();
    return report_checks("test_device_nccl", rank, size, checks, failures);
  }
  allreduces(0);
  many_at_once(NULL);
  broadcast_both(1);
  broadcast_both(3u << 20);
  reducescatters();
  gathers();
  side_stream();
  process_set();
  refusals();
  job_goes_on();
  hvd_shutdown();
  return report_checks("test_device_nccl", rank, size, checks, failures);
}
#endif
