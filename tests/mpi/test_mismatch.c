/*
 * test_mismatch.c -- ranks that disagree on a collective get an error on
 * every rank, naming the tensor, the field and what each rank sent,
 * instead of wrong data or a hang; the negotiation catches it before any
 * data moves, so the next collective works.
 *
 * Rank 0 passes 10 elements where the others pass 12; then an allgather
 * whose rank 0 sends rows of 3 elements where the others send rows of 4
 * (shapes [2, 3] and [2, 4]).  From the counts it receives only some
 * rank could tell (6 elements are whole rows of 3 but not of 4), so the
 * dimensions after the first are negotiated and every rank fails alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

int main(void) {
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank();
  float buf[12] = {0};
  int rc = hvd_allreduce(buf, buf, rank == 0 ? 10 : 12, HVD_FLOAT32, HVD_SUM, "mismatched");
  const char *msg = hvd_last_error();
  int ok = rc == HVD_E_MISMATCH && strstr(msg, "'mismatched'") && strstr(msg, "count") &&
           strstr(msg, "sent 10") && strstr(msg, "sent 12");
  printf("rank %d: first call: %s: %s\n", rank, hvd_err_name(rc), msg);
  float rows[8] = {0};
  int64_t shape[2] = {2, rank == 0 ? 3 : 4};
  hvd_opts o = HVD_OPTS_INIT;
  o.shape = shape;
  o.ndims = 2;
  void *gathered = NULL;
  size_t counts[8];
  hvd_handle h = hvd_allgather_async(rows, (size_t)(2 * shape[1]), HVD_FLOAT32, &gathered,
                                     counts, "rows", &o);
  rc = h < 0 ? (int)h : hvd_wait(h);
  msg = hvd_last_error();
  ok = ok && rc == HVD_E_MISMATCH && strstr(msg, "'rows'") &&
       strstr(msg, "dimensions after the first") && strstr(msg, "rank 0 sent [*, 3]") &&
       gathered == NULL;
  printf("rank %d: allgather: %s: %s\n", rank, hvd_err_name(rc), msg);
  free(gathered);
  float one = 1;
  rc = hvd_allreduce(&one, &one, 1, HVD_FLOAT32, HVD_SUM, "after");
  ok = ok && rc == 0 && one == (float)hvd_size();
  printf("rank %d: next call: %s, sum %g\n", rank, hvd_err_name(rc), (double)one);
  hvd_shutdown();
  printf("rank %d: %s\n", rank, ok ? "mismatch detected OK" : "MISMATCH NOT DETECTED");
  return ok ? 0 : 1;
}
