/*
 * allreduce_demo.c -- what `hvd.init(); hvd.allreduce(...)` looks like in C.
 *
 *   hvdrun -np 4 ./allreduce_demo
 *
 * Every rank makes a "gradient" filled with its rank + 1, averages it with
 * the others, and checks the answer; then rank 0 broadcasts "weights" and
 * everyone gathers one number from each rank.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime with plain -std=c11 */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hvd.h>

#define COUNT (1u << 20)

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc) {
  fprintf(stderr, "%s failed: %s (%s)\n", what, hvd_last_error(), hvd_err_name(rc));
  hvd_shutdown();
  return 1;
}

int main(void) {
  int rc = hvd_init();
  if (rc < 0) return fail("hvd_init", rc);
  int rank = hvd_rank(), size = hvd_size();
  printf("rank %d of %d (local rank %d of %d) is up\n", rank, size, hvd_local_rank(),
         hvd_local_size());

  float *grad = malloc(COUNT * sizeof *grad);
  if (!grad) return fail("malloc", HVD_E_NOMEM);
  for (size_t i = 0; i < COUNT; i++) grad[i] = (float)(rank + 1);

  double t0 = seconds();
  rc = hvd_allreduce(grad, grad, COUNT, HVD_FLOAT32, HVD_AVERAGE, "grad");
  double dt = seconds() - t0;
  if (rc < 0) return fail("hvd_allreduce", rc);
  float want = (float)(size + 1) / 2.0f;
  size_t wrong = 0;
  for (size_t i = 0; i < COUNT; i++) wrong += grad[i] != want;
  printf("rank %d: averaged %u floats in %.2f ms: every element is %.2f (expected %.2f, "
         "%zu wrong)\n", rank, COUNT, dt * 1e3, (double)grad[0], (double)want, wrong);

  float weights[4] = {0};
  if (rank == 0)
    for (int i = 0; i < 4; i++) weights[i] = 0.5f * (float)(i + 1);
  rc = hvd_broadcast(weights, 4, HVD_FLOAT32, 0, "weights");
  if (rc < 0) return fail("hvd_broadcast", rc);
  printf("rank %d: weights from rank 0: %.1f %.1f %.1f %.1f\n", rank, (double)weights[0],
         (double)weights[1], (double)weights[2], (double)weights[3]);

  int mine = rank * rank;
  int *all = NULL;
  rc = hvd_allgather(&mine, 1, HVD_INT32, (void **)&all, NULL, "squares");
  if (rc < 0) return fail("hvd_allgather", rc);
  if (rank == 0) {
    printf("rank 0: gathered rank^2 from every rank:");
    for (int i = 0; i < size; i++) printf(" %d", all[i]);
    printf("\n");
  }
  free(all);
  free(grad);
  hvd_shutdown();
  return wrong ? 1 : 0;
}
