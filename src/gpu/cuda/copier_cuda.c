/*
 * copier_cuda.c -- copies between a CUDA device and pinned host memory
 * for the staging pipeline (copier_cuda.h).
 */
#include "gpu/cuda/copier_cuda.h"

#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "gpu/cuda/cudart.h"

typedef struct {
  const hvd__cudart *rt;
  int device;
  cudaStream_t stream;
} cuda_ctx;

/* hvd__copy_event is opaque to the pipeline: here it is a cudaEvent_t. */
static cudaEvent_t ev_of(hvd__copy_event *ev) { return (cudaEvent_t)(void *)ev; }

static int alloc_pinned(void *ctx, size_t bytes, void **out) {
  cuda_ctx *c = ctx;
  return hvd__cudart_check(c->rt, c->rt->HostAlloc(out, bytes ? bytes : 1, cudaHostAllocDefault),
                           "cudaHostAlloc");
}

static void free_pinned(void *ctx, void *p) {
  cuda_ctx *c = ctx;
  c->rt->FreeHost(p);
}

static int copy_d2h_async(void *ctx, void *host, const void *dev, size_t bytes) {
  cuda_ctx *c = ctx;
  return hvd__cudart_check(
      c->rt, c->rt->MemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->stream),
      "cudaMemcpyAsync (device to host)");
}

static int copy_h2d_async(void *ctx, void *dev, const void *host, size_t bytes) {
  cuda_ctx *c = ctx;
  return hvd__cudart_check(
      c->rt, c->rt->MemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->stream),
      "cudaMemcpyAsync (host to device)");
}

static int event_create(void *ctx, hvd__copy_event **out) {
  cuda_ctx *c = ctx;
  cudaEvent_t ev;
  HVD__CHECK(hvd__cudart_check(c->rt, c->rt->EventCreateWithFlags(&ev, cudaEventDisableTiming),
                               "cudaEventCreateWithFlags"));
  *out = (hvd__copy_event *)(void *)ev;
  return 0;
}

static void event_destroy(void *ctx, hvd__copy_event *ev) {
  cuda_ctx *c = ctx;
  c->rt->EventDestroy(ev_of(ev));
}

static int event_record(void *ctx, hvd__copy_event *ev) {
  cuda_ctx *c = ctx;
  return hvd__cudart_check(c->rt, c->rt->EventRecord(ev_of(ev), c->stream), "cudaEventRecord");
}

static int event_query(void *ctx, hvd__copy_event *ev) {
  cuda_ctx *c = ctx;
  cudaError_t e = c->rt->EventQuery(ev_of(ev));
  if (e == cudaErrorNotReady) return 0;
  HVD__CHECK(hvd__cudart_check(c->rt, e, "cudaEventQuery"));
  return 1;
}

static int event_wait(void *ctx, hvd__copy_event *ev, uint64_t deadline) {
  /* A chunk's copy takes microseconds to milliseconds: spin a little, then
   * sleep in growing steps of at most a millisecond. */
  long nap_ns = 0;
  for (int spins = 0;; spins++) {
    int done = event_query(ctx, ev);
    if (done != 0) return done < 0 ? done : 0;
    if (hvd__now_ms() >= deadline)
      return hvd__err(HVD_E_TIMEOUT, "a device copy did not complete before the deadline");
    if (spins < 64) continue;
    nap_ns = nap_ns ? (nap_ns * 2 > 1000000 ? 1000000 : nap_ns * 2) : 1000;
    struct timespec ts = {0, nap_ns};
    nanosleep(&ts, NULL);
  }
}

/* cudaMalloc allocates on the calling thread's current device, and the
 * engine's cycle runs on whichever thread drives it: set it each time. */
static int alloc_device(void *ctx, size_t bytes, void **out) {
  cuda_ctx *c = ctx;
  HVD__CHECK(hvd__cudart_check(c->rt, c->rt->SetDevice(c->device), "cudaSetDevice"));
  return hvd__cudart_check(c->rt, c->rt->Malloc(out, bytes ? bytes : 1), "cudaMalloc");
}

