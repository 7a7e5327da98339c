/*
 * nn_dist.c -- the DistributedOptimizer against single-process training.
 *
 * Every rank holds the whole (synthetic) data set, so besides its share of
 * the distributed run it can train a reference model on one process.  Step
 * s of the distributed run gives rank r, pass p the samples
 * [((s * passes + p) * size + r) * B, ... + B); the reference takes all of
 * step s's samples as one batch.  Averaged gradients of equal-sized batches
 * are the gradient of their union, so the two runs must agree up to float
 * rounding (summation order differs), for:
 *
 *   - SGD with momentum and Adam (np N with batch B == np 1 with batch N*B);
 *   - backward_passes_per_step 4 == a 4x larger batch;
 *   - op SUM (the reference scales its loss by N), gradient_predivide_factor;
 *   - overlap off == overlap on, bit for bit;
 *   - fp16 and bf16 compression, within the tolerance stated below, and
 *     fp16 training still converges;
 *   - Adasum: against the formula applied in double to every rank's
 *     gradient, paired (0,1),(2,3),... then pairs of pairs.
 *
 * After every distributed step all ranks must hold bitwise-identical
 * parameters (rank 0's hash is broadcast and compared).
 */
#include <math.h>
#include <string.h>

#include "nn_testing.h"

static int rank, size, checks, failures;

enum { FEATURES = 36, CLASSES = 3, SAMPLES = 8192, B = 8 };
static float data_x[SAMPLES * FEATURES];
static int data_y[SAMPLES];

/* Three classes around three random centres, plus noise: learnable. */
static void make_data(void) {
  for (int i = 0; i < SAMPLES; i++) {
    int y = (int)(mix((uint64_t)i) % CLASSES);
    data_y[i] = y;
    for (int j = 0; j < FEATURES; j++) {
      double centre = (double)(mix((uint64_t)(1000 + y * FEATURES + j)) % 2000) / 1000.0 - 1.0;
      double noise = (double)(mix((uint64_t)(i * FEATURES + j) + 77) % 2000) / 1000.0 - 1.0;
      data_x[i * FEATURES + j] = (float)(centre + 0.8 * noise);
    }
  }
}

/* A small CNN over 1x6x6 "images", so convolution is covered too. */
static hvd_nn_model *make_model(void) {
  hvd_nn_model *m = hvd_nn_model_new(1, 6, 6);
  CALL(m ? 0 : HVD_E_NOMEM);
  CALL(hvd_nn_add_conv2d(m, 4, 3, 1, 1));
  CALL(hvd_nn_add_relu(m));
  CALL(hvd_nn_add_maxpool(m, 2, 2));
  CALL(hvd_nn_add_dense(m, 8));
  CALL(hvd_nn_add_relu(m));
  CALL(hvd_nn_add_dense(m, CLASSES));
  CALL(hvd_nn_model_init(m, 1234));
  return m;
}

static hvd_nn_optimizer *make_opt(hvd_nn_model *m, int adam, float lr) {
  hvd_nn_optimizer *o = adam ? hvd_nn_adam_new(m, lr, 0.9f, 0.999f, 1e-8f)
                             : hvd_nn_sgd_new(m, lr, 0.9f, 0.0f);
  CALL(o ? 0 : HVD_E_NOMEM);
  return o;
}

/* Forward and softmax cross-entropy over samples [first, first + n);
 * dlogits scaled by scale.  Returns the loss. */
static float forward_loss(hvd_nn_model *m, int first, int n, float *dlogits, float scale) {
  const float *logits = hvd_nn_forward(m, data_x + (size_t)first * FEATURES, n);
  CALL(logits ? 0 : HVD_E_INVALID);
  float loss = hvd_nn_softmax_xent(logits, data_y + first, n, CLASSES, dlogits, NULL);
  for (int i = 0; i < n * CLASSES; i++) dlogits[i] *= scale;
  return loss;
}

static void check_same_everywhere(hvd_nn_model *m, const char *label, int step) {
  uint64_t mine = model_hash(m), root = mine;
  CALL(hvd_broadcast(&root, 1, HVD_INT64, 0, "check.hash"));
  CHECK(mine == root, "%s step %d: parameters differ from rank 0's", label, step);
}

static double max_diff(hvd_nn_model *a, hvd_nn_model *b) {
  double worst = 0.0;
  for (int i = 0; i < hvd_nn_num_params(a); i++) {
    hvd_nn_param *p = hvd_nn_param_at(a, i), *q = hvd_nn_param_at(b, i);
    for (size_t k = 0; k < p->count; k++) worst = fmax(worst, fabs((double)p->value[k] - q->value[k]));
  }
  return worst;
}

