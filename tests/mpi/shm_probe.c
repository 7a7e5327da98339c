/*
 * shm_probe.c -- a small job for tests/launcher/test_shm.py: the shared
 * memory transport's life cycle from the outside.
 *
 *   shm_probe ok     allreduces with known sums; "rank R: sums ok"
 *   shm_probe exit   the last rank exit(1)s mid-allreduce
 *   shm_probe kill   the last rank SIGKILLs itself mid-allreduce
 *   shm_probe leak   rank 0 sleeps 2 s, then everybody exits 1 (the test
 *                    plants a leftover segment name meanwhile)
 *
 * Every rank first prints "rank R: key <_HOROVOD_SECRET_KEY>", from which
 * the test derives the job's segment name.  Survivors of a lost rank print
 * "rank R: lost rank V: <message>" and exit 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

#define COUNT (1u << 20) /* 4 MiB of floats: several ring-fulls per step */

static void *exit_later(void *arg) {
  (void)arg;
  sleep_ms(20);
  _exit(1);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  if (init_or_complain() != 0) return 1;
  int rank = hvd_rank(), size = hvd_size(), victim = size - 1;
  const char *key = getenv("_HOROVOD_SECRET_KEY");
  printf("rank %d: key %s\n", rank, key ? key : "");
  fflush(stdout);
  if (strcmp(mode, "leak") == 0) {
    if (rank == 0) sleep_ms(2000);
    hvd_shutdown();
    return 1;
  }
  float *buf = malloc(COUNT * sizeof *buf);
  char want[32];
  snprintf(want, sizeof want, "rank %d", victim);
  for (int it = 0; it < 20; it++) {
    for (size_t i = 0; i < COUNT; i++) buf[i] = (float)(rank + 1) * (float)(i % 7);
    if (rank == victim && it == 3 && strcmp(mode, "kill") == 0) raise_later(SIGKILL, 5);
    if (rank == victim && it == 3 && strcmp(mode, "exit") == 0) {
      pthread_t t;
      pthread_create(&t, NULL, exit_later, NULL);
    }
    int rc = hvd_allreduce(buf, buf, COUNT, HVD_FLOAT32, HVD_SUM, "probe");
    if (rc != 0) {
      const char *msg = hvd_last_error();
      printf("rank %d: %s rank %d: %s\n", rank, strstr(msg, want) ? "lost" : "UNNAMED LOSS OF",
             victim, msg);
      fflush(stdout);
      hvd_shutdown();
      return strstr(msg, want) ? 0 : 1;
    }
    float total = (float)size * (float)(size + 1) / 2;
    for (size_t i = 0; i < COUNT; i++)
      if (buf[i] != total * (float)(i % 7)) {
        printf("rank %d: wrong sum at %zu: %g\n", rank, i, (double)buf[i]);
        return 1;
      }
  }
  printf("rank %d: sums ok\n", rank);
  free(buf);
  hvd_shutdown();
  return 0;
}
