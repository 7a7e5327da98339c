/*
 * test_gpu_staging.c -- the staging pipeline (src/gpu/staging.c) with
 * real CUDA copies (src/gpu/cuda/copier_cuda.c): device buffers made with
 * cudaMalloc, staged through cudaHostAlloc'd slots by cudaMemcpyAsync on
 * the copier's stream, the chunks transformed on the host, and the device
 * result compared byte for byte with the one computed here
 * (staging_ref.h).  Needs a GPU: without one (or in a build without CUDA)
 * it says why and exits 77, which ctest reports as skipped;
 * scripts/gpu-check.sh runs it on the GPU machine with
 * HVD_TEST_EXPECT_GPU=1, where a missing device is a failure.
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
#include "gpu/staging.h"
#include "gpu_required.h"
#include "staging_ref.h"

static const hvd__cudart *rt;

typedef struct {
  size_t next_offset, calls;
} progress;

static int transform(void *arg, void *host, size_t offset, size_t bytes) {
  progress *p = arg;
  if (offset != p->next_offset)
    return hvd__err(HVD_E_INVALID, "chunk at %zu, expected %zu", offset, p->next_offset);
  staging_ref_apply(host, offset, bytes);
  p->next_offset += bytes;
  p->calls++;
  return 0;
}

/* n bytes through a pipeline of slots x chunk, in place or not. */
static void staged_case(hvd__copier *cp, size_t n, size_t chunk, int slots, int in_place) {
  unsigned char *in = malloc(n + 1), *want = malloc(n + 1), *got = malloc(n + 1);
  staging_ref_fill(in, want, n, (unsigned)(n + chunk));
  void *src = NULL, *dst = NULL;
  assert_int_equal(rt->Malloc(&src, n + 1), cudaSuccess);
  if (in_place)
    dst = src;
  else
    assert_int_equal(rt->Malloc(&dst, n + 1), cudaSuccess);
  assert_int_equal(rt->Memcpy(src, in, n, cudaMemcpyHostToDevice), cudaSuccess);
  hvd__staging *s;
  assert_int_equal(hvd__staging_create(&s, cp, chunk, slots), 0);
  progress p = {0, 0};
  uint64_t t0 = hvd__now_ms();
  int rc = hvd__staging_run(s, dst, src, n, 4, transform, &p, hvd__deadline_in(60000));
  if (rc != 0) fail_msg("%zu bytes, chunk %zu, %d slots: %s", n, chunk, slots, hvd_last_error());
  if (n >= (32u << 20))
    printf("staged %zu MiB in chunks of %zu KiB, %d slots: %llu ms (not a benchmark)\n",
           n >> 20, chunk >> 10, slots, (unsigned long long)(hvd__now_ms() - t0));
  assert_int_equal(p.next_offset, n);
  assert_int_equal(rt->Memcpy(got, dst, n, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(got, want, n);
  hvd__staging_destroy(s);
  if (!in_place) rt->Free(dst);
  rt->Free(src);
  free(in);
  free(want);
  free(got);
}

static void test_staged_on_the_device(void **state) {
  (void)state;
  hvd__copier cp;
  assert_int_equal(hvd__copier_cuda_create(&cp, 0), 0);
  const size_t sizes[] = {0, 12, (1u << 20) + 12, 32u << 20};
  const size_t chunks[] = {4u << 10, 1u << 20, 8u << 20};
  const int slots[] = {1, 3};
  int k = 0;
  for (size_t a = 0; a < HVD__ARRAY_LEN(sizes); a++)
    for (size_t b = 0; b < HVD__ARRAY_LEN(chunks); b++)
      for (size_t c = 0; c < HVD__ARRAY_LEN(slots); c++)
        staged_case(&cp, sizes[a], chunks[b], slots[c], k++ % 2);
  hvd__copier_cuda_destroy(&cp);
}

int main(void) {
  gpu_required(hvd__cudart_get(&rt));
  gpu_required(hvd__cudart_device_count(rt));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_staged_on_the_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
