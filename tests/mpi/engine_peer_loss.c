/*
 * engine_peer_loss.c -- a rank lost while the others have many async
 * operations pending: every pending handle fails, naming the lost rank.
 * Driven by tests/launcher/test_engine_failures.py.
 *
 *   engine_peer_loss kill [count]  the last rank SIGKILLs itself
 *   engine_peer_loss stop [count]  the last rank SIGSTOPs itself (alive but
 *                                  silent: only HOROVOD_GLOO_TIMEOUT_SECONDS
 *                                  finds it)
 * count: float32 elements per tensor (default 16384, 64 KiB); large
 * tensors keep the first half's fused collective in flight when the victim
 * goes, so its loss is seen mid-collective rather than in negotiation.
 *
 * After a barrier, every survivor enqueues 100 allreduces "g.0" .. "g.99"
 * and the victim enqueues only "g.0" .. "g.49", then signals
 * itself from a second thread 100 ms later while its main thread waits.
 * So on every survivor "g.50" .. "g.99" are certainly pending when the
 * victim goes (the first half may complete or fail).  Each survivor waits
 * for all 100 handles: every one that did not complete must fail with a
 * message naming the victim ("rank V") and the tensor ('g.N') (so may its
 * enqueue, if the engine already stopped); then a
 * later call must fail with HVD_E_ABORTED.  It prints
 *   rank R: lost rank V: F failed naming it, C completed, B bad; later call HVD_E_ABORTED
 * and exits 0 (kill) or 3 (stop: someone must exit non-zero so hvdrun
 * tears the frozen victim down) when all held, 1 otherwise.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

#define N 100

int main(int argc, char **argv) {
  int stop = argc > 1 && strcmp(argv[1], "stop") == 0;
  int victim_signal = stop ? SIGSTOP : SIGKILL;
  size_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : 16384;
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank(), size = hvd_size(), victim = size - 1;
  float *buf[N];
  hvd_handle h[N];
  if (hvd_barrier() != 0) {
    fprintf(stderr, "rank %d: barrier: %s\n", rank, hvd_last_error());
    return 1;
  }
  /* A survivor slower to enqueue than the victim is to die (a sanitizer
   * build) may see the engine stop first: an enqueue that fails naming the
   * victim and the tensor counts as a handle that failed so. */
  static char enqueue_error[N][512];
  int mine = rank == victim ? N / 2 : N;
  for (int i = 0; i < mine; i++) {
    buf[i] = calloc(count, sizeof(float));
    char name[16];
    snprintf(name, sizeof name, "g.%d", i);
    h[i] = hvd_allreduce_async(buf[i], buf[i], count, HVD_FLOAT32, HVD_SUM, name);
    if (h[i] < 0 && rank == victim) {
      fprintf(stderr, "rank %d: enqueue %s: %s\n", rank, name, hvd_last_error());
      return 1;
    }
    if (h[i] < 0) snprintf(enqueue_error[i], sizeof enqueue_error[i], "%s", hvd_last_error());
  }
  if (rank == victim) {
    raise_later(victim_signal, 100);
    for (int i = 0; i < mine; i++) hvd_wait(h[i]);
    pause(); /* the signal comes */
    return 1;
  }

  char want_rank[32], first_bad[1200] = "";
  snprintf(want_rank, sizeof want_rank, "rank %d", victim);
  int failed = 0, completed = 0, bad = 0;
  double t0 = now();
  for (int i = 0; i < N; i++) {
    int rc = h[i] < 0 ? (int)h[i] : hvd_wait(h[i]);
    char want_name[16];
    snprintf(want_name, sizeof want_name, "'g.%d'", i);
    const char *msg = h[i] < 0 ? enqueue_error[i] : hvd_last_error();
    if (rc == 0 && i < N / 2) {
      completed++; /* the victim had it too: finishing before the loss is fine */
    } else if (rc < 0 && strstr(msg, want_rank) && strstr(msg, want_name)) {
      failed++;
    } else {
      if (bad++ == 0)
        snprintf(first_bad, sizeof first_bad, " (first: %s: %s: %s)", want_name,
                 hvd_err_name(rc), rc < 0 ? msg : "completed without the victim");
    }
  }
  double took = now() - t0;
  float x = 1;
  int later = hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after.loss");
  printf("rank %d: lost rank %d: %d failed naming it, %d completed, %d bad%s; "
         "later call %s; %.1f s\n",
         rank, victim, failed, completed, bad, first_bad, hvd_err_name(later), took);
  fflush(stdout);
  hvd_shutdown();
  if (bad != 0 || later != HVD_E_ABORTED) return 1;
  return stop ? 3 : 0;
}
