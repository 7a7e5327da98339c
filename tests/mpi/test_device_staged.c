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
 *   test_device_staged bogus                 HOROVOD_GPU_ALLREDUCE=bogus
 *     device allreduces fail naming the knob; broadcast still runs staged.
 *   test_device_staged nocopier              no stand-in: a build without
 *     CUDA, or a machine without a GPU, fails the tensor on every rank
 *     naming the copier's problem, and the job goes on.
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

static void fill(void *buf, hvd_dtype dtype, size_t count, uint64_t seed) {
  for (size_t i = 0; i < count; i++) {
    uint64_t r = mix(seed * 1000003u + i + (uint64_t)rank * 7919u);
    if (dtype == HVD_FLOAT32)
      ((float *)buf)[i] = (float)((int)(r % 2001) - 1000);
    else
      ((int32_t *)buf)[i] = (int32_t)(uint32_t)r;
  }
}

/* The same allreduce on the device path and on the host path. */
static void allreduce_both(hvd_dtype dtype, hvd_op op, size_t count, int in_place, double pre,
                           double post) {
  size_t bytes = count * 4;
  char *send = malloc(bytes + 1), *got = malloc(bytes + 1), *host = malloc(bytes + 1);
  char *dsend = dev_alloc(bytes), *dev = dev_alloc(bytes);
  fill(send, dtype, count, count ^ (uint64_t)op);
  upload(dsend, send, bytes);
  upload(dev, send, bytes);
  memcpy(host, send, bytes);
  hvd_opts o = on_device(), h = HVD_OPTS_INIT;
  o.prescale_factor = h.prescale_factor = pre;
  o.postscale_factor = h.postscale_factor = post;
  char name[96];
  snprintf(name, sizeof name, "ar.%s.%s.%zu.%d", hvd_dtype_name(dtype), hvd_op_name(op), count,
           in_place);
  int rc = hvd_wait(hvd_allreduce_async_opts(in_place ? dev : dsend, dev, count, dtype, op, name,
                                             &o));
  download(got, dev, bytes);
  CHECK(rc == 0, "%s on device: %s", name, hvd_last_error());
  strcat(name, ".host");
  rc = hvd_wait(hvd_allreduce_async_opts(host, host, count, dtype, op, name, &h));
  CHECK(rc == 0, "%s: %s", name, hvd_last_error());
  CHECK(memcmp(got, host, bytes) == 0, "%s: the device path's bits differ from the host path's",
        name);
  free(send), free(got), free(host);
  dev_free(dsend), dev_free(dev);
}

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

/* Several at once: negotiation may fuse them into one response. */
static void many_at_once(void) {
  enum { N = 6, COUNT = 5000 };
  static float got[N][COUNT], host[N][COUNT];
  float *dev[N];
  hvd_handle hs[N];
  hvd_opts o = on_device();
  for (int i = 0; i < N; i++) {
    fill(host[i], HVD_FLOAT32, COUNT, (uint64_t)i);
    dev[i] = dev_alloc(sizeof host[i]);
    upload(dev[i], host[i], sizeof host[i]);
  }
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "many.%d", i);
    hs[i] = hvd_allreduce_async_opts(dev[i], dev[i], COUNT, HVD_FLOAT32, HVD_SUM, name, &o);
  }
  for (int i = 0; i < N; i++) CHECK(hvd_wait(hs[i]) == 0, "many.%d: %s", i, hvd_last_error());
  for (int i = 0; i < N; i++) {
    CALL(hvd_allreduce(host[i], host[i], COUNT, HVD_FLOAT32, HVD_SUM, NULL));
    download(got[i], dev[i], sizeof got[i]);
    CHECK(memcmp(got[i], host[i], sizeof got[i]) == 0, "many.%d differs from the host path", i);
  }

  const void *in[2] = {dev[0], dev[1]};
  void *out[2] = {dev[0], dev[1]};
  size_t gcounts[2] = {COUNT, 17};
  size_t before = d2d_copies();
  int rc = hvd_wait(hvd_grouped_allreduce_async(in, out, gcounts, 2, HVD_FLOAT32, HVD_SUM,
                                                "group", &o));
  CHECK(rc == 0, "grouped allreduce on device: %s", hvd_last_error());
  /* A group is one response: through the fusion buffer, 2 copies in, 2 out. */
  CHECK(!stand_in || d2d_copies() - before == 4, "the group made %zu copies within the device, "
        "expected 4 (through the fusion buffer)", d2d_copies() - before);
  CALL(hvd_allreduce(host[0], host[0], COUNT, HVD_FLOAT32, HVD_SUM, NULL));
  CALL(hvd_allreduce(host[1], host[1], 17, HVD_FLOAT32, HVD_SUM, NULL));
  download(got[0], dev[0], sizeof got[0]);
  download(got[1], dev[1], 17 * 4);
  CHECK(memcmp(got[0], host[0], sizeof got[0]) == 0 && memcmp(got[1], host[1], 17 * 4) == 0,
        "the group differs from the host path");
  for (int i = 0; i < N; i++) dev_free(dev[i]);
}

