/*
 * engine_timeline.c -- a small workload for tests/launcher/test_timeline.py.
 *
 *   HOROVOD_TIMELINE=PATH hvdrun -np N engine_timeline [steps]
 *
 * Every step enqueues, in one burst, 50 small allreduces ("tl.small.0" ..
 * "tl.small.49": ready together, so the engine fuses them), a broadcast
 * ("tl.bcast") and an allgather ("tl.gather"), then waits for all and
 * checks the values.  Rank 0 writes the timeline; the launcher test reads
 * it after the job ends.  Prints "rank R: OK" when every result was right.
 */
#include <stdio.h>
#include <stdlib.h>

#include <hvd.h>

#include "testing.h"

#define SMALL 50

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 5;
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank(), size = hvd_size(), bad = 0;
  static float small[SMALL][16 + SMALL]; /* tensor k has 16 + k elements */
  static float input[SMALL][16 + SMALL]; /* odd k reduce out of place, from here */
  for (int step = 0; step < steps && bad == 0; step++) {
    hvd_handle h[SMALL + 2];
    for (int k = 0; k < SMALL; k++) {
      char name[32];
      snprintf(name, sizeof name, "tl.small.%d", k);
      float *in = k % 2 ? input[k] : small[k];
      for (int i = 0; i < 16 + k; i++) in[i] = (float)(rank + k);
      h[k] = hvd_allreduce_async(in, small[k], 16 + (size_t)k, HVD_FLOAT32, HVD_SUM, name);
    }
    int32_t b[8] = {rank, rank, rank, rank, rank, rank, rank, rank}, g = rank;
    int32_t *gathered = NULL;
    h[SMALL] = hvd_broadcast_async(b, 8, HVD_INT32, size - 1, "tl.bcast");
    h[SMALL + 1] = hvd_allgather_async(&g, 1, HVD_INT32, (void **)&gathered, NULL, "tl.gather",
                                       NULL);
    for (int k = 0; k < SMALL + 2; k++) {
      int rc = h[k] < 0 ? (int)h[k] : hvd_wait(h[k]);
      if (rc != 0) {
        fprintf(stderr, "rank %d: step %d op %d: %s: %s\n", rank, step, k, hvd_err_name(rc),
                hvd_last_error());
        bad++;
      }
    }
    for (int k = 0; k < SMALL && bad == 0; k++)
      bad += small[k][0] != (float)(size * k + size * (size - 1) / 2);
    for (int i = 0; i < 8 && bad == 0; i++) bad += b[i] != size - 1;
    for (int q = 0; q < size && bad == 0; q++) bad += gathered[q] != q;
    free(gathered);
  }
  int rc = hvd_shutdown();
  printf("rank %d: %s\n", rank, bad == 0 && rc == 0 ? "OK" : "WRONG RESULTS");
  return bad != 0 || rc != 0;
}
