/*
 * device_both.h -- the device path's tests that the staged path's program
 * (test_device_staged.c, the host stand-in or the engine's CUDA copier)
 * and the NCCL path's (test_device_nccl.c) share: each call made on the
 * device path (hvd_opts.device) and again on the host path, the results
 * compared bit for bit.  Small values, so that sums and products are
 * exact in any order.
 *
 * Like testing.h: static functions only.  The program defines rank, size,
 * checks and failures, and, before including this, its device memory
 * (dev_alloc, dev_free, upload, download), on_device(), the hvd_opts
 * of a call on it, and, in builds with CUDA, rt (NULL: no CUDA device
 * memory, side_stream does nothing).
 */
#ifndef HVD_TESTS_MPI_DEVICE_BOTH_H
#define HVD_TESTS_MPI_DEVICE_BOTH_H

#include <stdlib.h>
#include <string.h>

#include "testing.h"

/* Inputs: bool 0 or 1, float16 from small integers. */
static void fill(void *buf, hvd_dtype dtype, size_t count, uint64_t seed) {
  for (size_t i = 0; i < count; i++) {
    uint64_t r = mix(seed * 1000003u + i + (uint64_t)rank * 7919u);
    int v = (int)(r % 7) - 3;
    switch (dtype) {
      case HVD_FLOAT32: ((float *)buf)[i] = (float)((int)(r % 2001) - 1000); break;
      case HVD_FLOAT64: ((double *)buf)[i] = (double)((int)(r % 2001) - 1000); break;
      case HVD_FLOAT16: ((half *)buf)[i] = (half)v; break;
      case HVD_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)r; break;
      case HVD_INT64: ((int64_t *)buf)[i] = (int64_t)r; break;
      case HVD_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
      case HVD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)r; break;
      case HVD_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(r & 1); break;
      default: ((int16_t *)buf)[i] = (int16_t)v; break;
    }
  }
}

/* The same allreduce on the device path and on the host path. */
static void allreduce_both(hvd_dtype dtype, hvd_op op, size_t count, int in_place, double pre,
                           double post) {
  size_t bytes = count * hvd_dtype_size(dtype);
  char *send = malloc(bytes + 1), *got = malloc(bytes + 1), *host = malloc(bytes + 1);
  char *dsend = dev_alloc(bytes), *dev = dev_alloc(bytes);
  fill(send, dtype, count, count ^ (uint64_t)op ^ ((uint64_t)dtype << 8));
  upload(dsend, send, bytes);
  upload(dev, send, bytes);
  memcpy(host, send, bytes);
  hvd_opts o = on_device(), h = HVD_OPTS_INIT;
  o.prescale_factor = h.prescale_factor = pre;
  o.postscale_factor = h.postscale_factor = post;
  char name[96];
  snprintf(name, sizeof name, "ar.%s.%s.%zu.%d.%g", hvd_dtype_name(dtype), hvd_op_name(op), count,
           in_place, pre * post);
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

/* Several at once: negotiation may fuse them into one response. */
static void many_at_once(size_t (*copies)(void)) {
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
  size_t before = copies ? copies() : 0;
  int rc = hvd_wait(hvd_grouped_allreduce_async(in, out, gcounts, 2, HVD_FLOAT32, HVD_SUM,
                                                "group", &o));
  CHECK(rc == 0, "grouped allreduce on device: %s", hvd_last_error());
  /* A group is one response: through the fusion buffer, 2 copies in, 2 out. */
  if (copies)
    CHECK(copies() - before == 4, "the group made %zu copies within the device, expected 4 "
          "(through the fusion buffer)", copies() - before);
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

/* Rank r's share on the device path and on the host path (a 4-byte dtype). */
static void reducescatter_both(hvd_dtype dtype, hvd_op op, size_t count) {
  size_t own = count / (size_t)size + ((size_t)rank < count % (size_t)size); /* hvd's split */
  char *send = malloc(count * 4 + 1), *got = malloc(own * 4 + 1), *host = malloc(own * 4 + 1);
  char *dsend = dev_alloc(count * 4), *dout = dev_alloc(own * 4);
  fill(send, dtype, count, count + 5);
  upload(dsend, send, count * 4);
  hvd_opts o = on_device();
  char name[64];
  snprintf(name, sizeof name, "rs.%s.%s.%zu", hvd_dtype_name(dtype), hvd_op_name(op), count);
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

/* Counts that divide by the size and that do not, smaller than it. */
static void reducescatters(void) {
  static const size_t counts[] = {1, 7, 1000, 300001};
  for (size_t k = 0; k < LEN(counts); k++) {
    reducescatter_both(HVD_FLOAT32, HVD_SUM, counts[k]);
    reducescatter_both(HVD_INT32, HVD_SUM, counts[k]);
  }
  reducescatter_both(HVD_FLOAT32, HVD_AVERAGE, 4099);
  reducescatter_both(HVD_FLOAT32, HVD_MAX, (size_t)size * 1000);
}

/* The caller's stream (hvd_opts.stream), on CUDA (rt set): when hvd is called, the tensor
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

#endif /* HVD_TESTS_MPI_DEVICE_BOTH_H */