typedef struct {
  const char *label;
  int adam;
  hvd_nn_dist_opts o;
  int steps;
  double tol;          /* largest |distributed - reference| allowed per parameter */
} scenario;

/* One distributed step: passes batches of B, then step(). */
static void dist_step(hvd_nn_dist *d, hvd_nn_model *m, int s, int passes, float *dlogits) {
  hvd_nn_model_zero_grad(m);
  for (int p = 0; p < passes; p++) {
    forward_loss(m, ((s * passes + p) * size + rank) * B, B, dlogits, 1.0f);
    CALL(hvd_nn_dist_backward(d, dlogits));
  }
  CALL(hvd_nn_dist_step(d));
}

/* The same step on one process: one batch of every rank's samples. */
static void ref_step(hvd_nn_optimizer *o, hvd_nn_model *m, int s, int passes, float scale,
                     float *dlogits) {
  int n = passes * size * B;
  hvd_nn_model_zero_grad(m);
  forward_loss(m, s * n, n, dlogits, scale);
  CALL(hvd_nn_backward(m, dlogits, NULL, NULL));
  CALL(hvd_nn_optimizer_step(o));
}

/* Runs a scenario; returns the distributed model (the caller frees it). */
static double run(const scenario *sc, hvd_nn_model **dist_model) {
  int passes = sc->o.backward_passes_per_step;
  hvd_nn_model *m = make_model(), *ref = make_model();
  hvd_nn_optimizer *o = make_opt(m, sc->adam, 0.05f), *ro = make_opt(ref, sc->adam, 0.05f);
  CALL(hvd_nn_broadcast_parameters(m, 0));
  CALL(hvd_nn_broadcast_optimizer_state(o, 0));
  hvd_nn_dist *d = hvd_nn_dist_new(o, &sc->o);
  if (!d) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, sc->label, hvd_nn_last_error());
    exit(1);
  }
  /* What the distributed gradient is, in units of the reference's mean. */
  float scale = (sc->o.op == HVD_SUM ? (float)size : 1.0f) *
                (sc->o.average_aggregated_gradients ? 1.0f : (float)passes);
  float *dlogits = malloc((size_t)passes * size * B * CLASSES * sizeof *dlogits);
  for (int s = 0; s < sc->steps; s++) {
    dist_step(d, m, s, passes, dlogits);
    check_same_everywhere(m, sc->label, s);
    ref_step(ro, ref, s, passes, scale, dlogits);
  }
  double diff = max_diff(m, ref);
  CHECK(diff <= sc->tol, "%s: parameters differ from the single-process run by %g (> %g)",
        sc->label, diff, sc->tol);
  if (rank == 0) printf("%-36s max |dist - single| = %.3g (tolerance %g)\n", sc->label, diff, sc->tol);
  free(dlogits);
  hvd_nn_dist_free(d);
  hvd_nn_optimizer_free(o);
  hvd_nn_optimizer_free(ro);
  hvd_nn_model_free(ref);
  if (dist_model)
    *dist_model = m;
  else
    hvd_nn_model_free(m);
  return diff;
}

static hvd_nn_dist_opts opts_with(hvd_op op, hvd_nn_compression c, int passes, double predivide,
                                  int overlap) {
  hvd_nn_dist_opts o = HVD_NN_DIST_OPTS_INIT;
  o.op = op;
  o.compression = c;
  o.backward_passes_per_step = passes;
  o.average_aggregated_gradients = 1;
  o.gradient_predivide_factor = predivide;
  o.overlap = overlap;
  return o;
}

static void check_same_global_batch(void) {
  /* float32 summation order is all that differs: a few ulps per step. */
  const double tol = 2e-5;
  scenario cases[] = {
      {"sgd momentum", 0, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 1, 1.0, 1), 5, tol},
      {"adam", 1, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 1, 1.0, 1), 5, tol},
      {"sgd backward_passes_per_step 4", 0, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 4, 1.0, 1), 3, tol},
      {"adam backward_passes_per_step 4", 1, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 4, 1.0, 1), 3, tol},
      {"sgd op sum", 0, opts_with(HVD_SUM, HVD_NN_COMPRESS_NONE, 1, 1.0, 1), 3, tol},
      {"sgd gradient_predivide_factor 2", 0, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 1, 2.0, 1), 3, tol},
  };
  for (size_t i = 0; i < LEN(cases); i++) run(&cases[i], NULL);

  /* Summing 4 passes without averaging them: the reference's loss is 4x. */
  scenario sum_passes = {"sgd 4 passes, not averaged", 0,
                         opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 4, 1.0, 1), 3, tol};
  sum_passes.o.average_aggregated_gradients = 0;
  run(&sum_passes, NULL);
}

