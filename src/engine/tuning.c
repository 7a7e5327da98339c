/*
 * tuning.c -- the engine's side of the autotuner (autotune.h): reading
 * its knobs, feeding it what ran, and carrying its choices to every rank.
 *
 * Rank 0 alone tunes.  Its tuner sees every tensor this rank runs; when a
 * sample ends it asks for other settings, which go out in rank 0's next
 * negotiation message (that cycle takes the full exchange, so every rank
 * has it), and every rank applies them in that cycle, before it plans:
 * fusion threshold, cycle time, the response cache's fast path and the
 * hierarchical allreduce change everywhere between the same two cycles,
 * so every rank fuses, paces and reduces alike.  Every change is kept
 * with its cycle number, which a test compares across ranks.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env.h"
#include "hash.h"
#include "engine_int.h"

#define MIB (1024.0 * 1024.0)
#define HISTORY_MAX 1024

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static hvd_tune current(const hvd_engine *e) {
  return (hvd_tune){(double)e->fusion_threshold / MIB, e->cycle_ms, e->fast.on,
                    e->global && e->global->hierarchical};
}

int hvd__tuning_start(hvd_engine *e) {
  hvd_autotune_config cfg = {0};
  long warmup, steps, samples;
  HVD__CHECK(hvd__param_int(HVD_P_AUTOTUNE_WARMUP_SAMPLES, &warmup));
  HVD__CHECK(hvd__param_int(HVD_P_AUTOTUNE_STEPS_PER_SAMPLE, &steps));
  HVD__CHECK(hvd__param_int(HVD_P_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, &samples));
  HVD__CHECK(hvd__param_double(HVD_P_AUTOTUNE_GAUSSIAN_PROCESS_NOISE, &cfg.noise));
  HVD__CHECK(hvd__param_double(HVD_P_AUTOTUNE_RETUNE_DROP, &cfg.retune_drop));
  if (!e->tuning.on || e->rank != 0) return 0;
  cfg.warmup_samples = (int)warmup;
  cfg.steps_per_sample = (int)steps;
  cfg.max_samples = (int)samples;
  cfg.tune_cache = hvd__cache_capacity(e->cache) > 0;
  cfg.tune_hierarchical = e->global && e->global->local != NULL;
  cfg.log_path = hvd__param_raw(HVD_P_AUTOTUNE_LOG);
  hvd_tune start = current(e);
  return hvd__autotune_create(&cfg, &start, &e->tuning.tuner);
}

/* Bytes a tensor moved, as Horovod's autotuner counts them. */
static uint64_t bytes_of(const pending *p) {
  size_t es = hvd_dtype_size((hvd_dtype)p->req.dtype);
  if (p->req.type == HVD_REQ_ALLGATHER) return p->mine ? p->mine->w.local_count * es : 0;
  if (p->req.type == HVD_REQ_ALLTOALL || p->req.type >= HVD_REQ_BARRIER) return 0;
  return p->req.count * es;
}

void hvd__tuning_record(hvd__tuning *t, const response *r) {
  hvd_tune next;
  if (!t->tuner || r->error) return;
  double now = now_s();
  for (int i = 0; i < r->n; i++)
    if (hvd__autotune_tensor(t->tuner, hvd__hash_str(r->items[i]->req.name),
                             bytes_of(r->items[i]), now, &next)) {
      t->send = 1;
      t->next = (hvd_msg_settings){(uint64_t)(next.fusion_mb * MIB), next.cycle_ms,
                                   (uint8_t)next.cache_on, (uint8_t)next.hierarchical};
    }
}

int hvd__tuning_message(hvd__tuning *t, hvd_msg *mine) {
  if (!t->send) return 0;
  mine->flags |= HVD_MSG_SETTINGS;
  mine->settings = t->next;
  t->send = 0;
  return 1;
}

static void remember(hvd_engine *e, const hvd_msg_settings *s) {
  pthread_mutex_lock(&e->core.lock);
  if (e->tuning.nlog < HISTORY_MAX) {
    hvd_tune_change *c = realloc(e->tuning.log, (size_t)(e->tuning.nlog + 1) * sizeof *c);
    if (c) {
      e->tuning.log = c;
      c[e->tuning.nlog++] = (hvd_tune_change){e->cycle, *s};
    }
  }
  e->cycle_ms = s->cycle_ms; /* the waiting threads read it under the lock */
  pthread_mutex_unlock(&e->core.lock);
}

int hvd__tuning_apply(hvd_engine *e, const hvd_msg *msgs) {
  for (int q = 1; q < e->size; q++)
    if (msgs[q].flags & HVD_MSG_SETTINGS)
      return hvd__err(HVD_E_PROTOCOL, "rank %d sent autotune settings; only rank 0 tunes", q);
  if (!(msgs[0].flags & HVD_MSG_SETTINGS)) return 0;
  const hvd_msg_settings *s = &msgs[0].settings;
  e->fusion_threshold = (size_t)s->fusion_bytes;
  e->fast.on = s->cache_on && hvd__cache_capacity(e->cache) > 0;
  if (e->global && e->global->local) e->global->hierarchical = s->hierarchical;
  remember(e, s);
  if (e->tuning.tuner) hvd__autotune_applied(e->tuning.tuner, now_s());
  return 0;
}

void hvd__tuning_free(hvd__tuning *t) {
  hvd__autotune_destroy(t->tuner);
  free(t->log);
}

int hvd__engine_tune_history(hvd_engine *e, hvd_tune_change *out, int cap) {
  pthread_mutex_lock(&e->core.lock);
  int n = e->tuning.nlog < cap ? e->tuning.nlog : cap;
  if (out && n > 0) memcpy(out, e->tuning.log, (size_t)n * sizeof *out);
  n = e->tuning.nlog;
  pthread_mutex_unlock(&e->core.lock);
  return n;
}
