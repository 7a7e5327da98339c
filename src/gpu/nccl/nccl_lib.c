/*
 * nccl_lib.c -- libnccl loaded at run time (nccl_lib.h says why).
 */
#include "gpu/nccl/nccl_lib.h"

#include "common.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define NCCL_SONAME "libnccl.so." STR(NCCL_MAJOR)

static const hvd__dl_sym syms[] = {
#define SYM(field, name, type) HVD__DL_SYM(hvd__nccl, field, name),
    HVD__NCCL_FN(SYM)
#undef SYM
};
static const char *const defaults[] = {NCCL_SONAME, HVD_CUDA_LIBDIR "/" NCCL_SONAME};
static const hvd__dl_library nccl = {"NCCL " NCCL_SONAME, defaults, HVD__ARRAY_LEN(defaults),
                                     syms, HVD__ARRAY_LEN(syms), sizeof(hvd__nccl)};

int hvd__nccl_load(hvd__nccl *nc, const char *path) { return hvd__dl_load(&nccl, nc, path); }

void hvd__nccl_unload(hvd__nccl *nc) { hvd__dl_unload(&nccl, nc); }

int hvd__nccl_get(const hvd__nccl **nc) {
  static hvd__dl_once once = HVD__DL_ONCE_INIT;
  static hvd__nccl process_nc;
  HVD__CHECK(hvd__dl_once_load(&once, &nccl, &process_nc));
  *nc = &process_nc;
  return 0;
}

int hvd__nccl_version(const hvd__nccl *nc) {
  int v = 0;
  HVD__CHECK(hvd__nccl_check(nc, nc->GetVersion(&v), "ncclGetVersion"));
  return v;
}

int hvd__nccl_check(const hvd__nccl *nc, ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return 0;
  return hvd__err(HVD_E_SYSTEM, "%s: %s", what, nc->GetErrorString(r));
}
