/*
 * gp.h -- Gaussian process regression and expected improvement: the
 * autotuner's Bayesian optimisation (Horovod's optim/gaussian_process and
 * optim/bayesian_optimization), small enough to write by hand.
 *
 * Inputs are points of the unit cube [0,1]^d (the caller maps each knob
 * onto [0,1]), outputs are scores to maximise.  The kernel is the squared
 * exponential, exp(-|x - x'|^2 / (2 l^2)), over scores standardised to
 * mean 0 and variance 1, with `noise` added to its diagonal (Horovod's
 * HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE): measured throughput is noisy,
 * and the fit should not chase every sample.  A few dimensions and at most
 * HVD_GP_MAX_SAMPLES samples: a dense Cholesky factorisation is plenty.
 */
#ifndef HVD_GP_H
#define HVD_GP_H

#define HVD_GP_MAX_DIMS 4
#define HVD_GP_MAX_SAMPLES 64

typedef struct {
  int d, n;
  double noise, length;
  double x[HVD_GP_MAX_SAMPLES][HVD_GP_MAX_DIMS];
  double y[HVD_GP_MAX_SAMPLES];
  /* The fit (hvd__gp_fit): standardisation, the Cholesky factor of the
   * kernel matrix, and its inverse applied to the standardised scores. */
  double mean, scale;
  double chol[HVD_GP_MAX_SAMPLES][HVD_GP_MAX_SAMPLES];
  double alpha[HVD_GP_MAX_SAMPLES];
} hvd_gp;

/* An empty process over [0,1]^d (1 <= d <= HVD_GP_MAX_DIMS). */
void hvd__gp_init(hvd_gp *g, int d, double noise);

/* Adds a sample; 0, or -1 when there are HVD_GP_MAX_SAMPLES already. */
int hvd__gp_add(hvd_gp *g, const double *x, double y);

/* Fits the samples added so far; 0, or -1 when the kernel matrix is not
 * positive definite (cannot happen with noise > 0). */
int hvd__gp_fit(hvd_gp *g);

/* The posterior at x: mean and standard deviation, in score units. */
void hvd__gp_predict(const hvd_gp *g, const double *x, double *mean, double *sd);

/* Expected improvement at x over the best score `best`, with exploration
 * margin xi (in score units). */
double hvd__gp_expected_improvement(const hvd_gp *g, const double *x, double best, double xi);

/* The point with the greatest expected improvement over the best
 * posterior mean at the samples, searched on a grid of the cube (about
 * 4,000 points) and then refined around the winner; into out[0..d). */
void hvd__gp_propose(const hvd_gp *g, double *out);

/* The sample with the greatest posterior mean: the best setting, as
 * measured through the noise. */
int hvd__gp_best_sample(const hvd_gp *g);

#endif /* HVD_GP_H */
