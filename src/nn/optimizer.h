/*
 * optimizer.h -- what an optimizer kind (sgd.c, adam.c) gives the generic
 * optimizer (optimizer.c).
 *
 * A kind is its update rule for one parameter and a check of its
 * hyper-parameters.  optimizer.c owns the rest: the state buffers
 * ("slots") and their names, the step count, the hyper-parameters array
 * that broadcasts and checkpoints overwrite, and the loop over the model's
 * parameters.  Each step reads the hyper-parameters afresh from that array
 * (as float32 for the arithmetic), so an overwrite takes effect at once.
 */
#ifndef HVD_NN_OPTIMIZER_H
#define HVD_NN_OPTIMIZER_H

#include "nn_int.h"

#define HVD_NN__MAX_SLOTS 2 /* per parameter */

typedef struct {
  const char *const *slot_suffix; /* slot j of parameter P is "P.<slot_suffix[j]>" */
  /* 0 when hypers are valid for an optimizer with slots_per_param slots
   * per parameter, else HVD_E_INVALID with a message starting "where: ". */
  int (*check)(const double *hypers, int slots_per_param, const char *where);
  /* One step for one parameter: t is the step's number, from 1; slots are
   * the parameter's slots_per_param buffers of p->count floats. */
  void (*update)(const double *hypers, int64_t t, hvd_nn_param *p, float *const *slots);
} hvd_nn__optimizer_kind;

/* An optimizer of kind over m's parameters as they are now, with
 * slots_per_param zeroed slots for each.  NULL, with the message set, when
 * kind->check rejects hypers or memory runs out. */
hvd_nn_optimizer *hvd_nn__optimizer_new(hvd_nn_model *m, const hvd_nn__optimizer_kind *kind,
                                        const double hypers[HVD_NN_HYPERS], int slots_per_param,
                                        const char *where);

/* 0 when lo <= x < hi (so NaN, and infinity with hi = INFINITY, fail),
 * else HVD_E_INVALID with "where: <name> <x> is not in [lo, hi)". */
int hvd_nn__check_hyper(const char *where, const char *name, double x, double lo, double hi);

#endif /* HVD_NN_OPTIMIZER_H */
