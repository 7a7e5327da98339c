/*
 * hvd-train-fashion-mnist -- trains a classifier on Fashion-MNIST with
 * every rank of the job, the way Horovod's PyTorch MNIST example does:
 *
 *   1. hvd_init; one BLAS thread per core this rank may use;
 *   2. each rank builds the same model from the same seed, resumes from
 *      the checkpoint if there is one, and takes rank 0's parameters and
 *      optimizer state (broadcast);
 *   3. the learning rate is scaled by the number of ranks, with a linear
 *      warmup (Goyal et al.);
 *   4. a distributed sampler gives each rank its shard of the training set,
 *      reshuffled each epoch with a seed shared by all ranks;
 *   5. the DistributedOptimizer averages gradients as backward produces
 *      them;
 *   6. metrics are averaged over ranks; rank 0 prints and checkpoints.
 *
 * The last 5000 training images are held out for validation; the test set
 * is evaluated once, at the end: `test_accuracy=0.NNNN`.
 *
 * With --elastic it trains under hvdrun's elastic driver (--min-np,
 * --max-np, --host-discovery-script): the parameters, the optimizer's
 * state and the position in the data are an elastic state committed every
 * --commit-interval steps; a lost worker sends every survivor back to the
 * last commit, and the job goes on with whoever is there (see "Elastic
 * training" below).
 */
#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvd.h"
#include "hvd_nn.h"

#define PROG "hvd-train-fashion-mnist"
#define CLASSES 10

typedef struct {
  int epochs, batch_size, test_batch_size, val_size, train_limit, test_limit, log_interval;
  int backward_passes, overlap;
  int elastic, commit_interval;
  int slow_rank;   /* -1: none */
  double slow_ms;
  double lr, momentum, warmup_epochs, predivide;
  int powersgd_rank;
  double topk_ratio, min_compression_rate;
  const char *model, *optimizer, *checkpoint, *data_dir;
  hvd_nn_compression compression;
  hvd_op op;
  uint64_t seed;
} config;

typedef struct {
  const hvd_nn_dataset *data;
  int first, count;    /* the samples [first, first + count) of data */
} split;

static int rank0;

