/*
 * lossy.h -- gradient compression that changes the values it sends:
 * PowerSGD (powersgd.c) and top-k (topk.c), their arithmetic on one
 * tensor, and the driver (lossy.c) that takes one parameter's gradient
 * through hvd's collectives for the DistributedOptimizer (dist.c).
 *
 * Both keep error feedback: what a step did not send (the gradient plus
 * the carried error, minus what was reconstructed) is added to the next
 * step's gradient, so nothing is lost, only delayed.
 */
#ifndef HVD_NN_LOSSY_H
#define HVD_NN_LOSSY_H

#include "nn_int.h"

/* ---- PowerSGD on one rows x cols matrix (row-major) ---- */
typedef struct {
  int rows, cols, rank; /* rank <= min(rows, cols) */
  float *m;             /* rows x cols: this step's gradient + error */
  float *error;         /* rows x cols: what the last step did not send */
  float *p;             /* rows x rank */
  float *q;             /* cols x rank: kept across steps (warm start) */
  hvd_nn__rng rng;      /* draws Q's first values, and any column that died */
} hvd_nn__psgd;

/* rank is clamped to min(rows, cols).  Q is drawn uniformly in [-1, 1)
 * from seed alone, so ranks with the same seed start with the same Q. */
int hvd_nn__psgd_init(hvd_nn__psgd *s, int rows, int cols, int rank, uint64_t seed);
void hvd_nn__psgd_free(hvd_nn__psgd *s);
/* m = scale * grad + error; p = m q, after scaling q's columns to unit
 * norm (P's orthogonalisation makes the result independent of their
 * scale, and without it Q shrinks with the error until it underflows); a
 * column that has vanished is drawn afresh from the rng, which stays in
 * step on every rank because Q is the same everywhere. */
void hvd_nn__psgd_project(hvd_nn__psgd *s, const float *grad, float scale);
/* Gram-Schmidt on the columns of p (rows x rank, row-major), in place; a
 * column that cancels to (nearly) nothing is zeroed, not normalised. */
void hvd_nn__psgd_orthogonalize(float *p, int rows, int rank);
/* q = m^T p. */
void hvd_nn__psgd_backproject(hvd_nn__psgd *s);
/* out = p q^T; error = m - out.  Plain loops in a fixed order: equal p and
 * q give equal bits on every rank. */
void hvd_nn__psgd_decompress(hvd_nn__psgd *s, float *out);

/* ---- Top-k on one vector ---- */
/* k for n values and ratio: ceil(ratio * n), within [1, n]. */
size_t hvd_nn__topk_count(size_t n, double ratio);
/* The indices of the k values of largest magnitude, ascending in idx.  A
 * tie in magnitude goes to the smaller index; NaN counts as largest.
 * 0, or HVD_E_NOMEM. */
int hvd_nn__topk_select(const float *v, size_t n, size_t k, uint32_t *idx);

/* ---- One parameter's compressed reduction (lossy.c) ---- */
typedef struct hvd_nn__lossy hvd_nn__lossy;

/* The compressor of parameter p for o->compression, or NULL with *rc 0
 * when p goes uncompressed (a vector, or too small to gain), or NULL with
 * *rc < 0 on failure.  index makes each parameter's PowerSGD seed
 * distinct; name is the engine's base tensor name. */
hvd_nn__lossy *hvd_nn__lossy_new(const hvd_nn_dist_opts *o, hvd_nn_model *m, hvd_nn_param *p,
                                 int index, const char *name, int *rc);
void hvd_nn__lossy_free(hvd_nn__lossy *c);
/* Compresses p's gradient (times scale) and enqueues the first collective. */
int hvd_nn__lossy_start(hvd_nn__lossy *c, float scale, int process_set);
/* Waits for it; PowerSGD then orthogonalises P and enqueues Q's allreduce. */
int hvd_nn__lossy_middle(hvd_nn__lossy *c);
/* Waits for the last collective and writes the averaged reconstruction
 * into p's gradient, keeping this rank's error for the next step. */
int hvd_nn__lossy_finish(hvd_nn__lossy *c);
/* Waits for whatever is still in flight (after a failure), quietly. */
void hvd_nn__lossy_reset(hvd_nn__lossy *c);

#endif /* HVD_NN_LOSSY_H */
