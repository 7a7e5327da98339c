/*
 * device_ready.c -- a device tensor's ready event and the test copier
 * (device_ready.h).
 */
#include "device_ready.h"

#include "common.h"
#ifdef HVD_WITH_CUDA
#include "gpu/cuda/copier_cuda.h"
#include "gpu/cuda/cudart.h"
#endif

static hvd__copier test_copier;
static int test_copier_set;

void hvd__device_set_copier(const hvd__copier *c) {
  test_copier_set = c != NULL;
  if (c) test_copier = *c;
}

const hvd__copier *hvd__device_test_copier(void) { return test_copier_set ? &test_copier : NULL; }

int hvd__device_ready_new(int device, void *stream, void **ready) {
  *ready = NULL;
  if (test_copier_set) return 0;
#ifdef HVD_WITH_CUDA
  /* No CUDA or no such device: left to the copier agreement, which fails
   * the tensor on every rank saying why, where failing here would leave
   * the other ranks waiting for it. */
  const hvd__cudart *rt;
  if (hvd__cudart_get(&rt) < 0 || device >= hvd__cudart_device_count(rt)) return 0;
  return hvd__cuda_ready_event(device, stream, ready);
#else
  HVD__UNUSED(device);
  HVD__UNUSED(stream);
  return 0;
#endif
}

void hvd__device_ready_free(void *ready) {
#ifdef HVD_WITH_CUDA
  hvd__cuda_ready_event_free(ready);
#else
  HVD__UNUSED(ready);
#endif
}
