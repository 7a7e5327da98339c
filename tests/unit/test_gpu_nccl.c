/*
 * test_gpu_nccl.c -- NCCL through the run-time loaded table
 * (src/gpu/nccl/nccl_lib.c) on a real GPU: a communicator of one rank,
 * then allreduce, allgather, broadcast and reduce-scatter of device
 * buffers on a stream, each checked against the result computed here (one
 * rank: the sum is the input, the gather is the input).  NCCL refuses two
 * ranks on one GPU, so np 2+ waits for a machine with more GPUs.  Without
 * a device (or without NCCL in the build) it says why and exits 77;
 * scripts/gpu-check.sh runs it with HVD_TEST_EXPECT_GPU=1.
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

#if !defined(HVD_WITH_CUDA) || !defined(HVD_WITH_NCCL)
int main(void) {
  printf("SKIPPED: this build has no NCCL (HVD_WITH_NCCL is off)\n");
  return 77;
}
#else
#include "gpu/cuda/cudart.h"
#include "gpu/nccl/nccl_lib.h"
#include "gpu_required.h"

static const hvd__cudart *rt;
static const hvd__nccl *nc;

#define CUDA_OK(expr) assert_int_equal(hvd__cudart_check(rt, (expr), #expr), 0)
#define NCCL_OK(expr)                                                      \
  do {                                                                     \
    if (hvd__nccl_check(nc, (expr), #expr) != 0) fail_msg("%s", hvd_last_error()); \
  } while (0)

static void test_one_rank_collectives(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  float *host = malloc(N * sizeof *host), *got = malloc(N * sizeof *got);
  for (int i = 0; i < N; i++) host[i] = (float)(i % 1000) - 250.0f;
  CUDA_OK(rt->SetDevice(0));
  cudaStream_t stream;
  CUDA_OK(rt->StreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *in, *out;
  CUDA_OK(rt->Malloc(&in, N * sizeof(float)));
  CUDA_OK(rt->Malloc(&out, N * sizeof(float)));
  CUDA_OK(rt->Memcpy(in, host, N * sizeof(float), cudaMemcpyHostToDevice));
  ncclUniqueId id;
  ncclComm_t comm;
  NCCL_OK(nc->GetUniqueId(&id));
  NCCL_OK(nc->CommInitRank(&comm, 1, id, 0));
  const char *what[] = {"allreduce", "allgather", "broadcast", "reducescatter"};
  for (int op = 0; op < 4; op++) {
    memset(got, 0xff, N * sizeof *got); /* no result left from the last one */
    CUDA_OK(rt->Memcpy(out, got, N * sizeof(float), cudaMemcpyHostToDevice));
    ncclResult_t r = op == 0   ? nc->AllReduce(in, out, N, ncclFloat32, ncclSum, comm, stream)
                     : op == 1 ? nc->AllGather(in, out, N, ncclFloat32, comm, stream)
                     : op == 2 ? nc->Broadcast(in, out, N, ncclFloat32, 0, comm, stream)
                               : nc->ReduceScatter(in, out, N, ncclFloat32, ncclSum, comm, stream);
    NCCL_OK(r);
    CUDA_OK(rt->StreamSynchronize(stream));
    CUDA_OK(rt->Memcpy(got, out, N * sizeof(float), cudaMemcpyDeviceToHost));
    if (memcmp(got, host, N * sizeof *got) != 0) fail_msg("NCCL %s: wrong result", what[op]);
  }
  NCCL_OK(nc->CommDestroy(comm));
  rt->Free(out);
  rt->Free(in);
  rt->StreamDestroy(stream);
  free(host);
  free(got);
}

int main(void) {
  gpu_required(hvd__cudart_get(&rt));
  gpu_required(hvd__cudart_device_count(rt));
  gpu_required(hvd__nccl_get(&nc));
  printf("NCCL %d through %s\n", hvd__nccl_version(nc), nc->h.path);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_rank_collectives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
