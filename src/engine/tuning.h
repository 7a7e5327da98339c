/*
 * tuning.h -- the autotuner's side of the engine's cycle (tuning.c):
 * its part of the engine, and what the cycle calls.
 */
#ifndef HVD_ENGINE_TUNING_H
#define HVD_ENGINE_TUNING_H

#include "autotune.h"
#include "engine.h"
#include "message.h"

struct response;

/* The autotuner's part: whether it runs (rank 0's setting), rank 0's
 * tuner, the settings it asked for and not sent yet, and every change
 * applied (under core.lock, for tests). */
typedef struct {
  int on;
  hvd_autotune *tuner;
  int send;
  hvd_msg_settings next;
  hvd_tune_change *log;
  int nlog;
} hvd__tuning;

int hvd__tuning_start(struct hvd_engine *e);
/* Rank 0: a response ran; its tensors feed the tuner. */
void hvd__tuning_record(hvd__tuning *t, const struct response *r);
/* Rank 0: settings to send go into its message; 1 if they did. */
int hvd__tuning_message(hvd__tuning *t, hvd_msg *mine);
/* Every rank: rank 0's settings in this cycle's messages take effect. */
int hvd__tuning_apply(struct hvd_engine *e, const hvd_msg *msgs);
void hvd__tuning_free(hvd__tuning *t);

#endif /* HVD_ENGINE_TUNING_H */
