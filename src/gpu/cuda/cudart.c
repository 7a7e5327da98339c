/*
 * cudart.c -- libcudart loaded at run time (cudart.h says why).
 */
#include "gpu/cuda/cudart.h"

#include "common.h"

#define STR2(x) #x
#define STR(x) STR2(x)
/* The runtime's ABI is fixed within a major version: only that one. */
#define CUDART_SONAME "libcudart.so." STR(HVD_CUDART_MAJOR)

static const hvd__dl_sym syms[] = {
#define SYM(field, name, decl) HVD__DL_SYM(hvd__cudart, field, name),
    HVD__CUDART_FN(SYM)
#undef SYM
};
static const char *const defaults[] = {CUDART_SONAME, HVD_CUDA_LIBDIR "/" CUDART_SONAME};
static const hvd__dl_library cudart = {"the CUDA runtime " CUDART_SONAME, defaults,
                                       HVD__ARRAY_LEN(defaults), syms, HVD__ARRAY_LEN(syms),
                                       sizeof(hvd__cudart)};

int hvd__cudart_load(hvd__cudart *rt, const char *path) { return hvd__dl_load(&cudart, rt, path); }

void hvd__cudart_unload(hvd__cudart *rt) { hvd__dl_unload(&cudart, rt); }

int hvd__cudart_get(const hvd__cudart **rt) {
  static hvd__dl_once once = HVD__DL_ONCE_INIT;
  static hvd__cudart process_rt;
  HVD__CHECK(hvd__dl_once_load(&once, &cudart, &process_rt));
  *rt = &process_rt;
  return 0;
}

int hvd__cudart_check(const hvd__cudart *rt, cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  return hvd__err(HVD_E_SYSTEM, "%s: %s: %s", what, rt->GetErrorName(e),
                  rt->GetErrorString(e));
}

int hvd__cudart_device_count(const hvd__cudart *rt) {
  int count = 0;
  cudaError_t e = rt->GetDeviceCount(&count);
  if (e != cudaSuccess)
    return hvd__err(HVD_E_UNSUPPORTED, "no CUDA device (cudaGetDeviceCount from %s: %s: %s)",
                    rt->h.path, rt->GetErrorName(e), rt->GetErrorString(e));
  if (count <= 0)
    return hvd__err(HVD_E_UNSUPPORTED, "no CUDA device (cudaGetDeviceCount from %s: 0)",
                    rt->h.path);
  return count;
}

int hvd__cudart_is_device_ptr(const hvd__cudart *rt, const void *ptr) {
  struct cudaPointerAttributes a;
  HVD__CHECK(hvd__cudart_check(rt, rt->PointerGetAttributes(&a, ptr),
                               "cudaPointerGetAttributes"));
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