static void say(const char *fmt, ...) {
  if (!rank0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

static int fail(const char *what, const char *msg) {
  fprintf(stderr, PROG ": %s: %s\n", what, msg);
  return 1;
}

/* ---- Command line ---- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [options]      (run it with hvdrun -np N)\n"
          "  --epochs N                   passes over the training set (3)\n"
          "  --batch-size B               samples per rank per step (32)\n"
          "  --test-batch-size B          samples per forward when evaluating (1000)\n"
          "  --lr X                       single-process learning rate, scaled by the\n"
          "                               number of ranks after warmup (0.01)\n"
          "  --momentum X                 SGD momentum (0.9)\n"
          "  --optimizer sgd|adam         (sgd; Adam uses --lr, betas 0.9/0.999)\n"
          "  --warmup-epochs X            linear learning-rate warmup (1)\n"
          "  --model mlp|cnn              (cnn)\n"
          "  --fp16-allreduce             float16 gradients on the wire\n"
          "  --bf16-allreduce             bfloat16 gradients on the wire\n"
          "  --compression none|fp16|bf16|powersgd|topk\n"
          "                               gradient compression (none; see\n"
          "                               docs/compression.md)\n"
          "  --powersgd-rank N            PowerSGD's approximation rank (1)\n"
          "  --topk-ratio X               top-k: share of each tensor sent (0.01)\n"
          "  --min-compression-rate X     compress a weight only if it shrinks more\n"
          "                               than X times (2)\n"
          "  --use-adasum                 Adasum instead of averaging (no lr scaling)\n"
          "  --gradient-predivide-factor X  divide before the sum, the rest after (1)\n"
          "  --backward-passes-per-step N accumulate N batches per step (1)\n"
          "  --no-overlap                 reduce gradients only after backward ends\n"
          "  --checkpoint PATH            resume from PATH if it exists; rank 0 saves\n"
          "                               it after every epoch\n"
          "  --seed N                     initialisation and shuffling (42)\n"
          "  --data-dir DIR               (" HVD_NN_FASHION_MNIST_DIR ")\n"
          "  --val-size N                 training images held out for validation (5000)\n"
          "  --train-limit N              train on the first N images only (all)\n"
          "  --test-limit N               test on the first N test images only (all)\n"
          "  --log-interval N             steps between progress lines (a tenth of an epoch)\n"
          "  --elastic                    elastic training (hvdrun --min-np/--max-np ...)\n"
          "  --commit-interval K          with --elastic: steps between commits (10)\n"
          "  --slow-rank R:MS             rank R sleeps MS ms in every step: a straggler\n"
          "                               on purpose, for hvd-report (none)\n");
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, PROG ": %s '%s': expected an integer in [%ld, %ld]\n", opt, s, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_double(const char *opt, const char *s, double lo, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo) {
    fprintf(stderr, PROG ": %s '%s': expected a number >= %g\n", opt, s, lo);
    return -1;
  }
  *out = v;
  return 0;
}

enum { O_EPOCHS = 256, O_BATCH, O_TEST_BATCH, O_LR, O_MOMENTUM, O_OPTIMIZER, O_WARMUP, O_MODEL,
       O_FP16, O_BF16, O_ADASUM, O_PREDIVIDE, O_BPPS, O_NO_OVERLAP, O_CHECKPOINT, O_SEED,
       O_DATA_DIR, O_VAL_SIZE, O_TRAIN_LIMIT, O_TEST_LIMIT, O_LOG_INTERVAL, O_ELASTIC, O_COMMIT_INTERVAL,
       O_SLOW_RANK, O_COMPRESSION, O_PSGD_RANK, O_TOPK_RATIO, O_MIN_RATE, O_HELP };

static const struct option long_options[] = {
    {"epochs", required_argument, 0, O_EPOCHS},
    {"batch-size", required_argument, 0, O_BATCH},
    {"test-batch-size", required_argument, 0, O_TEST_BATCH},
    {"lr", required_argument, 0, O_LR},
    {"momentum", required_argument, 0, O_MOMENTUM},
    {"optimizer", required_argument, 0, O_OPTIMIZER},
    {"warmup-epochs", required_argument, 0, O_WARMUP},
    {"model", required_argument, 0, O_MODEL},
    {"fp16-allreduce", no_argument, 0, O_FP16},
    {"bf16-allreduce", no_argument, 0, O_BF16},
    {"use-adasum", no_argument, 0, O_ADASUM},
    {"gradient-predivide-factor", required_argument, 0, O_PREDIVIDE},
    {"backward-passes-per-step", required_argument, 0, O_BPPS},
    {"no-overlap", no_argument, 0, O_NO_OVERLAP},
    {"checkpoint", required_argument, 0, O_CHECKPOINT},
    {"seed", required_argument, 0, O_SEED},
    {"data-dir", required_argument, 0, O_DATA_DIR},
    {"val-size", required_argument, 0, O_VAL_SIZE},
    {"train-limit", required_argument, 0, O_TRAIN_LIMIT},
    {"test-limit", required_argument, 0, O_TEST_LIMIT},
    {"log-interval", required_argument, 0, O_LOG_INTERVAL},
    {"elastic", no_argument, 0, O_ELASTIC},
    {"commit-interval", required_argument, 0, O_COMMIT_INTERVAL},
    {"slow-rank", required_argument, 0, O_SLOW_RANK},
    {"compression", required_argument, 0, O_COMPRESSION},
    {"powersgd-rank", required_argument, 0, O_PSGD_RANK},
    {"topk-ratio", required_argument, 0, O_TOPK_RATIO},
    {"min-compression-rate", required_argument, 0, O_MIN_RATE},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* --slow-rank R:MS */
static int parse_slow_rank(config *c, const char *arg) {
  char rank[32];
  const char *colon = strchr(arg, ':');
  long v;
  if (!colon || (size_t)(colon - arg) >= sizeof rank) {
    fprintf(stderr, PROG ": --slow-rank '%s': expected RANK:MS, e.g. 3:20\n", arg);
    return -1;
  }
  memcpy(rank, arg, (size_t)(colon - arg));
  rank[colon - arg] = '\0';
  if (parse_long("--slow-rank's rank", rank, 0, INT_MAX, &v) < 0 ||
      parse_double("--slow-rank's milliseconds", colon + 1, 0.0, &c->slow_ms) < 0)
    return -1;
  c->slow_rank = (int)v;
  return 0;
}

/* --compression NAME */
static int parse_compression(config *c, const char *arg) {
  static const char *const names[] = {"none", "fp16", "bf16", "powersgd", "topk"};
  static const hvd_nn_compression kinds[] = {HVD_NN_COMPRESS_NONE, HVD_NN_COMPRESS_FP16,
                                             HVD_NN_COMPRESS_BF16, HVD_NN_COMPRESS_POWERSGD,
                                             HVD_NN_COMPRESS_TOPK};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    if (strcmp(arg, names[i]) == 0) {
      c->compression = kinds[i];
      return 0;
    }
  }
  fprintf(stderr, PROG ": --compression '%s': expected none, fp16, bf16, powersgd or topk\n",
          arg);
  return -1;
}

/* One option; 0, or -1 on a bad value. */
static int apply_option(config *c, int opt, const char *arg) {
  long v = 0;
  int rc = 0;
  switch (opt) {
    case O_EPOCHS: rc = parse_long("--epochs", arg, 0, 100000, &v); c->epochs = (int)v; break;
    case O_BATCH: rc = parse_long("--batch-size", arg, 1, 1 << 20, &v); c->batch_size = (int)v; break;
    case O_TEST_BATCH:
      rc = parse_long("--test-batch-size", arg, 1, 1 << 20, &v);
      c->test_batch_size = (int)v;
      break;
    case O_LR: rc = parse_double("--lr", arg, 0.0, &c->lr); break;
    case O_MOMENTUM: rc = parse_double("--momentum", arg, 0.0, &c->momentum); break;
    case O_WARMUP: rc = parse_double("--warmup-epochs", arg, 0.0, &c->warmup_epochs); break;
    case O_PREDIVIDE:
      rc = parse_double("--gradient-predivide-factor", arg, 1e-6, &c->predivide);
      break;
    case O_OPTIMIZER: c->optimizer = arg; break;
    case O_MODEL: c->model = arg; break;
    case O_FP16: c->compression = HVD_NN_COMPRESS_FP16; break;
    case O_BF16: c->compression = HVD_NN_COMPRESS_BF16; break;
    case O_ADASUM: c->op = HVD_ADASUM; break;
    case O_BPPS: rc = parse_long("--backward-passes-per-step", arg, 1, 1 << 16, &v);
      c->backward_passes = (int)v;
      break;
    case O_NO_OVERLAP: c->overlap = 0; break;
    case O_CHECKPOINT: c->checkpoint = arg; break;
    case O_SEED: rc = parse_long("--seed", arg, 0, LONG_MAX, &v); c->seed = (uint64_t)v; break;
    case O_DATA_DIR: c->data_dir = arg; break;
    case O_VAL_SIZE: rc = parse_long("--val-size", arg, 0, 50000, &v); c->val_size = (int)v; break;
    case O_TRAIN_LIMIT:
      rc = parse_long("--train-limit", arg, 1, INT_MAX, &v);
      c->train_limit = (int)v;
      break;
    case O_TEST_LIMIT:
      rc = parse_long("--test-limit", arg, 1, INT_MAX, &v);
      c->test_limit = (int)v;
      break;
    case O_LOG_INTERVAL:
      rc = parse_long("--log-interval", arg, 1, INT_MAX, &v);
      c->log_interval = (int)v;
      break;
    case O_ELASTIC: c->elastic = 1; break;
    case O_COMMIT_INTERVAL:
      rc = parse_long("--commit-interval", arg, 1, INT_MAX, &v);
      c->commit_interval = (int)v;
      break;
    case O_SLOW_RANK: rc = parse_slow_rank(c, arg); break;
    case O_COMPRESSION: rc = parse_compression(c, arg); break;
    case O_PSGD_RANK:
      rc = parse_long("--powersgd-rank", arg, 1, 1 << 16, &v);
      c->powersgd_rank = (int)v;
      break;
    case O_TOPK_RATIO:
      rc = parse_double("--topk-ratio", arg, 1e-9, &c->topk_ratio);
      if (rc == 0 && c->topk_ratio > 1.0) {
        fprintf(stderr, PROG ": --topk-ratio '%s': expected a number in (0, 1]\n", arg);
        rc = -1;
      }
      break;
    case O_MIN_RATE:
      rc = parse_double("--min-compression-rate", arg, 0.0, &c->min_compression_rate);
      break;
    default: return -1;
  }
  return rc;
}

/* 0: go on, 1: --help was shown, -1: bad usage. */
static int parse_args(config *c, int argc, char **argv) {
  *c = (config){.epochs = 3, .batch_size = 32, .test_batch_size = 1000, .val_size = 5000,
                .backward_passes = 1, .overlap = 1, .lr = 0.01, .momentum = 0.9,
                .warmup_epochs = 1.0, .predivide = 1.0, .model = "cnn", .optimizer = "sgd",
                .data_dir = HVD_NN_FASHION_MNIST_DIR, .compression = HVD_NN_COMPRESS_NONE,
                .op = HVD_AVERAGE, .seed = 42, .commit_interval = 10, .slow_rank = -1,
                .powersgd_rank = 1, .topk_ratio = 0.01, .min_compression_rate = 2.0};
  int opt;
  while ((opt = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
    if (opt == 'h' || opt == O_HELP) {
      if (rank0) usage(stdout);
      return 1;
    }
    if (apply_option(c, opt, optarg) < 0) {
      if (rank0) usage(stderr);
      return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  if (strcmp(c->model, "mlp") && strcmp(c->model, "cnn")) {
    fprintf(stderr, PROG ": --model '%s': expected mlp or cnn\n", c->model);
    return -1;
  }
  if (strcmp(c->optimizer, "sgd") && strcmp(c->optimizer, "adam")) {
    fprintf(stderr, PROG ": --optimizer '%s': expected sgd or adam\n", c->optimizer);
    return -1;
  }
  if (c->elastic && c->checkpoint) {
    fprintf(stderr, PROG ": --elastic keeps its state in memory: no --checkpoint with it\n");
    return -1;
  }
  return 0;
}

/* ---- Model ---- */

static hvd_nn_model *build_model(const char *kind, uint64_t seed) {
  hvd_nn_model *m = hvd_nn_model_new(1, 28, 28);
  int rc = m ? 0 : -1;
  if (rc == 0 && strcmp(kind, "cnn") == 0) {
    /* 1x28x28 -> 16x28x28 -> 16x14x14 -> 32x14x14 -> 32x7x7 -> 128 -> 10 */
    if (rc == 0) rc = hvd_nn_add_conv2d(m, 16, 5, 1, 2);
    if (rc == 0) rc = hvd_nn_add_relu(m);
    if (rc == 0) rc = hvd_nn_add_maxpool(m, 2, 2);
    if (rc == 0) rc = hvd_nn_add_conv2d(m, 32, 5, 1, 2);
    if (rc == 0) rc = hvd_nn_add_relu(m);
    if (rc == 0) rc = hvd_nn_add_maxpool(m, 2, 2);
    if (rc == 0) rc = hvd_nn_add_dense(m, 128);
  } else if (rc == 0) {
    rc = hvd_nn_add_dense(m, 256);
  }
  if (rc == 0) rc = hvd_nn_add_relu(m);
  if (rc == 0) rc = hvd_nn_add_dense(m, CLASSES);
  if (rc == 0) rc = hvd_nn_model_init(m, seed);
  if (rc < 0) {
    hvd_nn_model_free(m);
    return NULL;
  }
  return m;
}

static hvd_nn_optimizer *build_optimizer(const config *c, hvd_nn_model *m) {
  if (strcmp(c->optimizer, "adam") == 0)
    return hvd_nn_adam_new(m, (float)c->lr, 0.9f, 0.999f, 1e-8f);
  return hvd_nn_sgd_new(m, (float)c->lr, (float)c->momentum, 0.0f);
}

/* ---- Batches and evaluation ---- */

typedef struct {
  float *x;
  int *y;
  float *dlogits;
  int cap;
} batch_buf;

static int batch_alloc(batch_buf *b, int cap) {
  b->cap = cap;
  b->x = malloc((size_t)cap * 28 * 28 * sizeof *b->x);
  b->y = malloc((size_t)cap * sizeof *b->y);
  b->dlogits = malloc((size_t)cap * CLASSES * sizeof *b->dlogits);
  return b->x && b->y && b->dlogits ? 0 : -1;
}

static void batch_free(batch_buf *b) {
  free(b->x);
  free(b->y);
  free(b->dlogits);
}

/* Copies samples idx[0..n) of s into b. */
static void gather(batch_buf *b, const split *s, const int *idx, int n) {
  size_t px = (size_t)s->data->rows * (size_t)s->data->cols;
  for (int i = 0; i < n; i++) {
    int k = s->first + idx[i];
    memcpy(b->x + (size_t)i * px, s->data->images + (size_t)k * px, px * sizeof *b->x);
    b->y[i] = s->data->labels[k];
  }
}

/* Loss and accuracy over a whole split: each rank evaluates samples
 * r, r + size, ... and the sums are added over ranks, so the result is
 * exact (no padding) and the same on every rank. */
static int evaluate(hvd_nn_model *m, const split *s, batch_buf *b, int batch, double *loss,
                    double *accuracy) {
  double sums[3] = {0, 0, 0}; /* loss * samples, correct, samples */
  int size = hvd_size(), rank = hvd_rank();
  int *idx = malloc((size_t)batch * sizeof *idx);
  if (!idx) return HVD_E_NOMEM;
  for (int next = rank; next < s->count;) {
    int n = 0;
    for (; n < batch && next < s->count; next += size) idx[n++] = next;
    gather(b, s, idx, n);
    const float *logits = hvd_nn_forward(m, b->x, n);
    int correct = 0;
    float l = logits ? hvd_nn_softmax_xent(logits, b->y, n, CLASSES, NULL, &correct) : -1.0f;
    if (l < 0) {
      free(idx);
      return HVD_E_INVALID;
    }
    sums[0] += (double)l * n;
    sums[1] += correct;
    sums[2] += n;
  }
  free(idx);
  int rc = hvd_allreduce(sums, sums, 3, HVD_FLOAT64, HVD_SUM, "eval.sums");
  if (rc < 0) return rc;
  *loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
  *accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
  return 0;
}

/* ---- Training ---- */

typedef struct {
  const config *c;
  hvd_nn_model *model;
  hvd_nn_optimizer *opt;
  hvd_nn_dist *dist;
  hvd_nn_sampler sampler;
  batch_buf buf;
  split train, val, test;
  int64_t step;
} trainer;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double lr_scale(const config *c) {
  return c->op == HVD_ADASUM ? 1.0 : (double)hvd_size();
}

/* Rank 0's progress: a line rewritten in place on a terminal, plain lines
 * (one per log interval) when the output is a pipe (hvdrun, a log file). */
static void progress(const trainer *t, int64_t epoch, int step, int steps, double loss) {
  static int tty = -1;
  if (!rank0) return;
  if (tty < 0) tty = isatty(STDOUT_FILENO);
  int interval = t->c->log_interval > 0 ? t->c->log_interval : (steps + 9) / 10;
  if (tty)
    printf("\repoch %lld [%d/%d] loss %.4f", (long long)epoch + 1, step, steps, loss);
  else if (step % (interval > 0 ? interval : 1) == 0 || step == steps)
    printf("epoch %lld [%d/%d] loss %.4f\n", (long long)epoch + 1, step, steps, loss);
  if (tty && step == steps) printf("\n");
  fflush(stdout);
}

/* --slow-rank: this rank's extra time per step, slept (not computed, so
 * that it is the same however many cores the ranks share). */
static void straggle(const config *c) {
  if (c->slow_rank != hvd_rank() || !(c->slow_ms > 0)) return;
  double s = c->slow_ms / 1e3;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One step: backward_passes batches, then the optimizer.  Adds the
 * batches' mean loss to *loss_sum. */
static int train_step(trainer *t, const int *idx, int64_t epoch, int k, int steps,
                      double *loss_sum) {
  const config *c = t->c;
  double e = (double)epoch + (double)k / steps;
  hvd_nn_optimizer_set_lr(t->opt, (float)hvd_nn_lr_warmup(c->lr, lr_scale(c), e, c->warmup_epochs));
  hvd_nn_model_zero_grad(t->model);
  straggle(c);
  for (int p = 0; p < c->backward_passes; p++) {
    const int *bidx = idx + (size_t)p * c->batch_size;
    gather(&t->buf, &t->train, bidx, c->batch_size);
    const float *logits = hvd_nn_forward(t->model, t->buf.x, c->batch_size);
    if (!logits) return HVD_E_INVALID;
    float l = hvd_nn_softmax_xent(logits, t->buf.y, c->batch_size, CLASSES, t->buf.dlogits, NULL);
    if (l < 0) return HVD_E_INVALID;
    *loss_sum += l;
    int rc = hvd_nn_dist_backward(t->dist, t->buf.dlogits);
    if (rc < 0) return rc;
  }
  int rc = hvd_nn_dist_step(t->dist);
  if (rc == 0) t->step++;
  return rc;
}

static int train_epoch(trainer *t, int64_t epoch, double *loss, double *seconds,
                       double *wait) {
  const config *c = t->c;
  int rc = hvd_nn_sampler_set_epoch(&t->sampler, epoch);
  if (rc < 0) return rc;
  int per_step = c->batch_size * c->backward_passes;
  int steps = t->sampler.num_samples / per_step;
  double loss_sum = 0.0, t0 = now_s();
  hvd_nn_dist_wait_seconds(t->dist);
  for (int k = 0; k < steps; k++) {
    rc = train_step(t, t->sampler.indices + (size_t)k * per_step, epoch, k, steps, &loss_sum);
    if (rc < 0) return rc;
    progress(t, epoch, k + 1, steps, loss_sum / ((double)(k + 1) * c->backward_passes));
  }
  *seconds = now_s() - t0;
  *wait = hvd_nn_dist_wait_seconds(t->dist);
  double mean = steps > 0 ? loss_sum / ((double)steps * c->backward_passes) : 0.0;
  return hvd_nn_metric_average(mean, "train.loss", loss);
}

static const char *last_error(void) {
  return *hvd_nn_last_error() ? hvd_nn_last_error() : hvd_last_error();
}

static int run_epochs(trainer *t, int64_t first_epoch) {
  const config *c = t->c;
  for (int64_t epoch = first_epoch; epoch < c->epochs; epoch++) {
    double loss, seconds, wait, val_loss = 0.0, val_acc = 0.0;
    if (train_epoch(t, epoch, &loss, &seconds, &wait) < 0) return fail("training", last_error());
    if (t->val.count > 0 &&
        evaluate(t->model, &t->val, &t->buf, c->test_batch_size, &val_loss, &val_acc) < 0)
      return fail("validation", last_error());
    int per_step = c->batch_size * c->backward_passes;
    double samples = (double)(t->sampler.num_samples / per_step) * per_step * hvd_size();
    say("epoch %lld/%d: train_loss=%.4f val_loss=%.4f val_accuracy=%.4f "
        "samples_per_sec=%.0f comm_wait=%.1f%% time=%.1fs\n",
        (long long)epoch + 1, c->epochs, loss, val_loss, val_acc,
        seconds > 0 ? samples / seconds : 0.0, seconds > 0 ? 100.0 * wait / seconds : 0.0,
        seconds);
    if (c->checkpoint) {
      hvd_nn_ckpt_meta meta = {.epoch = epoch + 1, .step = t->step, .seed = c->seed};
      if (hvd_nn_checkpoint_save_rank0(c->checkpoint, t->model, t->opt, &meta) < 0)
        return fail("checkpoint", last_error());
    }
  }
  return 0;
}

/* ---- Elastic training (--elastic) ----
 *
 * The state is what a new job must start from: every parameter, the
 * optimizer's buffers, step count and hyper-parameters, and where the run
 * is (epoch, samples of the epoch done, steps).  Each epoch is one
 * permutation of the training set; a step takes the next size x per_step
 * samples of it, rank r the r-th block, so a job of another size picks up
 * exactly where the last commit left the permutation.  Rank 0 of each
 * generation says when it starts and when its first step is done (wall
 * clock, for bench/elastic-faults), and a rank whose step fails says which
 * step.
 */

typedef struct {
  int64_t epoch;    /* the epoch in progress */
  int64_t consumed; /* samples of its permutation trained on, by all ranks together */
} position;

typedef struct {
  trainer *t;
  position pos;
  hvd_nn_sampler order; /* the epoch's permutation: one replica */
  int generation;
} elastic_run;

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int elastic_state(hvd_elastic_state *st, trainer *t, position *pos) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < hvd_nn_num_params(t->model); i++) {
    hvd_nn_param *p = hvd_nn_param_at(t->model, i);
    rc = hvd_elastic_state_add(st, p->name, p->value, p->count * sizeof *p->value);
  }
  for (int i = 0; rc == 0 && i < hvd_nn_optimizer_num_slots(t->opt); i++) {
    size_t count;
    const char *name;
    float *slot = hvd_nn_optimizer_slot(t->opt, i, &count, &name);
    rc = hvd_elastic_state_add(st, name, slot, count * sizeof *slot);
  }
  if (rc == 0)
    rc = hvd_elastic_state_add(st, "optimizer.steps", hvd_nn_optimizer_steps(t->opt),
                               sizeof(int64_t));
  if (rc == 0)
    rc = hvd_elastic_state_add(st, "optimizer.hypers", hvd_nn_optimizer_hypers(t->opt),
                               HVD_NN_HYPERS * sizeof(double));
  if (rc == 0) rc = hvd_elastic_state_add(st, "trainer.step", &t->step, sizeof t->step);
  if (rc == 0) rc = hvd_elastic_state_add(st, "trainer.position", pos, sizeof *pos);
  return rc;
}

/* After a change of membership: drop a step that failed midway. */
static int elastic_reset(void *arg) {
  elastic_run *e = arg;
  hvd_nn_dist_reset(e->t->dist);
  return 0;
}

/* Steps of the epoch left from e->pos; the rest of the epoch that does
 * not fill a step is dropped, as the sampler does. */
static int elastic_epoch(hvd_elastic_state *st, elastic_run *e, double *loss) {
  trainer *t = e->t;
  const config *c = t->c;
  int per_step = c->batch_size * c->backward_passes, size = hvd_size(), rank = hvd_rank();
  int64_t stride = (int64_t)size * per_step, n = t->train.count;
  int steps = (int)(n / stride), rc = hvd_nn_sampler_set_epoch(&e->order, e->pos.epoch);
  double loss_sum = 0.0;
  int done = 0;
  for (int k = (int)(e->pos.consumed / stride); rc == 0 && e->pos.consumed + stride <= n; k++) {
    int64_t step = t->step;
    rc = train_step(t, e->order.indices + e->pos.consumed + (int64_t)rank * per_step,
                    e->pos.epoch, k, steps, &loss_sum);
    if (rc < 0) {
      printf("elastic: rank %d: step %lld failed: %s\n", rank, (long long)step + 1,
             last_error());
      fflush(stdout);
      return rc;
    }
    e->pos.consumed += stride;
    if (++done == 1 && e->generation > 1)
      say("elastic: generation %d: first step done at %.3f\n", e->generation, wall_s());
    progress(t, e->pos.epoch, k + 1, steps, loss_sum / ((double)done * c->backward_passes));
    if (t->step % c->commit_interval == 0 && (rc = hvd_elastic_commit(st)) < 0) return rc;
  }
  double mean = done > 0 ? loss_sum / ((double)done * c->backward_passes) : 0.0;
  return rc < 0 ? rc : hvd_nn_metric_average(mean, "train.loss", loss);
}

/* hvd_elastic_run's training function: the epochs from e->pos on, then
 * the test set. */
static int elastic_train(hvd_elastic_state *st, void *arg) {
  elastic_run *e = arg;
  trainer *t = e->t;
  const config *c = t->c;
  int rc = 0;
  e->generation++;
  rank0 = hvd_rank() == 0;
  say("elastic: generation %d: %d ranks, from step %lld (epoch %lld, sample %lld)\n",
      e->generation, hvd_size(), (long long)t->step, (long long)e->pos.epoch + 1,
      (long long)e->pos.consumed);
  while (rc == 0 && e->pos.epoch < c->epochs) {
    double loss, val_loss = 0.0, val_acc = 0.0, t0 = now_s();
    rc = elastic_epoch(st, e, &loss);
    if (rc == 0 && t->val.count > 0)
      rc = evaluate(t->model, &t->val, &t->buf, c->test_batch_size, &val_loss, &val_acc);
    if (rc < 0) break;
    say("epoch %lld/%d: train_loss=%.4f val_loss=%.4f val_accuracy=%.4f ranks=%d time=%.1fs\n",
        (long long)e->pos.epoch + 1, c->epochs, loss, val_loss, val_acc, hvd_size(),
        now_s() - t0);
    e->pos.epoch++;
    e->pos.consumed = 0;
    rc = hvd_elastic_commit(st);
  }
  double test_loss, test_acc;
  if (rc == 0) rc = evaluate(t->model, &t->test, &t->buf, c->test_batch_size, &test_loss, &test_acc);
  if (rc == 0) say("test_loss=%.4f\ntest_accuracy=%.4f\n", test_loss, test_acc);
  return rc;
}

static int run_elastic(trainer *t) {
  elastic_run e = {.t = t};
  hvd_elastic_state *st = hvd_elastic_state_new();
  int rc = st ? elastic_state(st, t, &e.pos) : HVD_E_NOMEM;
  if (rc == 0) rc = hvd_elastic_on_reset(st, elastic_reset, &e);
  if (rc == 0) rc = hvd_nn_sampler_init(&e.order, t->train.count, 1, 0, t->c->seed);
  if (rc == 0) rc = hvd_elastic_run(st, elastic_train, &e);
  if (rc < 0) fail("elastic training", last_error());
  hvd_nn_sampler_free(&e.order);
  hvd_elastic_state_free(st);
  return rc < 0 ? 1 : 0;
}

/* The state every rank starts from: rank 0's, from the checkpoint when
 * there is one.  Returns the first epoch to run, or -1. */
static int64_t start_state(trainer *t) {
  const config *c = t->c;
  int64_t first = 0;
  if (c->checkpoint) {
    hvd_nn_ckpt_meta meta = {0};
    int rc = hvd_nn_checkpoint_resume(c->checkpoint, t->model, t->opt, &meta);
    if (rc < 0) {
      fail("resume", last_error());
      return -1;
    }
    if (rc == 1) {
      if (meta.seed != c->seed)
        say("note: the checkpoint was made with --seed %llu; continuing with %llu\n",
            (unsigned long long)meta.seed, (unsigned long long)c->seed);
      say("resumed from %s after epoch %lld (step %lld)\n", c->checkpoint,
          (long long)meta.epoch, (long long)meta.step);
      first = meta.epoch;
      t->step = meta.step;
    }
  }
  if (hvd_nn_broadcast_parameters(t->model, 0) < 0 ||
      hvd_nn_broadcast_optimizer_state(t->opt, 0) < 0) {
    fail("broadcast", last_error());
    return -1;
  }
  return first;
}

static int load_splits(trainer *t, hvd_nn_dataset *train, hvd_nn_dataset *test) {
  const config *c = t->c;
  if (hvd_nn_dataset_load_idx(train, c->data_dir, "train") < 0 ||
      hvd_nn_dataset_load_idx(test, c->data_dir, "t10k") < 0)
    return fail("data", hvd_nn_last_error());
  int val = c->val_size < train->n ? c->val_size : train->n - 1;
  int n_train = train->n - val;
  if (c->train_limit > 0 && c->train_limit < n_train) n_train = c->train_limit;
  t->train = (split){train, 0, n_train};
  t->val = (split){train, train->n - val, val};
  t->test = (split){test, 0, c->test_limit > 0 && c->test_limit < test->n ? c->test_limit : test->n};
  if (n_train / hvd_size() < c->batch_size * c->backward_passes) {
    char msg[160];
    snprintf(msg, sizeof msg, "%d training samples over %d ranks make less than one step of "
             "%d x %d", n_train, hvd_size(), c->batch_size, c->backward_passes);
    return fail("data", msg);
  }
  return 0;
}

/* OpenBLAS would start a thread per core in every rank; ranks sharing a
 * host share its cores instead (unless OPENBLAS_NUM_THREADS says). */
static void set_blas_threads(void) {
  if (getenv("OPENBLAS_NUM_THREADS")) return;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int local = hvd_local_size() > 0 ? hvd_local_size() : 1;
  int threads = cores > local ? (int)(cores / local) : 1;
  openblas_set_num_threads(threads);
}

static int train(const config *c) {
  trainer t = {.c = c};
  hvd_nn_dataset train_set = {0}, test_set = {0};
  int rc = load_splits(&t, &train_set, &test_set);
  if (rc == 0) {
    t.model = build_model(c->model, c->seed);
    t.opt = t.model ? build_optimizer(c, t.model) : NULL;
    if (!t.opt) rc = fail("model", hvd_nn_last_error());
  }
  hvd_nn_dist_opts dopts = HVD_NN_DIST_OPTS_INIT;
  dopts.op = c->op;
  dopts.compression = c->compression;
  dopts.backward_passes_per_step = c->backward_passes;
  dopts.average_aggregated_gradients = 1;
  dopts.gradient_predivide_factor = c->predivide;
  dopts.overlap = c->overlap;
  dopts.powersgd_rank = c->powersgd_rank;
  dopts.topk_ratio = c->topk_ratio;
  dopts.min_compression_rate = c->min_compression_rate;
  dopts.compression_seed = c->seed;
  /* An elastic run starts from rank 0's state through its first sync. */
  int64_t first = rc == 0 && !c->elastic ? start_state(&t) : 0;
  if (first < 0) rc = 1;
  if (rc == 0 && !(t.dist = hvd_nn_dist_new(t.opt, &dopts))) rc = fail("optimizer", hvd_nn_last_error());
  if (rc == 0 && (hvd_nn_sampler_init(&t.sampler, t.train.count, hvd_size(), hvd_rank(), c->seed) < 0 ||
                  batch_alloc(&t.buf, c->batch_size > c->test_batch_size ? c->batch_size
                                                                          : c->test_batch_size) < 0))
    rc = fail("setup", "out of memory");
  if (rc == 0)
    say(PROG ": %d ranks, model %s, %d samples per rank per step, lr %g -> %g\n", hvd_size(),
        c->model, c->batch_size * c->backward_passes, c->lr, c->lr * lr_scale(c));
  if (rc == 0 && c->elastic) {
    rc = run_elastic(&t); /* it evaluates the test set itself */
  } else if (rc == 0) {
    double test_loss, test_acc;
    rc = run_epochs(&t, first);
    if (rc == 0 &&
        evaluate(t.model, &t.test, &t.buf, c->test_batch_size, &test_loss, &test_acc) < 0)
      rc = fail("test", last_error());
    if (rc == 0) say("test_loss=%.4f\ntest_accuracy=%.4f\n", test_loss, test_acc);
  }
  hvd_nn_dist_free(t.dist);
  hvd_nn_sampler_free(&t.sampler);
  batch_free(&t.buf);
  hvd_nn_optimizer_free(t.opt);
  hvd_nn_model_free(t.model);
  hvd_nn_dataset_free(&train_set);
  hvd_nn_dataset_free(&test_set);
  return rc;
}

int main(int argc, char **argv) {
  if (hvd_init() < 0) return fail("init", hvd_last_error());
  rank0 = hvd_rank() == 0;
  config c;
  int parsed = parse_args(&c, argc, argv); /* 1 after --help */
  int status = parsed < 0 ? 2 : 0;
  if (parsed == 0) {
    set_blas_threads();
    status = train(&c);
  }
  hvd_shutdown();
  return status;
}