static void broadcast_both(size_t bytes) {
  char *got = malloc(bytes + 1), *host = malloc(bytes + 1), *dev = dev_alloc(bytes);
  for (size_t i = 0; i < bytes; i++) host[i] = (char)mix(i + 31u * (uint64_t)rank);
  upload(dev, host, bytes);
  hvd_opts o = on_device();
  int root = size - 1;
  int rc = hvd_wait(hvd_broadcast_async_opts(dev, bytes, HVD_UINT8, root, "bcast", &o));
  CHECK(rc == 0, "broadcast of %zu bytes on device: %s", bytes, hvd_last_error());
  CALL(hvd_broadcast(host, bytes, HVD_UINT8, root, "bcast.host"));
  download(got, dev, bytes);
  CHECK(memcmp(got, host, bytes) == 0, "broadcast of %zu bytes differs from the host path",
        bytes);
  free(got), free(host);
  dev_free(dev);
}

/* Reducescatter on the device path and on the host path: rank r's share. */
static void reducescatter_both(hvd_dtype dtype, hvd_op op, size_t count) {
  size_t own = count / (size_t)size + ((size_t)rank < count % (size_t)size); /* hvd's split */
  char *send = malloc(count * 4 + 1), *got = malloc(own * 4 + 1), *host = malloc(own * 4 + 1);
  char *dsend = dev_alloc(count * 4), *dout = dev_alloc(own * 4);
  fill(send, dtype, count, count + 5);
  upload(dsend, send, count * 4);
  hvd_opts o = on_device();
  char name[64];
  snprintf(name, sizeof name, "rs.%s.%zu", hvd_dtype_name(dtype), count);
  int rc = hvd_wait(hvd_reducescatter_async(dsend, dout, count, dtype, op, name, &o));
  CHECK(rc == 0, "%s on device: %s", name, hvd_last_error());
  download(got, dout, own * 4);
  strcat(name, ".host");
  CALL(hvd_wait(hvd_reducescatter_async(send, host, count, dtype, op, name, NULL)));
  CHECK(memcmp(got, host, own * 4) == 0, "%s: the device path's share differs from the host "
        "path's", name);
  free(send), free(got), free(host);
  dev_free(dsend), dev_free(dout);
}

static void reducescatters(void) {
  static const size_t counts[] = {1, 7, 1000, 300001};
  for (size_t k = 0; k < LEN(counts); k++) {
    reducescatter_both(HVD_FLOAT32, HVD_SUM, counts[k]);
    reducescatter_both(HVD_INT32, HVD_SUM, counts[k]);
  }
  reducescatter_both(HVD_FLOAT32, HVD_AVERAGE, 4099);
}

static void expect_refused(int rc, int code, const char *a, const char *b) {
  const char *msg = hvd_last_error();
  CHECK(rc == code && strstr(msg, a) && strstr(msg, b), "%s '%s', expected %s with '%s', '%s'",
        hvd_err_name(rc), msg, hvd_err_name(code), a, b);
}

/* allgather (count elements from rank r: count + r) or alltoall (to rank
 * d: count + d + r) on the device path and on the host path: the device
 * result (new device memory) and the counts against the host path's. */
static void gather_both(int alltoall, size_t count) {
  size_t sendcounts[4], mine = alltoall ? 0 : count + (size_t)rank; /* np <= 4 */
  for (int d = 0; alltoall && d < size; d++) mine += sendcounts[d] = count + (size_t)(d + rank);
  int32_t *send = malloc(mine * 4 + 4), *dsend = dev_alloc(mine * 4);
  fill(send, HVD_INT32, mine, count * 3 + (size_t)alltoall);
  upload(dsend, send, mine * 4);
  hvd_opts o = on_device();
  void *dout = NULL, *hout = NULL;
  size_t dcounts[4] = {0}, hcounts[4] = {0};
  char name[64];
  snprintf(name, sizeof name, "%s.%zu", alltoall ? "a2a" : "ag", count);
  int rc = hvd_wait(alltoall ? hvd_alltoall_async(dsend, sendcounts, HVD_INT32, &dout, dcounts,
                                                  name, &o)
                             : hvd_allgather_async(dsend, mine, HVD_INT32, &dout, dcounts, name,
                                                   &o));
  CHECK(rc == 0, "%s on device: %s", name, hvd_last_error());
  strcat(name, ".host");
  CALL(hvd_wait(alltoall ? hvd_alltoall_async(send, sendcounts, HVD_INT32, &hout, hcounts, name,
                                              NULL)
                         : hvd_allgather_async(send, mine, HVD_INT32, &hout, hcounts, name, NULL)));
  size_t total = 0;
  for (int r = 0; r < size; r++) total += hcounts[r];
  CHECK(memcmp(dcounts, hcounts, sizeof dcounts) == 0, "%s: the device path's counts differ",
        name);
  char *got = malloc(total * 4 + 1);
  if (total) download(got, dout, total * 4);
  CHECK(total ? dout && memcmp(got, hout, total * 4) == 0 : dout == NULL,
        "%s: the device path's result differs from the host path's", name);
  if (dout) dev_free(dout);
  free(hout), free(got), free(send);
  dev_free(dsend);
}

