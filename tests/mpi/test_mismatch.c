/*
 * test_mismatch.c -- ranks that disagree on a collective get an error on
 * every rank, naming the tensor, instead of wrong data or a hang; the
 * broken communicator then refuses further work with HVD_E_ABORTED.
 *
 * Rank 0 passes 10 elements where the others pass 12.  (The engine will
 * catch this before any data moves; here the transport catches it at the
 * first frame whose size differs.)
 */
#include <stdio.h>
#include <string.h>

#include <hvd.h>

int main(void) {
  if (hvd_init() != 0) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  int rank = hvd_rank();
  float buf[12] = {0};
  int rc = hvd_allreduce(buf, buf, rank == 0 ? 10 : 12, HVD_FLOAT32, HVD_SUM, "mismatched");
  const char *msg = hvd_last_error();
  int ok = rc < 0 && strstr(msg, "'mismatched'") != NULL;
  printf("rank %d: first call: %s: %s\n", rank, hvd_err_name(rc), msg);
  rc = hvd_allreduce(buf, buf, 1, HVD_FLOAT32, HVD_SUM, "after");
  ok = ok && rc == HVD_E_ABORTED;
  printf("rank %d: next call: %s: %s\n", rank, hvd_err_name(rc), hvd_last_error());
  hvd_shutdown();
  printf("rank %d: %s\n", rank, ok ? "mismatch detected OK" : "MISMATCH NOT DETECTED");
  return ok ? 0 : 1;
}
