/*
 * test_staged_allreduce.c -- hvd_allreduce of "device" memory staged
 * through the staging pipeline (src/gpu/staging.c), each chunk reduced by
 * hvd's host allreduce as soon as its copy arrives, compared bit for bit
 * with the same allreduce of the whole buffer in host memory (the CPU
 * path).  What the engine's staged GPU path will do, before the engine is
 * wired to it (docs/gpu.md).
 *
 * The device is the host-memory stand-in (tests/unit/host_copier.h) by
 * default; with HVD_STAGING_COPIER=cuda it is CUDA device 0 through the
 * CUDA copier, every rank sharing the one GPU (scripts/gpu-check.sh), and
 * a machine without one fails saying so.  Values are small integers in
 * float32 (sums exact in any order) and int32 (wrapping), so the two paths
 * must agree exactly whatever algorithm each chunk and the whole buffer get.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/host_copier.h"
#include "common.h"
#include "gpu/staging.h"
#include "testing.h"
#ifdef HVD_WITH_CUDA
#include "gpu/cuda/copier_cuda.h"
#include "gpu/cuda/cudart.h"
#endif

static int rank, size, checks, failures;

/* "Device" memory: where the test puts the input and reads the result. */
typedef struct {
  const char *name;
  hvd__copier copier;
  int (*alloc)(void **p, size_t n);
  void (*release)(void *p);
  int (*upload)(void *dev, const void *host, size_t n);
  int (*download)(void *host, const void *dev, size_t n);
  host_copier *stand_in; /* NULL on CUDA */
} device;

static int host_alloc(void **p, size_t n) { return (*p = malloc(n ? n : 1)) ? 0 : -1; }
static void host_release(void *p) { free(p); }
static int host_copy(void *dst, const void *src, size_t n) { return memcpy(dst, src, n), 0; }

#ifdef HVD_WITH_CUDA
static const hvd__cudart *rt;
static int cuda_alloc(void **p, size_t n) { return rt->Malloc(p, n ? n : 1) == cudaSuccess ? 0 : -1; }
static void cuda_release(void *p) { rt->Free(p); }
/* cudaMemcpy from pageable memory may return before its DMA into the
 * device is done (on the legacy stream), and the pipeline's copier stream
 * does not wait for that stream: the engine would, with the tensor's ready
 * event (device.c); this test drives the pipeline alone, so it waits. */
static int cuda_upload(void *dev, const void *host, size_t n) {
  return rt->Memcpy(dev, host, n, cudaMemcpyHostToDevice) == cudaSuccess &&
                 rt->StreamSynchronize(NULL) == cudaSuccess
             ? 0
             : -1;
}
static int cuda_download(void *host, const void *dev, size_t n) {
  return rt->Memcpy(host, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}
#endif

static int open_device(device *d) {
  const char *want = getenv("HVD_STAGING_COPIER");
  if (want == NULL || strcmp(want, "host") == 0) {
    host_copier *h = hc_create(20);
    *d = (device){"host stand-in", hc_copier(h), host_alloc, host_release, host_copy, host_copy, h};
    return 0;
  }
  if (strcmp(want, "cuda") != 0)
    return hvd__err(HVD_E_ENV, "HVD_STAGING_COPIER='%s': expected host or cuda", want);
#ifdef HVD_WITH_CUDA
  HVD__CHECK(hvd__cudart_get(&rt));
  *d = (device){"CUDA device 0", {0}, cuda_alloc, cuda_release, cuda_upload, cuda_download, NULL};
  return hvd__copier_cuda_create(&d->copier, 0);
#else
  return hvd__err(HVD_E_UNSUPPORTED, "HVD_STAGING_COPIER=cuda: this build has no CUDA");
#endif
}

static void close_device(device *d) {
  if (d->stand_in) hc_destroy(d->stand_in);
#ifdef HVD_WITH_CUDA
  else hvd__copier_cuda_destroy(&d->copier);
#endif
}

typedef struct {
  hvd_dtype dtype;
  size_t elem;
  const char *tag;
} chunk_op;

/* The host collective on one chunk: hvd's allreduce, in place. */
static int allreduce_chunk(void *arg, void *host, size_t offset, size_t bytes) {
  const chunk_op *op = arg;
  char name[96];
  snprintf(name, sizeof name, "staged.%s.%zu", op->tag, offset);
  int rc = hvd_allreduce(host, host, bytes / op->elem, op->dtype, HVD_SUM, name);
  return rc < 0 ? hvd__err(rc, "%s", hvd_last_error()) : 0;
}

static void fill(void *buf, hvd_dtype dtype, size_t count) {
  for (size_t i = 0; i < count; i++) {
    int v = (int)((i * 7 + (size_t)rank * 13) % 1000) - 300 * (rank % 2);
    if (dtype == HVD_FLOAT32)
      ((float *)buf)[i] = (float)v;
    else
      ((int32_t *)buf)[i] = (int32_t)(v * 2147483 + rank); /* wraps when summed */
  }
}

/* One tensor: staged through the device, and whole on the host. */
static void staged_vs_host(device *d, hvd__staging *s, hvd_dtype dtype, size_t count) {
  size_t bytes = count * 4;
  char tag[48];
  snprintf(tag, sizeof tag, "%s.%zu", dtype == HVD_FLOAT32 ? "f32" : "i32", count);
  void *in = malloc(bytes + 1), *want = malloc(bytes + 1), *got = malloc(bytes + 1), *dev;
  fill(in, dtype, count);
  memcpy(want, in, bytes);
  char name[64];
  snprintf(name, sizeof name, "host.%s", tag);
  CALL(hvd_allreduce(want, want, count, dtype, HVD_SUM, name));
  CHECK(d->alloc(&dev, bytes) == 0 && d->upload(dev, in, bytes) == 0, "%s: device buffer", tag);
  chunk_op op = {dtype, 4, tag};
  int rc = hvd__staging_run(s, dev, dev, bytes, 4, allreduce_chunk, &op, hvd__deadline_in(60000));
  CHECK(rc == 0, "%s: staged allreduce: %s", tag, hvd_last_error());
  CHECK(d->download(got, dev, bytes) == 0, "%s: reading the result back", tag);
  CHECK(rc != 0 || memcmp(got, want, bytes) == 0, "%s: staged result differs from the host path",
        tag);
  d->release(dev);
  free(in);
  free(want);
  free(got);
}

int main(void) {
  limit_stalls();
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  device d;
  CALL(open_device(&d));
  hvd__staging *s;
  CALL(hvd__staging_create(&s, &d.copier, 64 << 10, 3));
  const size_t counts[] = {1, 1000, (64 << 10) / 4 * 5 + 3, 1 << 20};
  for (size_t i = 0; i < LEN(counts); i++) {
    staged_vs_host(&d, s, HVD_FLOAT32, counts[i]);
    staged_vs_host(&d, s, HVD_INT32, counts[i]);
  }
  hvd__staging_destroy(s);
  if (rank == 0) printf("staged allreduce through %s, np %d\n", d.name, size);
  close_device(&d);
  hvd_shutdown();
  return report_checks("test_staged_allreduce", rank, size, checks, failures);
}
