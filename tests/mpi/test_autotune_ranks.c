/*
 * test_autotune_ranks.c -- HOROVOD_AUTOTUNE=1 across ranks: rank 0 tunes, every
 * rank applies its choices in the same cycle.
 *
 * A short training loop (a few tensors of different sizes per step,
 * async, then waited) runs with a fast autotuner (1 warm-up sample, 2
 * steps per sample, 6 Bayesian samples) until it has settled.  Then every
 * rank's record of the settings it applied (the internal
 * hvd__tune_history(): cycle number and settings of each change) must be
 * the same on every rank, with changes in it; every result exact; and rank
 * 0's log one CSV line per sample after its header.  Run on emulated hosts
 * too, where the hierarchical allreduce is one of the knobs.
 *
 * Linked with libhvd's objects for hvd__tune_history().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "api_hooks.h"
#include "engine/engine.h"
#include "testing.h"

static int rank, size, failures, checks;

#define NT 5
#define MAX_CHANGES 256

static const size_t counts[NT] = {1000, 70000, 3, 250000, 4096};

/* One step: every tensor async, then all waited; sums checked exactly. */
static void train_step(float **buf) {
  hvd_handle h[NT];
  for (int k = 0; k < NT; k++) {
    char name[16];
    snprintf(name, sizeof name, "grad.%d", k);
    for (size_t i = 0; i < counts[k]; i++) buf[k][i] = (float)(rank + 1) * (float)(i % 9);
    CALL(h[k] = hvd_allreduce_async(buf[k], buf[k], counts[k], HVD_FLOAT32, HVD_SUM, name));
  }
  for (int k = 0; k < NT; k++) {
    CALL(hvd_wait(h[k]));
    size_t bad = 0;
    for (size_t i = 0; i < counts[k]; i++)
      bad += buf[k][i] != (float)(size * (size + 1) / 2) * (float)(i % 9);
    CHECK(bad == 0, "grad.%d: %zu elements wrong", k, bad);
  }
}

static int same(const hvd_tune_change *a, const hvd_tune_change *b) {
  return a->cycle == b->cycle && a->settings.fusion_bytes == b->settings.fusion_bytes &&
         a->settings.cycle_ms == b->settings.cycle_ms &&
         a->settings.cache_on == b->settings.cache_on &&
         a->settings.hierarchical == b->settings.hierarchical;
}

static int lines_of(const char *path) {
  FILE *f = fopen(path, "r");
  int n = 0, c;
  while (f && (c = fgetc(f)) != EOF) n += c == '\n';
  if (f) fclose(f);
  return n;
}

int main(void) {
  limit_stalls();
  char log[64];
  snprintf(log, sizeof log, "/tmp/hvd-test-autotune-%d.csv", (int)getppid());
  setenv("HOROVOD_AUTOTUNE", "1", 1);
  setenv("HOROVOD_AUTOTUNE_LOG", log, 1);
  setenv("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "1", 1);
  setenv("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "2", 1);
  setenv("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "6", 1);
  CALL(hvd_init());
  rank = hvd_rank();
  size = hvd_size();
  float *buf[NT];
  for (int k = 0; k < NT; k++) buf[k] = malloc(counts[k] * sizeof(float));
  /* 1 + 6 + up to 4 categorical + 3 reference samples of 2 steps, and
   * room for slow ones */
  for (int s = 0; s < 80; s++) train_step(buf);

  static hvd_tune_change mine[MAX_CHANGES]; /* zeroed: padding allgathers alike */
  int n = hvd__tune_history(mine, MAX_CHANGES);
  CHECK(n >= 3, "only %d settings changes: the autotuner did not run", n);
  if (n > MAX_CHANGES) n = MAX_CHANGES;
  int64_t *all_n = NULL;
  int64_t nn = n;
  CALL(hvd_allgather(&nn, 1, HVD_INT64, (void **)&all_n, NULL, "changes.n"));
  unsigned char *all = NULL;
  CALL(hvd_allgather(mine, (size_t)n * sizeof *mine, HVD_UINT8, (void **)&all, NULL, "changes"));
  for (int q = 0; q < size; q++) {
    CHECK(all_n[q] == n, "rank %d applied %lld changes, rank %d %d", q, (long long)all_n[q],
          rank, n);
    if (all_n[q] != n) continue;
    const hvd_tune_change *theirs = (const hvd_tune_change *)(void *)(all + (size_t)q * n * sizeof *mine);
    for (int i = 0; i < n; i++)
      CHECK(same(&theirs[i], &mine[i]), "change %d: rank %d applied it at cycle %llu, rank %d at %llu (or other settings)", i,
            q, (unsigned long long)theirs[i].cycle, rank, (unsigned long long)mine[i].cycle);
  }
  free(all);
  free(all_n);
  CALL(hvd_shutdown());
  if (rank == 0) {
    int lines = lines_of(log);
    CHECK(lines >= 1 + 1 + 6, "the autotune log has %d lines", lines);
    unlink(log);
  }
  for (int k = 0; k < NT; k++) free(buf[k]);
  return report_checks("test_autotune_ranks", rank, size, checks, failures);
}
