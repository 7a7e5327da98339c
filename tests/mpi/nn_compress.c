/*
 * nn_compress.c -- PowerSGD and top-k compression in the
 * DistributedOptimizer, across ranks.
 *
 * One dense layer (24 -> 10: a 10 x 24 weight, which is compressed, and a
 * bias of 10, which is not).  Rank r's gradient comes from its own inputs
 * and output gradients, which every rank can make, so each rank also
 * computes every other rank's gradient on a reference copy of the model
 * and builds the expected result itself:
 *
 *   - PowerSGD at full rank gives the plain average of the gradients;
 *   - PowerSGD at rank 1 sends less, but with error feedback what a step
 *     did not send goes out in the steps after: fed zero gradients, the
 *     sum of what arrives converges on the first step's average;
 *   - top-k gives the average of every rank's k largest-magnitude values,
 *     exactly, and the next step sends the largest of what was left;
 *   - the bias goes uncompressed: its plain average;
 *   - every rank ends with bitwise-identical gradients;
 *   - bad options fail with a message naming them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_testing.h"

static int rank, size, checks, failures;

enum { IN = 24, OUT = 10, BATCH = 4, W = IN * OUT };

static void rank_batch(int r, float *x, float *dout) {
  for (int i = 0; i < BATCH * IN; i++)
    x[i] = (float)((double)(mix((uint64_t)(r * 1000 + i)) % 2001) / 1000.0 - 1.0);
  for (int i = 0; i < BATCH * OUT; i++)
    dout[i] = (float)((double)(mix((uint64_t)(r * 1000 + 500 + i)) % 2001) / 1000.0 - 1.0);
}

static hvd_nn_model *make_model(void) {
  hvd_nn_model *m = hvd_nn_model_new(1, 1, IN);
  CALL(m ? 0 : HVD_E_NOMEM);
  CALL(hvd_nn_add_dense(m, OUT));
  CALL(hvd_nn_model_init(m, 99));
  return m;
}

/* Rank r's gradient (weight then bias, W + OUT values) times scale. */
static void rank_grad(hvd_nn_model *ref, int r, float scale, float *g) {
  float x[BATCH * IN], dout[BATCH * OUT];
  rank_batch(r, x, dout);
  for (int i = 0; i < BATCH * OUT; i++) dout[i] *= scale;
  hvd_nn_model_zero_grad(ref);
  CALL(hvd_nn_forward(ref, x, BATCH) ? 0 : HVD_E_INVALID);
  CALL(hvd_nn_backward(ref, dout, NULL, NULL));
  memcpy(g, hvd_nn_param_at(ref, 0)->grad, W * sizeof *g);
  memcpy(g + W, hvd_nn_param_at(ref, 1)->grad, OUT * sizeof *g);
}

/* One step of the distributed optimizer (lr 0, so the model stays put and
 * the reduced gradients stay readable); this rank's dout times scale. */
static void dist_step(hvd_nn_dist *d, hvd_nn_model *m, float scale, float *got) {
  float x[BATCH * IN], dout[BATCH * OUT];
  rank_batch(rank, x, dout);
  for (int i = 0; i < BATCH * OUT; i++) dout[i] *= scale;
  hvd_nn_model_zero_grad(m);
  CALL(hvd_nn_forward(m, x, BATCH) ? 0 : HVD_E_INVALID);
  CALL(hvd_nn_dist_backward(d, dout));
  CALL(hvd_nn_dist_step(d));
  memcpy(got, hvd_nn_param_at(m, 0)->grad, W * sizeof *got);
  memcpy(got + W, hvd_nn_param_at(m, 1)->grad, OUT * sizeof *got);
  uint64_t mine = fnv(got, (W + OUT) * sizeof *got), root = mine;
  CALL(hvd_broadcast(&root, 1, HVD_INT64, 0, "check.grad_hash"));
  CHECK(mine == root, "reduced gradients differ from rank 0's");
}

typedef struct {
  hvd_nn_model *m, *ref;
  hvd_nn_optimizer *opt;
  hvd_nn_dist *d;
} setup;