static void check_overlap_changes_nothing(void) {
  scenario on = {"overlap on", 1, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 1, 1.0, 1), 3, 2e-5};
  scenario off = on;
  off.label = "overlap off";
  off.o.overlap = 0;
  hvd_nn_model *a, *b;
  run(&on, &a);
  run(&off, &b);
  CHECK(model_hash(a) == model_hash(b), "overlap on and off give different parameters");
  hvd_nn_model_free(a);
  hvd_nn_model_free(b);
}

/* fp16 keeps 11 significant bits: each gradient element is off by up to
 * 2^-11 relative, each reduction step rounds again; over 5 SGD steps at
 * lr 0.05 the parameters stay within 1e-3 of float32 training.  bfloat16
 * keeps 8 bits: 1e-2.  Adam divides each gradient by its own running
 * magnitude, so where a gradient is tiny (fp16 flushes it, or rounds it
 * to a neighbour) the step of that element may change by up to lr: one
 * step's worth, 0.05, is allowed. */
static void check_compression(void) {
  scenario fp16 = {"sgd fp16 compression", 0, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_FP16, 1, 1.0, 1), 5, 1e-3};
  scenario bf16 = {"sgd bf16 compression", 0, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_BF16, 1, 1.0, 1), 5, 1e-2};
  scenario adam16 = {"adam fp16 compression", 1, opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_FP16, 1, 1.0, 1), 5, 0.05};
  run(&fp16, NULL);
  run(&bf16, NULL);
  run(&adam16, NULL);
}

/* And fp16 still trains: 150 steps take the loss well below chance. */
static void check_fp16_converges(void) {
  hvd_nn_model *m = make_model();
  hvd_nn_optimizer *o = make_opt(m, 0, 0.05f);
  hvd_nn_dist_opts opts = opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_FP16, 1, 1.0, 1);
  hvd_nn_dist *d = hvd_nn_dist_new(o, &opts);
  CALL(d ? 0 : HVD_E_INVALID);
  float dlogits[B * CLASSES];
  int steps = SAMPLES / (size * B);
  if (steps > 150) steps = 150;
  for (int s = 0; s < steps; s++) dist_step(d, m, s, 1, dlogits);
  float *all = malloc((size_t)1024 * CLASSES * sizeof *all);
  double first = log(CLASSES), loss = forward_loss(m, 0, 1024, all, 1.0f), avg;
  CALL(hvd_nn_metric_average(loss, "check.fp16.loss", &avg));
  CHECK(avg < 0.3 * first, "fp16 training: loss %.4f after %d steps (chance is %.4f)", avg, steps, first);
  if (rank == 0) printf("fp16 training: loss %.4f after %d steps (chance %.4f)\n", avg, steps, first);
  free(all);
  hvd_nn_dist_free(d);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

/* ---- Adasum ---- */

/* The pairwise combination, in double: a + b - (a.b / 2|a|^2) a - (a.b / 2|b|^2) b. */
static void adasum_pair(double *a, const double *b, size_t n) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  double ca = aa > 0 ? 1.0 - dot / (2 * aa) : 1.0, cb = bb > 0 ? 1.0 - dot / (2 * bb) : 1.0;
  for (size_t i = 0; i < n; i++) a[i] = ca * a[i] + cb * b[i];
}

/* Every rank's gradients at the reference's parameters, each rank's laid
 * out flat in g[r] (parameter after parameter). */
static void rank_grads(hvd_nn_model *ref, int s, double **g) {
  float dlogits[B * CLASSES];
  for (int r = 0; r < size; r++) {
    hvd_nn_model_zero_grad(ref);
    forward_loss(ref, (s * size + r) * B, B, dlogits, 1.0f);
    CALL(hvd_nn_backward(ref, dlogits, NULL, NULL));
    size_t at = 0;
    for (int pi = 0; pi < hvd_nn_num_params(ref); pi++) {
      hvd_nn_param *p = hvd_nn_param_at(ref, pi);
      for (size_t k = 0; k < p->count; k++) g[r][at++] = p->grad[k];
    }
  }
}

/* One reference step: per tensor, pairs (0,1),(2,3),... then pairs of
 * pairs, then plain SGD with the combined gradient. */