static void gathers(void) {
  static const size_t counts[] = {0, 1, 1000, 300000};
  for (size_t k = 0; k < LEN(counts); k++) {
    gather_both(0, counts[k]);
    gather_both(1, counts[k]);
  }
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

/* HOROVOD_GPU_OPERATIONS=NCCL or HOROVOD_GPU_ALLREDUCE=bogus: allreduce
 * refused naming the knob, broadcast staged. */
static void knob(const char *mode) {
  hvd_opts o = on_device();
  float x[4] = {1, 2, 3, 4};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 4, HVD_FLOAT32, HVD_SUM, "knob", &o));
  if (strcmp(mode, "nccl") == 0)
    expect_refused(rc, HVD_E_UNSUPPORTED, "HOROVOD_GPU_OPERATIONS=NCCL",
                   "the NCCL path is not supported yet");
  else
    expect_refused(rc, HVD_E_ENV, "HOROVOD_GPU_ALLREDUCE='bogus'", "is not NCCL, MPI or GLOO");
  if (strcmp(mode, "bogus") == 0) broadcast_both(100);
}

/* The caller's stream (hvd_opts.stream): when hvd is called, the tensor
 * is still to be written by work queued on a stream of the caller's (4
 * GiB of device copies, milliseconds, then the tensor's upload from
 * pinned memory), and nobody synchronises: hvd's copies must wait for
 * that work on the device.  The other checks upload with cudaMemcpy,
 * whose DMA may still be running on the legacy stream when it returns
 * (the NULL stream's case). */
static void side_stream(void) {
#ifdef HVD_WITH_CUDA
  if (!rt) return;
  const size_t count = 1000, bytes = count * 4, big = (size_t)256 << 20;
  cudaStream_t s;
  void *pinned = NULL, *a = dev_alloc(big), *b = dev_alloc(big), *dev = dev_alloc(bytes);
  CHECK(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
            rt->HostAlloc(&pinned, bytes, cudaHostAllocDefault) == cudaSuccess && a && b && dev,
        "side stream: setting up");
  float *host = malloc(bytes), *got = malloc(bytes);
  fill(pinned, HVD_FLOAT32, count, 77);
  memcpy(host, pinned, bytes);
  for (int i = 0; i < 16; i++) rt->MemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice, s);
  rt->MemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s);
  hvd_opts o = on_device(), h = HVD_OPTS_INIT;
  o.stream = s;
  int rc = hvd_wait(hvd_allreduce_async_opts(dev, dev, count, HVD_FLOAT32, HVD_SUM, "side", &o));
  CHECK(rc == 0, "side stream: %s", hvd_last_error());
  download(got, dev, bytes);
  rc = hvd_wait(hvd_allreduce_async_opts(host, host, count, HVD_FLOAT32, HVD_SUM, "side.host",
                                         &h));
  CHECK(rc == 0 && memcmp(got, host, bytes) == 0,
        "side stream: the result differs from the host path's (hvd did not wait for the "
        "caller's stream?)");
  rt->StreamSynchronize(s);
  rt->StreamDestroy(s);
  rt->FreeHost(pinned);
  dev_free(a), dev_free(b), dev_free(dev);
  free(host), free(got);
#endif
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
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  if (strcmp(mode, "staged") == 0) {
    allreduces();
    many_at_once();
    broadcast_both(1);
    broadcast_both(3u << 20);
    reducescatters();
    side_stream();
    gathers();
    not_yet();
  } else if (strcmp(mode, "nocopier") == 0) {
    no_copier();

  } else {
    knob(mode);
  }
  job_goes_on();
  hvd_shutdown();
  hvd__device_set_copier(NULL);
  if (stand_in) hc_destroy(stand_in);
  return report_checks("test_device_staged", rank, size, checks, failures);
}