static void free_device(void *ctx, void *p) {
  cuda_ctx *c = ctx;
  c->rt->Free(p);
}

static int copy_d2d_async(void *ctx, void *dst, const void *src, size_t bytes) {
  cuda_ctx *c = ctx;
  return hvd__cudart_check(
      c->rt, c->rt->MemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream),
      "cudaMemcpyAsync (device to device)");
}

static int wait_ready(void *ctx, void *ready) {
  cuda_ctx *c = ctx;
  return hvd__cudart_check(c->rt, c->rt->StreamWaitEvent(c->stream, (cudaEvent_t)ready, 0),
                           "cudaStreamWaitEvent (the caller's stream)");
}

static const hvd__copier_ops cuda_ops = {
    alloc_pinned, free_pinned, copy_d2h_async, copy_h2d_async, event_create,   event_destroy,
    event_record, event_query, event_wait,     alloc_device,   free_device,    copy_d2d_async,
    wait_ready};

/* Events belong to the device current when they are made: make this one
 * on `device` and give the caller's thread its own device back. */
static int record_ready(const hvd__cudart *rt, int device, void *stream, cudaEvent_t *ev) {
  HVD__CHECK(hvd__cudart_check(rt, rt->SetDevice(device), "cudaSetDevice"));
  HVD__CHECK(hvd__cudart_check(rt, rt->EventCreateWithFlags(ev, cudaEventDisableTiming),
                               "cudaEventCreateWithFlags"));
  int rc = hvd__cudart_check(rt, rt->EventRecord(*ev, (cudaStream_t)stream), "cudaEventRecord");
  if (rc < 0) rt->EventDestroy(*ev);
  return rc;
}

int hvd__cuda_ready_event(int device, void *stream, void **out) {
  const hvd__cudart *rt;
  int was;
  *out = NULL;
  HVD__CHECK(hvd__cudart_get(&rt));
  HVD__CHECK(hvd__cudart_check(rt, rt->GetDevice(&was), "cudaGetDevice"));
  cudaEvent_t ev;
  int rc = record_ready(rt, device, stream, &ev);
  if (was != device) rt->SetDevice(was);
  if (rc < 0)
    return hvd__err_prefix(rc, "marking the end of stream %p's work on CUDA device %d", stream,
                           device);
  *out = (void *)ev;
  return 0;
}

void hvd__cuda_ready_event_free(void *ev) {
  const hvd__cudart *rt;
  if (ev && hvd__cudart_get(&rt) == 0) rt->EventDestroy((cudaEvent_t)ev);
}

int hvd__copier_cuda_create(hvd__copier *out, int device) {
  const hvd__cudart *rt;
  HVD__CHECK(hvd__cudart_get(&rt));
  int count = hvd__cudart_device_count(rt);
  HVD__CHECK(count);
  if (device < 0 || device >= count)
    return hvd__err(HVD_E_INVALID, "CUDA device %d does not exist (%d devices)", device, count);
  cuda_ctx *c = calloc(1, sizeof *c);
  if (c == NULL) return hvd__err(HVD_E_NOMEM, "out of memory for a CUDA copier");
  c->rt = rt;
  c->device = device;
  int rc = hvd__cudart_check(rt, rt->SetDevice(device), "cudaSetDevice");
  if (rc == 0)
    rc = hvd__cudart_check(rt, rt->StreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags");
  if (rc < 0) {
    free(c);
    return hvd__err_prefix(rc, "CUDA device %d", device);
  }
  out->ops = &cuda_ops;
  out->ctx = c;
  return 0;
}

void hvd__copier_cuda_destroy(hvd__copier *c) {
  cuda_ctx *cc = c->ctx;
  if (cc == NULL) return;
  cc->rt->StreamDestroy(cc->stream);
  free(cc);
  c->ctx = NULL;
}
