/*
 * cudart.h -- the CUDA runtime functions hvd calls, loaded at run time.
 *
 * libhvd does not link libcudart: the first GPU operation opens
 * libcudart.so.<major hvd was built against> (the copy a framework such
 * as PyTorch already loaded is found by its soname), resolves the table
 * below, and a machine without the library, or without a device, gets an
 * HVD_E_UNSUPPORTED error that says which.  Types come from the toolkit's
 * own header, so a signature that drifts fails to compile.
 */
#ifndef HVD_GPU_CUDART_H
#define HVD_GPU_CUDART_H

#include <cuda_runtime_api.h>

#include "gpu/cuda/dl.h"

#define HVD__CUDART_FN(X)                                       \
  X(GetErrorString, "cudaGetErrorString", cudaGetErrorString)   \
  X(GetErrorName, "cudaGetErrorName", cudaGetErrorName)         \
  X(RuntimeGetVersion, "cudaRuntimeGetVersion", cudaRuntimeGetVersion) \
  X(GetDeviceCount, "cudaGetDeviceCount", cudaGetDeviceCount)   \
  X(GetDevice, "cudaGetDevice", cudaGetDevice)                  \
  X(SetDevice, "cudaSetDevice", cudaSetDevice)                  \
  X(DeviceGetAttribute, "cudaDeviceGetAttribute", cudaDeviceGetAttribute) \
  X(PointerGetAttributes, "cudaPointerGetAttributes", cudaPointerGetAttributes) \
  X(Malloc, "cudaMalloc", cudaMalloc)                           \
  X(Free, "cudaFree", cudaFree)                                 \
  X(HostAlloc, "cudaHostAlloc", cudaHostAlloc)                  \
  X(FreeHost, "cudaFreeHost", cudaFreeHost)                     \
  X(Memcpy, "cudaMemcpy", cudaMemcpy)                           \
  X(MemcpyAsync, "cudaMemcpyAsync", cudaMemcpyAsync)            \
  X(StreamCreateWithFlags, "cudaStreamCreateWithFlags", cudaStreamCreateWithFlags) \
  X(StreamDestroy, "cudaStreamDestroy", cudaStreamDestroy)      \
  X(StreamSynchronize, "cudaStreamSynchronize", cudaStreamSynchronize) \
  X(StreamWaitEvent, "cudaStreamWaitEvent", cudaStreamWaitEvent) \
  X(EventCreateWithFlags, "cudaEventCreateWithFlags", cudaEventCreateWithFlags) \
  X(EventDestroy, "cudaEventDestroy", cudaEventDestroy)         \
  X(EventRecord, "cudaEventRecord", cudaEventRecord)            \
  X(EventQuery, "cudaEventQuery", cudaEventQuery)               \
  X(EventSynchronize, "cudaEventSynchronize", cudaEventSynchronize)

typedef struct hvd__cudart {
  hvd__dl_handle h; /* h.path: the name that loaded */
#define HVD__CUDART_FIELD(field, name, decl) __typeof__(decl) *field;
  HVD__CUDART_FN(HVD__CUDART_FIELD)
#undef HVD__CUDART_FIELD
} hvd__cudart;

/* Loads libcudart from path, or NULL for the default search
 * (libcudart.so.<major>, then the toolkit's lib64 that CMake found).
 * Missing library or symbol: HVD_E_UNSUPPORTED naming it; *rt is then
 * empty and unloading it is a no-op. */
int hvd__cudart_load(hvd__cudart *rt, const char *path);
void hvd__cudart_unload(hvd__cudart *rt);

/* The process's runtime: loaded once by the default search, kept until
 * exit (a framework may share it).  Thread-safe. */
int hvd__cudart_get(const hvd__cudart **rt);

/* Number of CUDA devices (> 0), or HVD_E_UNSUPPORTED "no CUDA device"
 * with the runtime's reason (no driver, no device, ...). */
int hvd__cudart_device_count(const hvd__cudart *rt);

/* Turns a failed call into HVD_E_SYSTEM "<what>: <error name>: <text>";
 * cudaSuccess is 0. */
int hvd__cudart_check(const hvd__cudart *rt, cudaError_t e, const char *what);

/* 1 when ptr is device memory (or managed memory), 0 when it is host
 * memory (pageable or pinned), HVD_E_* on failure. */
int hvd__cudart_is_device_ptr(const hvd__cudart *rt, const void *ptr);

#endif /* HVD_GPU_CUDART_H */