static setup make(const hvd_nn_dist_opts *o) {
  setup s = {make_model(), make_model(), NULL, NULL};
  s.opt = hvd_nn_sgd_new(s.m, 0.0f, 0.0f, 0.0f);
  s.d = s.opt ? hvd_nn_dist_new(s.opt, o) : NULL;
  if (!s.d) {
    fprintf(stderr, "rank %d: %s\n", rank, hvd_nn_last_error());
    exit(1);
  }
  return s;
}

static void unmake(setup *s) {
  hvd_nn_dist_free(s->d);
  hvd_nn_optimizer_free(s->opt);
  hvd_nn_model_free(s->m);
  hvd_nn_model_free(s->ref);
}

/* The plain average of every rank's gradient. */
static void average(hvd_nn_model *ref, float *avg) {
  float g[W + OUT];
  memset(avg, 0, (W + OUT) * sizeof *avg);
  for (int r = 0; r < size; r++) {
    rank_grad(ref, r, 1.0f, g);
    for (int i = 0; i < W + OUT; i++) avg[i] += g[i] / (float)size;
  }
}

static double max_abs_diff(const float *a, const float *b, int from, int to) {
  double worst = 0;
  for (int i = from; i < to; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
  return worst;
}

static void check_powersgd_full_rank(void) {
  hvd_nn_dist_opts o = HVD_NN_DIST_OPTS_INIT;
  o.compression = HVD_NN_COMPRESS_POWERSGD;
  o.powersgd_rank = OUT; /* min(10, 24): full rank */
  o.min_compression_rate = 0.0;
  setup s = make(&o);
  float got[W + OUT], want[W + OUT];
  average(s.ref, want);
  for (int step = 0; step < 2; step++) {
    dist_step(s.d, s.m, 1.0f, got);
    double diff = max_abs_diff(got, want, 0, W + OUT);
    CHECK(diff < 1e-4, "PowerSGD full rank, step %d: |got - average| = %g", step, diff);
  }
  unmake(&s);
}

static void check_powersgd_error_feedback(void) {
  hvd_nn_dist_opts o = HVD_NN_DIST_OPTS_INIT;
  o.compression = HVD_NN_COMPRESS_POWERSGD;
  o.powersgd_rank = 1;
  o.compression_seed = 5;
  setup s = make(&o);
  float got[W + OUT], want[W + OUT];
  double sent[W] = {0};
  average(s.ref, want);
  dist_step(s.d, s.m, 1.0f, got);
  for (int i = 0; i < W; i++) sent[i] += got[i];
  double first = 0, norm = 0;
  for (int i = 0; i < W; i++) {
    first = fmax(first, fabs(sent[i] - want[i]));
    norm = fmax(norm, fabs(want[i]));
  }
  CHECK(first > 1e-3 * norm, "rank 1 sent the whole gradient (%g): not compressed?", first);
  CHECK(max_abs_diff(got, want, W, W + OUT) < 1e-6, "the uncompressed bias is not the average");
  /* Zero gradients from now on: only the carried error goes out. */
  double left = first;
  for (int step = 1; step <= 40; step++) {
    dist_step(s.d, s.m, 0.0f, got);
    for (int i = 0; i < W; i++) sent[i] += got[i];
    left = 0;
    for (int i = 0; i < W; i++) left = fmax(left, fabs(sent[i] - want[i]));
  }
  if (rank == 0)
    printf("PowerSGD rank 1: first step misses %.3g, after 40 more %.3g (of %.3g)\n", first,
           left, norm);
  CHECK(left < 1e-3 * norm, "error feedback: after 40 zero steps %g of the first step's "
        "average is still unsent", left);
  unmake(&s);
}

/* ---- top-k ---- */

static const float *order_of;

static int by_magnitude(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  float mx = fabsf(order_of[x]), my = fabsf(order_of[y]);
  if (mx != my) return mx > my ? -1 : 1;
  return x - y;
}

/* Keeps the k largest of v (ties to the smaller index), zeroing the rest
 * into kept, and leaves the rest in v. */
static void ref_topk(float *v, int n, int k, float *kept) {
  int idx[W];
  for (int i = 0; i < n; i++) idx[i] = i;
  order_of = v;
  qsort(idx, (size_t)n, sizeof *idx, by_magnitude);
  memset(kept, 0, (size_t)n * sizeof *kept);
  for (int i = 0; i < k; i++) {
    kept[idx[i]] = v[idx[i]];
    v[idx[i]] = 0.0f;
  }
}

static void check_topk(void) {
  hvd_nn_dist_opts o = HVD_NN_DIST_OPTS_INIT;
  o.compression = HVD_NN_COMPRESS_TOPK;
  o.topk_ratio = 0.05; /* k = 12 of 240 */
  enum { K = 12 };
  setup s = make(&o);
  float (*m)[W + OUT] = malloc((size_t)size * sizeof *m); /* every rank's M */
  for (int r = 0; r < size; r++) rank_grad(s.ref, r, 1.0f, m[r]);
  float got[W + OUT], want[W + OUT], bias[W + OUT], kept[W];
  average(s.ref, bias);
  for (int step = 0; step < 3; step++) {
    /* step 0 sends each rank's top 12; later steps (zero gradients) the
     * top 12 of what each rank kept back */
    dist_step(s.d, s.m, step == 0 ? 1.0f : 0.0f, got);
    memset(want, 0, sizeof want);
    for (int r = 0; r < size; r++) {
      ref_topk(m[r], W, K, kept);
      for (int i = 0; i < W; i++) want[i] += kept[i];
    }
    for (int i = 0; i < W; i++) want[i] *= 1.0f / (float)size;
    double diff = max_abs_diff(got, want, 0, W);
    CHECK(diff == 0.0, "top-k step %d: |got - expected| = %g", step, diff);
    int nonzero = 0;
    for (int i = 0; i < W; i++) nonzero += got[i] != 0.0f;
    CHECK(nonzero >= K && nonzero <= K * size, "top-k step %d: %d values sent", step, nonzero);
    if (step == 0)
      CHECK(max_abs_diff(got, bias, W, W + OUT) < 1e-6, "the uncompressed bias is not the average");
  }
  free(m);
  unmake(&s);
}

static void expect_refused(hvd_nn_dist_opts o, const char *text) {
  hvd_nn_model *m = make_model();
  hvd_nn_optimizer *opt = hvd_nn_sgd_new(m, 0.1f, 0.0f, 0.0f);
  hvd_nn_dist *d = hvd_nn_dist_new(opt, &o);
  CHECK(d == NULL, "options accepted; expected '%s'", text);
  CHECK(strstr(hvd_nn_last_error(), text) != NULL, "message '%s' lacks '%s'",
        hvd_nn_last_error(), text);
  hvd_nn_dist_free(d);
  hvd_nn_optimizer_free(opt);
  hvd_nn_model_free(m);
}

static void check_errors(void) {
  hvd_nn_dist_opts o = HVD_NN_DIST_OPTS_INIT;
  o.compression = HVD_NN_COMPRESS_POWERSGD;
  o.op = HVD_SUM;
  expect_refused(o, "PowerSGD compression averages");
  o.op = HVD_AVERAGE;
  o.gradient_predivide_factor = 2.0;
  expect_refused(o, "factor 2");
  o.gradient_predivide_factor = 1.0;
  o.powersgd_rank = 0;
  expect_refused(o, "powersgd_rank 0");
  o = (hvd_nn_dist_opts)HVD_NN_DIST_OPTS_INIT;
  o.compression = HVD_NN_COMPRESS_TOPK;
  o.topk_ratio = 1.5;
  expect_refused(o, "topk_ratio 1.5");
  o.topk_ratio = 0.1;
  o.min_compression_rate = -1;
  expect_refused(o, "min_compression_rate -1");
}

int main(void) {
  limit_stalls();
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  check_powersgd_full_rank();
  check_powersgd_error_feedback();
  check_topk();
  check_errors();
  int status = report_checks("nn_compress", rank, size, checks, failures);
  hvd_shutdown();
  return status;
}
