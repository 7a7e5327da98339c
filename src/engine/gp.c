/*
 * gp.c -- Gaussian process regression and expected improvement (gp.h).
 *
 * Fit: K[i][j] = k(x_i, x_j) + noise [i == j], K = L L^T (Cholesky),
 * alpha = K^-1 z with z the standardised scores.  Predict at x: with
 * k* = k(x_i, x), the mean is k*^T alpha and the variance k(x, x) - |v|^2
 * where L v = k*.  Expected improvement of a score above `best`, for a
 * normal posterior N(mu, sd^2): (mu - best - xi) Phi(u) + sd phi(u),
 * u = (mu - best - xi) / sd.
 */
#include <math.h>
#include <string.h>

#include "gp.h"

/* The kernel's length scale in the unit cube: a setting tells about
 * settings within about a quarter of a knob's range. */
#define LENGTH 0.25
/* Grid points per proposal search (about), and refinement rounds. */
#define GRID_POINTS 4096
#define REFINE_ROUNDS 3

void hvd__gp_init(hvd_gp *g, int d, double noise) {
  memset(g, 0, sizeof *g);
  g->d = d < 1 ? 1 : d > HVD_GP_MAX_DIMS ? HVD_GP_MAX_DIMS : d;
  g->noise = noise > 1e-9 ? noise : 1e-9;
  g->length = LENGTH;
  g->scale = 1;
}

int hvd__gp_add(hvd_gp *g, const double *x, double y) {
  if (g->n == HVD_GP_MAX_SAMPLES) return -1;
  for (int k = 0; k < g->d; k++) g->x[g->n][k] = x[k];
  g->y[g->n++] = y;
  return 0;
}

static double kernel(const hvd_gp *g, const double *a, const double *b) {
  double r2 = 0;
  for (int k = 0; k < g->d; k++) r2 += (a[k] - b[k]) * (a[k] - b[k]);
  return exp(-r2 / (2 * g->length * g->length));
}

/* Standardises the scores: mean 0, variance 1 (a flat set: scale 1). */
static void standardise(hvd_gp *g) {
  double sum = 0, sq = 0;
  for (int i = 0; i < g->n; i++) sum += g->y[i];
  g->mean = g->n ? sum / g->n : 0;
  for (int i = 0; i < g->n; i++) sq += (g->y[i] - g->mean) * (g->y[i] - g->mean);
  g->scale = g->n > 1 && sq > 0 ? sqrt(sq / g->n) : 1;
  if (g->scale < 1e-12 * (fabs(g->mean) + 1)) g->scale = 1;
}

/* L (lower) with L L^T = K; -1 if K is not positive definite. */
static int cholesky(hvd_gp *g) {
  for (int i = 0; i < g->n; i++)
    for (int j = 0; j <= i; j++) {
      double s = kernel(g, g->x[i], g->x[j]) + (i == j ? g->noise : 0);
      for (int k = 0; k < j; k++) s -= g->chol[i][k] * g->chol[j][k];
      if (i == j) {
        if (s <= 0) return -1;
        g->chol[i][i] = sqrt(s);
      } else {
        g->chol[i][j] = s / g->chol[j][j];
      }
    }
  return 0;
}

/* Solves L v = b in place (forward), then L^T v = b (backward) if `both`. */
static void solve(const hvd_gp *g, double *v, int both) {
  for (int i = 0; i < g->n; i++) {
    for (int k = 0; k < i; k++) v[i] -= g->chol[i][k] * v[k];
    v[i] /= g->chol[i][i];
  }
  for (int i = g->n - 1; both && i >= 0; i--) {
    for (int k = i + 1; k < g->n; k++) v[i] -= g->chol[k][i] * v[k];
    v[i] /= g->chol[i][i];
  }
}

int hvd__gp_fit(hvd_gp *g) {
  standardise(g);
  if (cholesky(g) < 0) return -1;
  for (int i = 0; i < g->n; i++) g->alpha[i] = (g->y[i] - g->mean) / g->scale;
  solve(g, g->alpha, 1);
  return 0;
}

void hvd__gp_predict(const hvd_gp *g, const double *x, double *mean, double *sd) {
  double ks[HVD_GP_MAX_SAMPLES], mu = 0, var = 1;
  for (int i = 0; i < g->n; i++) {
    ks[i] = kernel(g, g->x[i], x);
    mu += ks[i] * g->alpha[i];
  }
  solve(g, ks, 0);
  for (int i = 0; i < g->n; i++) var -= ks[i] * ks[i];
  *mean = g->mean + g->scale * mu;
  *sd = g->scale * sqrt(var > 1e-12 ? var : 1e-12);
}

double hvd__gp_expected_improvement(const hvd_gp *g, const double *x, double best, double xi) {
  double mu, sd;
  hvd__gp_predict(g, x, &mu, &sd);
  double gain = mu - best - xi, u = gain / sd;
  double cdf = 0.5 * erfc(-u / sqrt(2)), pdf = exp(-0.5 * u * u) / sqrt(2 * M_PI);
  return gain * cdf + sd * pdf;
}

int hvd__gp_best_sample(const hvd_gp *g) {
  int best = 0;
  double top = -INFINITY;
  for (int i = 0; i < g->n; i++) {
    double mu, sd;
    hvd__gp_predict(g, g->x[i], &mu, &sd);
    if (mu > top) top = mu, best = i;
  }
  return best;
}

/* Grid points per dimension for GRID_POINTS in all. */
static int per_dim(int d) {
  int k = 2;
  while (pow(k + 1, d) <= GRID_POINTS) k++;
  return k;
}

/* The best point of the grid of k^d points spaced `step` around centre
 * (clipped to the cube), into best; its improvement in *top. */
static void search(const hvd_gp *g, const double *centre, int k, double step, double incumbent,
                   double xi, double *best, double *top) {
  int idx[HVD_GP_MAX_DIMS] = {0};
  for (;;) {
    double x[HVD_GP_MAX_DIMS];
    for (int d = 0; d < g->d; d++) {
      x[d] = centre[d] + (idx[d] - (k - 1) / 2.0) * step;
      x[d] = x[d] < 0 ? 0 : x[d] > 1 ? 1 : x[d];
    }
    double ei = hvd__gp_expected_improvement(g, x, incumbent, xi);
    if (ei > *top) {
      *top = ei;
      memcpy(best, x, (size_t)g->d * sizeof *x);
    }
    int d = 0;
    while (d < g->d && ++idx[d] == k) idx[d++] = 0;
    if (d == g->d) return;
  }
}

void hvd__gp_propose(const hvd_gp *g, double *out) {
  double incumbent, sd, top = -1;
  hvd__gp_predict(g, g->x[hvd__gp_best_sample(g)], &incumbent, &sd);
  double xi = 0.01 * g->scale, centre[HVD_GP_MAX_DIMS];
  int k = per_dim(g->d);
  for (int d = 0; d < g->d; d++) centre[d] = out[d] = 0.5;
  search(g, centre, k, 1.0 / (k - 1), incumbent, xi, out, &top);
  double step = 1.0 / (k - 1);
  for (int r = 0; r < REFINE_ROUNDS; r++) {
    step /= 4;
    memcpy(centre, out, (size_t)g->d * sizeof *out);
    search(g, centre, 5, step, incumbent, xi, out, &top);
  }
}
