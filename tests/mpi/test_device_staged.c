/*
 * test_device_staged.c -- device tensors through the engine's staged path
 * (src/engine/device.c), with the host-memory stand-in for a GPU's copies
 * (tests/unit/host_copier.h, installed with hvd__device_set_copier before
 * hvd_init): "device memory" is host memory, so every call is made twice,
 * once with hvd_opts.device and once on the host path, and the results
 * must be the same bits.
 *
 *   hvdrun -np N test_device_staged          (np 1, 2, 4)
 *     allreduce (sum, max, average, scale factors; float32 small integers,
 *     so sums are exact in any order, and wrapping int32), in and out of
 *     place, 1 element to 1.25 M (several 1 MiB chunks, more than the 3
 *     slots); several enqueued at once (negotiation may fuse them); a
 *     group (one response: through the device fusion buffer, as the
 *     stand-in's count of copies within the device shows);
 *     broadcast from the last rank; reducescatter (counts that do not
 *     divide by the size, smaller than it); the kinds not staged yet
 *     (allgather, alltoall, Adasum) are refused with "not supported yet",
 *     and the job goes on.
 *   test_device_staged nccl                  HOROVOD_GPU_OPERATIONS=NCCL
 *   test_device_staged nccl_allreduce        HOROVOD_GPU_ALLREDUCE=NCCL
 *     without a GPU: device allreduces (and broadcasts under the first)
 *     fail on every rank naming the tensor and why (no CUDA device, or
 *     no NCCL in the build); broadcast still runs staged under the second.
 *   test_device_staged bogus                 HOROVOD_GPU_ALLREDUCE=bogus
 *     device allreduces fail naming the knob; broadcast still runs staged.
 *   test_device_staged nocopier              no stand-in: a build without
 *     CUDA, or a machine without a GPU, fails the tensor on every rank
 *     naming the copier's problem, and the job goes on.
 *   test_device_staged mixed                 HOROVOD_GPU_OPERATIONS=NCCL on
 *     rank 0 only: a mismatch on every rank naming both paths; the job
 *     goes on once the knobs agree.
 *   HVD_STAGING_COPIER=cuda hvdrun -np N test_device_staged
 *     (scripts/gpu-check.sh) the first run on a GPU: no stand-in, the
 *     engine's CUDA copier, the tensors cudaMalloc()ed on device 0 (every
 *     rank shares the one GPU), compared after copying them back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/host_copier.h"
#include "engine/device.h"
#include "testing.h"
#ifdef HVD_WITH_CUDA
#include "gpu/cuda/cudart.h"
#endif

static int rank, size, checks, failures;
static host_copier *stand_in; /* NULL on CUDA, and without a copier */

/* Copies the engine made within the "device" so far: its fusion buffer. */
static size_t d2d_copies(void) {
  if (!stand_in) return 0;
  pthread_mutex_lock(&stand_in->mu);
  size_t n = stand_in->d2d_queued;
  pthread_mutex_unlock(&stand_in->mu);
  return n;
}

/* "Device" memory: the stand-in's (host memory), or with
 * HVD_STAGING_COPIER=cuda CUDA device 0's through the engine's own CUDA
 * copier (scripts/gpu-check.sh). */
#ifdef HVD_WITH_CUDA
static const hvd__cudart *rt;
#endif

static void *dev_alloc(size_t n) {
#ifdef HVD_WITH_CUDA
  void *p = NULL;
  if (rt) return rt->Malloc(&p, n ? n : 1) == cudaSuccess ? p : NULL;
#endif
  return malloc(n ? n : 1);
}

static void dev_free(void *p) {
#ifdef HVD_WITH_CUDA
  if (rt) {
    rt->Free(p);
    return;
  }
#endif
  free(p);
}

