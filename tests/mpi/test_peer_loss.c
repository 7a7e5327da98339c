/*
 * test_peer_loss.c -- a rank that dies or freezes mid-allreduce becomes an
 * error on every other rank, naming it, within the deadline.
 *
 *   test_peer_loss kill   the last rank SIGKILLs itself during the 4th call
 *   test_peer_loss stop   the last rank SIGSTOPs itself (alive but silent)
 *
 * Survivors print "rank R: lost rank V detected: <message>" and exit with
 * 0 (kill: hvdrun reports the killed rank) or 3 (stop: somebody must exit
 * non-zero so hvdrun tears the frozen rank down).  The victim's signal is
 * raised from a second thread while the main thread is inside the
 * collective, so the loss really happens mid-allreduce.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

#define COUNT (4u << 20) /* 16 MiB of floats: long enough to be caught mid-flight */

int main(int argc, char **argv) {
  int stop = argc > 1 && strcmp(argv[1], "stop") == 0;
  int victim_signal = stop ? SIGSTOP : SIGKILL;
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank(), size = hvd_size(), victim = size - 1;
  float *buf = calloc(COUNT, sizeof *buf);
  char want[32];
  snprintf(want, sizeof want, "rank %d", victim);
  for (int it = 0; it < 1000; it++) {
    if (rank == victim && it == 3) raise_later(victim_signal, 20);
    int rc = hvd_allreduce(buf, buf, COUNT, HVD_FLOAT32, HVD_SUM, "grad");
    if (rc == 0) continue;
    const char *msg = hvd_last_error();
    int named = strstr(msg, want) != NULL && strstr(msg, "'grad'") != NULL;
    printf("rank %d: %s rank %d detected (%s): %s\n", rank, named ? "lost" : "UNNAMED LOSS OF",
           victim, hvd_err_name(rc), msg);
    fflush(stdout);
    hvd_shutdown();
    return !named ? 1 : stop ? 3 : 0;
  }
  printf("rank %d: no error after 1000 iterations\n", rank);
  return 1;
}
