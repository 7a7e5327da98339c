/*
 * optimizer.c -- what every optimizer has: its state buffers ("slots"),
 * their names, the step count and the hyper-parameters, and the step loop
 * over the model's parameters.  The kinds (sgd.c, adam.c) supply the
 * update rule (optimizer.h).
 *
 * Slots are laid out parameter by parameter, in the model's parameter
 * order: slots[i * slots_per_param + j] is slot j of parameter i.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer.h"

typedef struct {
  char *name;
  float *data;
  size_t count;
} slot;

struct hvd_nn_optimizer {
  const hvd_nn__optimizer_kind *kind;
  hvd_nn_model *model;
  int num_params; /* the model's when the optimizer was made */
  int slots_per_param;
  int num_slots;
  slot *slots;
  int64_t steps;
  double hypers[HVD_NN_HYPERS];
};

int hvd_nn__check_hyper(const char *where, const char *name, double x, double lo, double hi) {
  if (x >= lo && x < hi) return 0;
  return hvd_nn__err(HVD_E_INVALID, "%s: %s %g is not in [%g, %g)", where, name, x, lo, hi);
}

void hvd_nn_optimizer_free(hvd_nn_optimizer *o) {
  if (!o) return;
  for (int i = 0; i < o->num_slots; i++) {
    free(o->slots[i].name);
    free(o->slots[i].data);
  }
  free(o->slots);
  free(o);
}

/* Names and allocates slot j of parameter p. */
static int make_slot(slot *s, const hvd_nn_param *p, const char *suffix) {
  size_t len = strlen(p->name) + 1 + strlen(suffix) + 1;
  s->name = malloc(len);
  s->data = calloc(p->count, sizeof *s->data);
  s->count = p->count;
  if (!s->name || !s->data) return HVD_E_NOMEM;
  snprintf(s->name, len, "%s.%s", p->name, suffix);
  return 0;
}

hvd_nn_optimizer *hvd_nn__optimizer_new(hvd_nn_model *m, const hvd_nn__optimizer_kind *kind,
                                        const double hypers[HVD_NN_HYPERS], int slots_per_param,
                                        const char *where) {
  if (!m) {
    hvd_nn__err(HVD_E_INVALID, "%s: model is NULL", where);
    return NULL;
  }
  if (kind->check(hypers, slots_per_param, where) < 0) return NULL;
  hvd_nn_optimizer *o = calloc(1, sizeof *o);
  const int num_params = hvd_nn_num_params(m);
  if (!o) goto nomem;
  o->kind = kind;
  o->model = m;
  o->num_params = num_params;
  o->slots_per_param = slots_per_param;
  memcpy(o->hypers, hypers, sizeof o->hypers);
  if (num_params * slots_per_param > 0) {
    o->slots = calloc((size_t)num_params * (size_t)slots_per_param, sizeof *o->slots);
    if (!o->slots) goto nomem;
    for (int i = 0; i < num_params; i++) {
      for (int j = 0; j < slots_per_param; j++) {
        /* counted first, so that free() sees a half-made slot */
        slot *s = &o->slots[o->num_slots++];
        if (make_slot(s, hvd_nn_param_at(m, i), kind->slot_suffix[j]) < 0) goto nomem;
      }
    }
  }
  return o;
nomem:
  hvd_nn_optimizer_free(o);
  hvd_nn__err(HVD_E_NOMEM, "%s: out of memory", where);
  return NULL;
}

int hvd_nn_optimizer_step(hvd_nn_optimizer *o) {
  if (!o) return hvd_nn__err(HVD_E_INVALID, "hvd_nn_optimizer_step: optimizer is NULL");
  const int n = hvd_nn_num_params(o->model);
  if (n != o->num_params)
    return hvd_nn__err(HVD_E_INVALID,
                       "hvd_nn_optimizer_step: the model has %d parameters, the optimizer was "
                       "made for %d",
                       n, o->num_params);
  HVD_NN__CHECK(o->kind->check(o->hypers, o->slots_per_param, "hvd_nn_optimizer_step"));
  const int64_t t = o->steps + 1;
  for (int i = 0; i < n; i++) {
    float *slots[HVD_NN__MAX_SLOTS] = {NULL};
    for (int j = 0; j < o->slots_per_param; j++)
      slots[j] = o->slots[i * o->slots_per_param + j].data;
    o->kind->update(o->hypers, t, hvd_nn_param_at(o->model, i), slots);
  }
  o->steps = t;
  return 0;
}

hvd_nn_model *hvd_nn_optimizer_model(hvd_nn_optimizer *o) { return o ? o->model : NULL; }

float hvd_nn_optimizer_lr(const hvd_nn_optimizer *o) { return o ? (float)o->hypers[0] : 0.0f; }

void hvd_nn_optimizer_set_lr(hvd_nn_optimizer *o, float lr) {
  if (o) o->hypers[0] = lr;
}

int hvd_nn_optimizer_num_slots(const hvd_nn_optimizer *o) {
  if (!o) return hvd_nn__err(HVD_E_INVALID, "hvd_nn_optimizer_num_slots: optimizer is NULL");
  return o->num_slots;
}

float *hvd_nn_optimizer_slot(hvd_nn_optimizer *o, int i, size_t *count, const char **name) {
  if (!o || i < 0 || i >= o->num_slots) {
    hvd_nn__err(HVD_E_INVALID, "hvd_nn_optimizer_slot: index %d is not in [0, %d)", i,
                o ? o->num_slots : 0);
    return NULL;
  }
  if (count) *count = o->slots[i].count;
  if (name) *name = o->slots[i].name;
  return o->slots[i].data;
}

int64_t *hvd_nn_optimizer_steps(hvd_nn_optimizer *o) { return o ? &o->steps : NULL; }

double *hvd_nn_optimizer_hypers(hvd_nn_optimizer *o) { return o ? o->hypers : NULL; }
