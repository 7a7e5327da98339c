/*
 * nn_recipes.c -- the recipes across real ranks: broadcast_parameters and
 * broadcast_optimizer_state (SGD and Adam) from a non-zero root, metric
 * averaging, rank 0's checkpoint and the resume that broadcasts it, a bad
 * checkpoint failing on every rank, and the sampler's shards being
 * disjoint across the job.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nn_testing.h"

static int rank, size, checks, failures;

static hvd_nn_model *make_model(uint64_t seed) {
  hvd_nn_model *m = hvd_nn_model_new(1, 8, 8);
  CALL(m ? 0 : HVD_E_NOMEM);
  CALL(hvd_nn_add_conv2d(m, 3, 3, 1, 0));
  CALL(hvd_nn_add_relu(m));
  CALL(hvd_nn_add_dense(m, 5));
  CALL(hvd_nn_model_init(m, seed));
  return m;
}

static uint64_t opt_hash(hvd_nn_optimizer *o) {
  uint64_t h = fnv(hvd_nn_optimizer_steps(o), sizeof(int64_t));
  h = h * 31 + fnv(hvd_nn_optimizer_hypers(o), HVD_NN_HYPERS * sizeof(double));
  for (int i = 0; i < hvd_nn_optimizer_num_slots(o); i++) {
    size_t count;
    const char *name;
    float *slot = hvd_nn_optimizer_slot(o, i, &count, &name);
    h = h * 31 + fnv(slot, count * sizeof(float));
  }
  return h;
}

static uint64_t root_value(uint64_t mine, int root) {
  CALL(hvd_broadcast(&mine, 1, HVD_INT64, root, NULL));
  return mine;
}

/* A few steps with rank-specific gradients: every rank's state differs. */
static void diverge(hvd_nn_optimizer *o, hvd_nn_model *m, int steps) {
  for (int s = 0; s < steps + rank; s++) {
    for (int i = 0; i < hvd_nn_num_params(m); i++) {
      hvd_nn_param *p = hvd_nn_param_at(m, i);
      for (size_t k = 0; k < p->count; k++)
        p->grad[k] = (float)((double)(mix(k * 131 + (uint64_t)(rank * 7 + s)) % 1000) / 500.0 - 1.0);
    }
    CALL(hvd_nn_optimizer_step(o));
  }
  hvd_nn_optimizer_set_lr(o, 0.01f * (float)(rank + 1));
}

