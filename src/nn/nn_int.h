/*
 * nn_int.h -- what the modules of libhvd_nn share.  Internal names start
 * with hvd_nn__.  libhvd_nn sits above libhvd and uses only its public API
 * (hvd.h), so it keeps its own error messages.
 */
#ifndef HVD_NN_INT_H
#define HVD_NN_INT_H

#include "hvd_nn.h"

#define HVD_NN__PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Sets this thread's hvd_nn message and returns code (a negative HVD_E_*). */
int hvd_nn__err(int code, const char *fmt, ...) HVD_NN__PRINTF(2, 3);

/* Like hvd_nn__err, appending ": <strerror(errnum)>". */
int hvd_nn__err_sys(int code, int errnum, const char *fmt, ...) HVD_NN__PRINTF(3, 4);

/* A failed hvd_* call: copies hvd_last_error() after "<what>: " into this
 * thread's hvd_nn message and returns code. */
int hvd_nn__err_hvd(int code, const char *fmt, ...) HVD_NN__PRINTF(2, 3);

/* Clears this thread's message. */
void hvd_nn__err_clear(void);

#define HVD_NN__CHECK(expr)                \
  do {                                     \
    int hvd_nn__rc_ = (expr);              \
    if (hvd_nn__rc_ < 0) return hvd_nn__rc_; \
  } while (0)

/* ---- Random numbers (rng.c) ----
 * SplitMix64: small, fast, and the same bits on every machine, which is all
 * initialisation and shuffling need (not cryptographic). */
typedef struct {
  uint64_t state;
} hvd_nn__rng;

void hvd_nn__rng_seed(hvd_nn__rng *r, uint64_t seed);
uint64_t hvd_nn__rng_next(hvd_nn__rng *r);
/* Uniform in [0, 1) with 24 random bits (exact in float). */
float hvd_nn__rng_float(hvd_nn__rng *r);
/* Uniform integer in [0, bound), bound > 0, without modulo bias. */
uint64_t hvd_nn__rng_below(hvd_nn__rng *r, uint64_t bound);

/* ---- Shapes (model.c) ----
 * 1 and the matrix view (rows = output units, cols = fan_in) when p is a
 * layer's weight; 0 when p is a vector (a bias) or not m's. */
int hvd_nn__param_matrix(const hvd_nn_model *m, const hvd_nn_param *p, int *rows, int *cols);

#endif /* HVD_NN_INT_H */
