/*
 * fake_cudart.c -- a CPU stand-in for libcudart, built as
 * libcudart.so.<major> into a folder of its own: a test run with that
 * folder on LD_LIBRARY_PATH has hvd's run-time loader (src/gpu/cuda/
 * cudart.c) open it instead of CUDA's, so the engine's device paths run
 * on a machine without a GPU.  Only what hvd's table resolves.
 *
 * "Device memory" is host memory; every copy is done at once (a stream
 * is then always idle, an event always complete).  FAKE_CUDA_DEVICES
 * sets the number of devices (default 1).
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local int current; /* the calling thread's device, as CUDA keeps it */

static int devices(void) {
  const char *v = getenv("FAKE_CUDA_DEVICES");
  return v ? atoi(v) : 1;
}

const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "fake CUDA error";
}

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    default: return "cudaErrorUnknown";
  }
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = devices();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = current;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= devices()) return cudaErrorInvalidDevice;
  current = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  (void)attr;
  if (device < 0 || device >= devices()) return cudaErrorInvalidDevice;
  *value = 0;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr) {
  memset(a, 0, sizeof *a);
  a->type = cudaMemoryTypeUnregistered;
  a->hostPointer = (void *)ptr;
  return cudaSuccess;
}

static cudaError_t alloc(void **p, size_t size) {
  *p = malloc(size ? size : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaMalloc(void **p, size_t size) { return alloc(p, size); }

cudaError_t cudaFree(void *p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
  (void)flags;
  return alloc(p, size);
}

cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  (void)kind;
  if (count && (!dst || !src)) return cudaErrorInvalidValue;
  memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  (void)stream;
  return cudaMemcpy(dst, src, count, kind);
}

/* Streams and events are tokens: the work is always done. */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  (void)flags;
  *s = malloc(1);
  return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) { return cudaFree(s); }

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  (void)s, (void)flags;
  return e ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  (void)flags;
  *e = malloc(1);
  return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) { return cudaFree(e); }

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  (void)s;
  return e ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaEventQuery(cudaEvent_t e) { return e ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return cudaEventQuery(e); }