static void check_broadcasts(int adam) {
  int root = size - 1;
  hvd_nn_model *m = make_model(100 + (uint64_t)rank);
  hvd_nn_optimizer *o = adam ? hvd_nn_adam_new(m, 0.01f, 0.9f, 0.999f, 1e-8f)
                             : hvd_nn_sgd_new(m, 0.01f, 0.9f, 1e-4f);
  CALL(o ? 0 : HVD_E_NOMEM);
  diverge(o, m, 2);
  uint64_t want_m = root_value(model_hash(m), root), want_o = root_value(opt_hash(o), root);
  CALL(hvd_nn_broadcast_parameters(m, root));
  CALL(hvd_nn_broadcast_optimizer_state(o, root));
  CHECK(model_hash(m) == want_m, "%s: parameters differ from root %d's", adam ? "adam" : "sgd", root);
  CHECK(opt_hash(o) == want_o, "%s: optimizer state differs from root %d's", adam ? "adam" : "sgd", root);
  CHECK(hvd_nn_optimizer_lr(o) == 0.01f * (float)(root + 1), "lr %g is not the root's",
        (double)hvd_nn_optimizer_lr(o));
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

static void check_metric_average(void) {
  double avg = -1;
  CALL(hvd_nn_metric_average((double)rank, "check.metric", &avg));
  CHECK(avg == (double)(size - 1) / 2.0, "metric average %g, expected %g", avg, (size - 1) / 2.0);
}

/* Rank 0 saves; every rank scrambles its state; resume brings back rank
 * 0's saved state everywhere. */
static void check_checkpoint(const char *dir) {
  char path[512], missing[512];
  snprintf(path, sizeof path, "%s/ck", dir);
  snprintf(missing, sizeof missing, "%s/none", dir);
  hvd_nn_model *m = make_model(5);
  hvd_nn_optimizer *o = hvd_nn_adam_new(m, 0.01f, 0.9f, 0.999f, 1e-8f);
  CALL(o ? 0 : HVD_E_NOMEM);
  diverge(o, m, 1);
  CALL(hvd_nn_broadcast_parameters(m, 0));
  CALL(hvd_nn_broadcast_optimizer_state(o, 0));
  uint64_t saved_m = model_hash(m), saved_o = opt_hash(o);
  hvd_nn_ckpt_meta meta = {.epoch = 3, .step = 77, .seed = 9};
  CALL(hvd_nn_checkpoint_save_rank0(path, m, o, &meta));
  if (rank == 0) CHECK(access(path, F_OK) == 0, "rank 0 wrote no %s", path);

  diverge(o, m, 2);
  hvd_nn_ckpt_meta got = {0};
  CHECK(hvd_nn_checkpoint_resume(missing, m, o, &got) == 0, "resume without a file");
  CHECK(got.epoch == 0, "resume without a file changed the meta");
  CHECK(hvd_nn_checkpoint_resume(path, m, o, &got) == 1, "resume: %s", hvd_nn_last_error());
  CHECK(model_hash(m) == saved_m, "resumed parameters differ from the saved ones");
  CHECK(opt_hash(o) == saved_o, "resumed optimizer state differs from the saved one");
  CHECK(got.epoch == 3 && got.step == 77 && got.seed == 9, "resumed meta %lld %lld %llu",
        (long long)got.epoch, (long long)got.step, (unsigned long long)got.seed);

  /* A damaged file fails on every rank, not only the one that reads it. */
  if (rank == 0) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "reopen %s", path);
    if (f) {
      fseek(f, 40, SEEK_SET);
      fputc(0x5a ^ fgetc(f), f);
      fclose(f);
    }
  }
  int rc = hvd_nn_checkpoint_resume(path, m, o, &got);
  CHECK(rc < 0, "resume from a damaged checkpoint returned %d", rc);
  CHECK(strstr(hvd_nn_last_error(), "ck") != NULL, "message names no file: %s",
        hvd_nn_last_error());
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

/* The shards of one epoch are disjoint and cover the data set. */
static void check_sampler_shards(void) {
  enum { N = 1000 };
  hvd_nn_sampler s;
  CALL(hvd_nn_sampler_init(&s, N, size, rank, 11));
  CALL(hvd_nn_sampler_set_epoch(&s, 2));
  void *all = NULL;
  size_t counts[16];
  CALL(hvd_allgather(s.indices, (size_t)s.num_samples, HVD_INT32, &all, counts, "check.shards"));
  int seen[N] = {0}, total = s.num_samples * size;
  for (int i = 0; i < total; i++) seen[((int *)all)[i]]++;
  int missing = 0, extra = 0;
  for (int i = 0; i < N; i++) {
    missing += seen[i] == 0;
    extra += seen[i] > 1 ? seen[i] - 1 : 0;
  }
  CHECK(missing == 0 && extra == total - N, "shards: %d missing, %d repeated (padding %d)",
        missing, extra, total - N);
  free(all);
  hvd_nn_sampler_free(&s);
}

int main(void) {
  limit_stalls();
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  char dir[] = "/tmp/hvd-nn-recipes-XXXXXX";
  if (rank == 0 && !mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  CALL(hvd_broadcast(dir, sizeof dir, HVD_UINT8, 0, NULL));
  check_broadcasts(0);
  check_broadcasts(1);
  check_metric_average();
  check_checkpoint(dir);
  check_sampler_shards();
  CALL(hvd_barrier());
  if (rank == 0) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  }
  int status = report_checks("nn_recipes", rank, size, checks, failures);
  hvd_shutdown();
  return status;
}