static void upload(void *dev, const void *host, size_t n) {
#ifdef HVD_WITH_CUDA
  if (rt) {
    CHECK(rt->Memcpy(dev, host, n, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
    return;
  }
#endif
  memcpy(dev, host, n);
}

static void download(void *host, const void *dev, size_t n) {
#ifdef HVD_WITH_CUDA
  if (rt) {
    CHECK(rt->Memcpy(host, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess, "download");
    return;
  }
#endif
  memcpy(host, dev, n);
}

static hvd_opts on_device(void) {
  hvd_opts o = HVD_OPTS_INIT;
  o.device = 0;
  return o;
}

#include "device_both.h"

static void allreduces(void) {
  static const size_t counts[] = {1, 1000, 262144, 1310720 + 3};
  for (size_t k = 0; k < LEN(counts); k++) {
    allreduce_both(HVD_FLOAT32, HVD_SUM, counts[k], 1, 1.0, 1.0);
    allreduce_both(HVD_INT32, HVD_SUM, counts[k], 0, 1.0, 1.0);
  }
  allreduce_both(HVD_FLOAT32, HVD_MAX, 300000, 0, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_AVERAGE, 300000, 1, 1.0, 1.0);
  allreduce_both(HVD_FLOAT32, HVD_SUM, 300000, 0, 0.5, 4.0);
}


static void not_yet(void) {
  hvd_opts o = on_device();
  float x[8] = {0};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 8, HVD_FLOAT32, HVD_ADASUM, "dev.adasum", &o));
  if (size == 1 || (size & (size - 1)) == 0)
    expect_refused(rc, HVD_E_UNSUPPORTED, "allreduce 'dev.adasum'", "not supported yet for Adasum");
}

static void job_goes_on(void) {
  float x = 1.0f;
  int rc = hvd_wait(hvd_allreduce_async(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after"));
  CHECK(rc == 0 && x == (float)size, "a host allreduce afterwards: %s, %g", hvd_last_error(),
        (double)x);
}

/* HOROVOD_GPU_OPERATIONS=NCCL or HOROVOD_GPU_ALLREDUCE=NCCL on a machine
 * without a GPU (or a build without NCCL): every rank fails the tensor
 * naming it and its own reason, the buffer untouched; under
 * HOROVOD_GPU_OPERATIONS=NCCL a broadcast too, under
 * HOROVOD_GPU_ALLREDUCE=NCCL it is staged.  HOROVOD_GPU_ALLREDUCE=bogus:
 * refused naming the knob, broadcast staged. */
static void knob(const char *mode) {
  hvd_opts o = on_device();
  float x[4] = {1, 2, 3, 4};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 4, HVD_FLOAT32, HVD_SUM, "knob", &o));
  if (strncmp(mode, "nccl", 4) == 0) {
    char want[64];
    snprintf(want, sizeof want, "rank %d has no NCCL path for device memory: ", rank);
    expect_refused(rc, HVD_E_UNSUPPORTED, "allreduce 'knob'", want);
    const char *msg = hvd_last_error();
    CHECK(strstr(msg, "no CUDA device") || strstr(msg, "built without"), "why: '%s'", msg);
    CHECK(x[0] == 1 && x[3] == 4, "a refused call wrote its buffer");
  } else {
    expect_refused(rc, HVD_E_ENV, "HOROVOD_GPU_ALLREDUCE='bogus'", "is not NCCL, MPI or GLOO");
  }
  if (strcmp(mode, "nccl") != 0) {
    broadcast_both(100);
    return;
  }
  char b[16] = {0};
  rc = hvd_wait(hvd_broadcast_async_opts(b, sizeof b, HVD_UINT8, 0, "knob.bcast", &o));
  expect_refused(rc, HVD_E_UNSUPPORTED, "broadcast 'knob.bcast'", "has no NCCL path");
}

/* mixed: rank 0 alone asks for NCCL.  The path is negotiated with the
 * tensor, so every rank fails it naming both paths, before any rank runs
 * either; with the knob alike again the job goes on. */
static void mixed_paths(void) {
  hvd_opts o = on_device();
  float x[4] = {1, 2, 3, 4};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 4, HVD_FLOAT32, HVD_SUM, "mixed", &o));
  expect_refused(rc, HVD_E_MISMATCH, "memory for 'mixed'", "rank 0 sent device memory (NCCL)");
  const char *msg = hvd_last_error();
  CHECK(strstr(msg, "sent device memory (staged)") != NULL, "the other path unnamed: '%s'", msg);
  CHECK(x[0] == 1 && x[3] == 4, "a refused call wrote its buffer");
  unsetenv("HOROVOD_GPU_OPERATIONS");
}

static void no_copier(void) {
  hvd_opts o = on_device();
  float x[4] = {1, 2, 3, 4};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 4, HVD_FLOAT32, HVD_SUM, "nocopier", &o));
  const char *msg = hvd_last_error();
  CHECK(rc < 0 && strstr(msg, "'nocopier'") && strstr(msg, "has no copier for device memory"),
        "without a copier: %s '%s'", hvd_err_name(rc), msg);
  CHECK(x[0] == 1 && x[3] == 4, "a refused call wrote its buffer");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "staged";
  limit_stalls();
  const char *copier = getenv("HVD_STAGING_COPIER");
  if (copier && strcmp(copier, "cuda") == 0) { /* the engine's CUDA copier, device 0 */
#ifdef HVD_WITH_CUDA
    if (hvd__cudart_get(&rt) < 0) {
      fprintf(stderr, "test_device_staged: HVD_STAGING_COPIER=cuda: %s\n", hvd_last_error());
      return 1;
    }
#else
    fprintf(stderr, "test_device_staged: HVD_STAGING_COPIER=cuda: this build has no CUDA\n");
    return 1;
#endif
  } else if (strcmp(mode, "nocopier") != 0) {
    stand_in = hc_create(0);
    hvd__copier c = hc_copier(stand_in);
    hvd__device_set_copier(&c);
  }
  /* 1 MiB chunks (the default is 4): the tests' tensors span more chunks
   * than the pipeline has slots. */
  setenv("HOROVOD_STAGING_CHUNK_BYTES", "1048576", 0);
  const char *env_rank = getenv("HOROVOD_RANK");
  if (strcmp(mode, "mixed") == 0 && (!env_rank || atoi(env_rank) == 0))
    setenv("HOROVOD_GPU_OPERATIONS", "NCCL", 1);
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  if (strcmp(mode, "staged") == 0) {
    allreduces();
    many_at_once(stand_in ? d2d_copies : NULL);
    broadcast_both(1);
    broadcast_both(3u << 20);
    reducescatters();
    side_stream();
    gathers();
    not_yet();
  } else if (strcmp(mode, "nocopier") == 0) {
    no_copier();
  } else if (strcmp(mode, "mixed") == 0) {
    mixed_paths();
  } else {
    knob(mode);
  }
  job_goes_on();
  hvd_shutdown();
  hvd__device_set_copier(NULL);
  if (stand_in) hc_destroy(stand_in);
  return report_checks("test_device_staged", rank, size, checks, failures);
}
