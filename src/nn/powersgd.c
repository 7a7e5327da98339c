/*
 * powersgd.c -- PowerSGD's arithmetic on one matrix (Vogels, Karimireddy
 * and Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for
 * Distributed Optimization", NeurIPS 2019), in the order of torch's
 * PowerSGD communication hook:
 *
 *   M = grad + error          P = M Q        allreduce P (average)
 *   orthogonalise P           Q = M^T P      allreduce Q (average)
 *   approx = P Q^T            error = M - approx
 *
 * One power iteration per step, and Q carried to the next step (warm
 * start), so over steps it converges on M's leading right singular
 * vectors.  The collectives are lossy.c's; this file only computes.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "lossy.h"

int hvd_nn__psgd_init(hvd_nn__psgd *s, int rows, int cols, int rank, uint64_t seed) {
  int r = rank < rows ? rank : rows;
  if (cols < r) r = cols;
  size_t n = (size_t)rows * (size_t)cols;
  *s = (hvd_nn__psgd){.rows = rows, .cols = cols, .rank = r};
  s->m = malloc(n * sizeof *s->m);
  s->error = calloc(n, sizeof *s->error);
  s->p = malloc((size_t)rows * (size_t)r * sizeof *s->p);
  s->q = malloc((size_t)cols * (size_t)r * sizeof *s->q);
  if (!s->m || !s->error || !s->p || !s->q) {
    hvd_nn__psgd_free(s);
    return hvd_nn__err(HVD_E_NOMEM, "PowerSGD: buffers for a %d x %d matrix at rank %d", rows,
                       cols, r);
  }
  /* Any Q of full column rank works; what matters is that every rank
   * draws the same one, so the seed alone decides it. */
  hvd_nn__rng_seed(&s->rng, seed);
  for (size_t i = 0; i < (size_t)cols * (size_t)r; i++)
    s->q[i] = 2.0f * hvd_nn__rng_float(&s->rng) - 1.0f;
  return 0;
}

void hvd_nn__psgd_free(hvd_nn__psgd *s) {
  free(s->m);
  free(s->error);
  free(s->p);
  free(s->q);
  s->m = s->error = s->p = s->q = NULL;
}

/* Columns below this norm are treated as zero: 1 / norm must fit a float. */
#define TINY 1e-30

static double column_norm(const float *p, int rows, int rank, int i) {
  double sum = 0.0;
  for (int r = 0; r < rows; r++) sum += (double)p[r * rank + i] * p[r * rank + i];
  return sqrt(sum);
}

static void renormalize_q(hvd_nn__psgd *s) {
  for (int i = 0; i < s->rank; i++) {
    double norm = column_norm(s->q, s->cols, s->rank, i);
    int dead = !(norm > TINY) || !isfinite(norm);
    for (int c = 0; c < s->cols; c++) {
      float *v = &s->q[c * s->rank + i];
      *v = dead ? 2.0f * hvd_nn__rng_float(&s->rng) - 1.0f : (float)(*v / norm);
    }
  }
}

void hvd_nn__psgd_project(hvd_nn__psgd *s, const float *grad, float scale) {
  size_t n = (size_t)s->rows * (size_t)s->cols;
  renormalize_q(s);
  for (size_t i = 0; i < n; i++) s->m[i] = scale * grad[i] + s->error[i];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->rows, s->rank, s->cols, 1.0f, s->m,
              s->cols, s->q, s->rank, 0.0f, s->p, s->rank);
}

/* Gram-Schmidt, column by column, as torch's _orthogonalize: normalise
 * column i, then remove its component from every later column.  Dot
 * products in double: P's columns can be nearly parallel.  When M has
 * lower rank than P has columns (a small batch, full-rank settings), the
 * extra columns cancel down to rounding noise; normalising that noise
 * would give directions that are not orthogonal to the others, so a
 * column left with less than DROP of the largest starting norm is zeroed
 * instead.  Whatever it held goes to the error and out next step. */
#define DROP 1e-4
void hvd_nn__psgd_orthogonalize(float *p, int rows, int rank) {
  double largest = 0.0;
  for (int i = 0; i < rank; i++) largest = fmax(largest, column_norm(p, rows, rank, i));
  for (int i = 0; i < rank; i++) {
    double norm = column_norm(p, rows, rank, i);
    float inv = norm > DROP * largest && norm > TINY ? (float)(1.0 / norm) : 0.0f;
    for (int r = 0; r < rows; r++) p[r * rank + i] *= inv;
    for (int j = i + 1; j < rank; j++) {
      double dot = 0.0;
      for (int r = 0; r < rows; r++) dot += (double)p[r * rank + i] * p[r * rank + j];
      for (int r = 0; r < rows; r++) p[r * rank + j] -= (float)dot * p[r * rank + i];
    }
  }
}

void hvd_nn__psgd_backproject(hvd_nn__psgd *s) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->cols, s->rank, s->rows, 1.0f, s->m,
              s->cols, s->p, s->rank, 0.0f, s->q, s->rank);
}

void hvd_nn__psgd_decompress(hvd_nn__psgd *s, float *out) {
  for (int r = 0; r < s->rows; r++) {
    const float *pr = s->p + (size_t)r * (size_t)s->rank;
    for (int c = 0; c < s->cols; c++) {
      const float *qc = s->q + (size_t)c * (size_t)s->rank;
      float v = 0.0f;
      for (int k = 0; k < s->rank; k++) v += pr[k] * qc[k];
      size_t at = (size_t)r * (size_t)s->cols + (size_t)c;
      out[at] = v;
      s->error[at] = s->m[at] - v;
    }
  }
}