static void adasum_ref_step(hvd_nn_model *ref, int s, float lr, double **g) {
  rank_grads(ref, s, g);
  size_t at = 0;
  for (int pi = 0; pi < hvd_nn_num_params(ref); pi++) {
    hvd_nn_param *p = hvd_nn_param_at(ref, pi);
    for (int step = 1; step < size; step *= 2)
      for (int r = 0; r < size; r += 2 * step) adasum_pair(g[r] + at, g[r + step] + at, p->count);
    for (size_t k = 0; k < p->count; k++) p->value[k] -= lr * (float)g[0][at + k];
    at += p->count;
  }
}

static void check_adasum(void) {
  if (size & (size - 1)) return; /* power-of-two jobs only (test_adasum checks the error) */
  const float lr = 0.05f;
  hvd_nn_model *m = make_model(), *ref = make_model();
  hvd_nn_optimizer *o = hvd_nn_sgd_new(m, lr, 0.0f, 0.0f);
  hvd_nn_dist_opts opts = opts_with(HVD_ADASUM, HVD_NN_COMPRESS_NONE, 1, 1.0, 1);
  hvd_nn_dist *d = hvd_nn_dist_new(o, &opts);
  CALL(d ? 0 : HVD_E_INVALID);
  size_t total = 0;
  for (int pi = 0; pi < hvd_nn_num_params(ref); pi++) total += hvd_nn_param_at(ref, pi)->count;
  double *g[8];
  for (int r = 0; r < size; r++) g[r] = malloc(total * sizeof(double));
  float dlogits[B * CLASSES];
  for (int s = 0; s < 3; s++) {
    dist_step(d, m, s, 1, dlogits);
    check_same_everywhere(m, "adasum", s);
    adasum_ref_step(ref, s, lr, g);
  }
  double diff = max_diff(m, ref);
  CHECK(diff <= 1e-5, "adasum: parameters differ from the reference by %g", diff);
  if (rank == 0) printf("%-36s max |dist - reference| = %.3g (tolerance 1e-05)\n", "adasum", diff);
  for (int r = 0; r < size; r++) free(g[r]);
  hvd_nn_dist_free(d);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
  hvd_nn_model_free(ref);
}

/* ---- misuse ---- */

static void check_errors(void) {
  hvd_nn_model *m = make_model();
  hvd_nn_optimizer *o = make_opt(m, 0, 0.1f);
  hvd_nn_dist_opts bad = opts_with(HVD_ADASUM, HVD_NN_COMPRESS_FP16, 1, 1.0, 1);
  CHECK(hvd_nn_dist_new(o, &bad) == NULL, "adasum with fp16 compression accepted");
  CHECK(strstr(hvd_nn_last_error(), "Adasum") != NULL, "message: %s", hvd_nn_last_error());
  bad = opts_with(HVD_MAX, HVD_NN_COMPRESS_NONE, 1, 1.0, 1);
  CHECK(hvd_nn_dist_new(o, &bad) == NULL, "op max accepted");
  bad = opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 0, 1.0, 1);
  CHECK(hvd_nn_dist_new(o, &bad) == NULL, "backward_passes_per_step 0 accepted");

  hvd_nn_dist_opts ok = opts_with(HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 2, 1.0, 1);
  hvd_nn_dist *d = hvd_nn_dist_new(o, &ok);
  CALL(d ? 0 : HVD_E_INVALID);
  uint64_t before = model_hash(m);
  CHECK(hvd_nn_dist_step(d) == HVD_E_INVALID, "step before any backward pass");
  CHECK(strstr(hvd_nn_last_error(), "0 of 2") != NULL, "message: %s", hvd_nn_last_error());
  float dlogits[B * CLASSES];
  forward_loss(m, rank * B, B, dlogits, 1.0f);
  CALL(hvd_nn_dist_backward(d, dlogits));
  CHECK(hvd_nn_dist_step(d) == HVD_E_INVALID, "step after 1 of 2 passes");
  CHECK(model_hash(m) == before, "a refused step changed the parameters");
  forward_loss(m, rank * B, B, dlogits, 1.0f);
  CALL(hvd_nn_dist_backward(d, dlogits));
  CHECK(hvd_nn_dist_backward(d, dlogits) == HVD_E_INVALID, "a third pass before step");
  CALL(hvd_nn_dist_step(d));
  CHECK(model_hash(m) != before, "the step changed nothing");
  hvd_nn_dist_free(d);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

int main(void) {
  limit_stalls();
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  make_data();
  check_same_global_batch();
  check_overlap_changes_nothing();
  check_compression();
  check_fp16_converges();
  check_adasum();
  check_errors();
  int status = report_checks("nn_dist", rank, size, checks, failures);
  hvd_shutdown();
  return status;
}
