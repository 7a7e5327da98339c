/*
 * test_cuda_loader.c -- libcudart and libnccl opened at run time
 * (src/gpu/cuda/cudart.c, src/gpu/nccl/nccl_lib.c, src/gpu/cuda/dl.c).
 *
 * Runs on machines without a GPU: the toolkit's libcudart loads there but
 * finds no device, and hvd must say "no CUDA device" with the runtime's
 * reason, not crash.  With HVD_TEST_EXPECT_GPU=1 (scripts/gpu-check.sh on
 * the GPU machine) a device must be found, and device memory must be told
 * from host memory.  A build without CUDA skips (exit 77) saying so.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#ifndef HVD_WITH_CUDA
int main(void) {
  printf("SKIPPED: this build has no CUDA (HVD_WITH_CUDA is off)\n");
  return 77;
}
#else
#include "gpu/cuda/copier_cuda.h"
#include "gpu/cuda/cudart.h"

static int expect_gpu(void) {
  const char *v = getenv("HVD_TEST_EXPECT_GPU");
  return v != NULL && strcmp(v, "1") == 0;
}

static void assert_starts(const char *s, const char *prefix) {
  if (strncmp(s, prefix, strlen(prefix)) != 0) fail_msg("'%s' does not start with '%s'", s, prefix);
}

/* The default search finds the toolkit's runtime; then a device, or a
 * clean "no CUDA device" that names the library and the runtime's error. */
static void test_default_load_and_device_count(void **state) {
  (void)state;
  const hvd__cudart *rt, *again;
  assert_int_equal(hvd__cudart_get(&rt), 0);
  assert_int_equal(hvd__cudart_get(&again), 0);
  assert_ptr_equal(rt, again); /* loaded once */
  int version = 0;
  assert_int_equal(rt->RuntimeGetVersion(&version), cudaSuccess);
  assert_int_equal(version / 1000, HVD_CUDART_MAJOR);
  int n = hvd__cudart_device_count(rt);
  if (expect_gpu()) {
    if (n <= 0) fail_msg("HVD_TEST_EXPECT_GPU=1 but: %s", hvd_last_error());
    printf("found %d CUDA device(s) through %s\n", n, rt->h.path);
    return;
  }
  if (n > 0) return; /* a GPU after all: test_device_pointers checks it */
  assert_int_equal(n, HVD_E_UNSUPPORTED);
  char want[512];
  snprintf(want, sizeof want, "no CUDA device (cudaGetDeviceCount from %s: cuda", rt->h.path);
  assert_starts(hvd_last_error(), want);
  printf("as expected here: %s\n", hvd_last_error());
}

/* A copier (what the staging pipeline uses) on a machine without a device
 * fails with the same message; with one, it is made and torn down. */
static void test_copier_needs_a_device(void **state) {
  (void)state;
  const hvd__cudart *rt;
  assert_int_equal(hvd__cudart_get(&rt), 0);
  int n = hvd__cudart_device_count(rt);
  hvd__copier c = {0};
  int rc = hvd__copier_cuda_create(&c, 0);
  if (n > 0) {
    assert_int_equal(rc, 0);
    assert_int_equal(hvd__copier_cuda_create(&(hvd__copier){0}, n), HVD_E_INVALID);
    char want[64];
    snprintf(want, sizeof want, "CUDA device %d does not exist (%d devices)", n, n);
    assert_string_equal(hvd_last_error(), want);
    hvd__copier_cuda_destroy(&c);
    return;
  }
  assert_int_equal(rc, HVD_E_UNSUPPORTED);
  assert_starts(hvd_last_error(), "no CUDA device (cudaGetDeviceCount from ");
  assert_null(c.ctx);
}

/* With a device: cudaMalloc'd memory is device memory, malloc'd and
 * cudaHostAlloc'd memory are not. */
static void test_device_pointers(void **state) {
  (void)state;
  const hvd__cudart *rt;
  assert_int_equal(hvd__cudart_get(&rt), 0);
  if (hvd__cudart_device_count(rt) <= 0) skip();
  void *dev = NULL, *pinned = NULL, *host = malloc(64);
  assert_int_equal(rt->Malloc(&dev, 64), cudaSuccess);
  assert_int_equal(rt->HostAlloc(&pinned, 64, cudaHostAllocDefault), cudaSuccess);
  assert_int_equal(hvd__cudart_is_device_ptr(rt, dev), 1);
  assert_int_equal(hvd__cudart_is_device_ptr(rt, pinned), 0);
  assert_int_equal(hvd__cudart_is_device_ptr(rt, host), 0);
  rt->FreeHost(pinned);
  rt->Free(dev);
  free(host);
}

/* A path that does not exist: the missing-library message, with the
 * loader's own reason; the table stays empty. */
static void test_missing_library(void **state) {
  (void)state;
  hvd__cudart rt;
  assert_int_equal(hvd__cudart_load(&rt, "/nonexistent/libcudart.so.13"), HVD_E_UNSUPPORTED);
  char want[256];
  snprintf(want, sizeof want, "the CUDA runtime libcudart.so.%d not found "
           "(/nonexistent/libcudart.so.13: cannot open shared object file: No such file or "
           "directory)", HVD_CUDART_MAJOR);
  assert_string_equal(hvd_last_error(), want);
  assert_null(rt.h.lib);
  assert_null(rt.GetDeviceCount);
  hvd__cudart_unload(&rt); /* harmless on an empty table */
}

/* A library that loads but is not libcudart: the first missing function
 * is named, and nothing stays loaded. */
static void test_library_without_the_symbols(void **state) {
  (void)state;
  hvd__cudart rt;
  assert_int_equal(hvd__cudart_load(&rt, "libm.so.6"), HVD_E_UNSUPPORTED);
  char want[256];
  snprintf(want, sizeof want, "libm.so.6 lacks cudaGetErrorString (not the CUDA runtime "
           "libcudart.so.%d, or older than hvd needs)", HVD_CUDART_MAJOR);
  assert_string_equal(hvd_last_error(), want);
  assert_null(rt.h.lib);
}

#ifdef HVD_WITH_NCCL
#include "gpu/nccl/nccl_lib.h"

/* NCCL loads and reports a version of the major hvd was built against;
 * a wrong path is the missing-library message. */
static void test_nccl(void **state) {
  (void)state;
  const hvd__nccl *nc;
  assert_int_equal(hvd__nccl_get(&nc), 0);
  int v = hvd__nccl_version(nc);
  assert_true(v > 0);
  assert_int_equal(v / 10000, NCCL_MAJOR);
  printf("NCCL %d.%d.%d through %s\n", v / 10000, v / 100 % 100, v % 100, nc->h.path);
  hvd__nccl bad;
  assert_int_equal(hvd__nccl_load(&bad, "/nonexistent/libnccl.so.2"), HVD_E_UNSUPPORTED);
  assert_string_equal(hvd_last_error(),
                      "NCCL libnccl.so.2 not found (/nonexistent/libnccl.so.2: cannot open "
                      "shared object file: No such file or directory)");
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_load_and_device_count),
      cmocka_unit_test(test_copier_needs_a_device),
      cmocka_unit_test(test_device_pointers),
      cmocka_unit_test(test_missing_library),
      cmocka_unit_test(test_library_without_the_symbols),
#ifdef HVD_WITH_NCCL
      cmocka_unit_test(test_nccl),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
