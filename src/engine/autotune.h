/*
 * autotune.h -- the engine's autotuner (HOROVOD_AUTOTUNE=1, Horovod's
 * knobs and names): it tunes the fusion threshold, the cycle time, the
 * response cache and the hierarchical allreduce from the bytes per second
 * the engine achieves, on rank 0, whose choices every rank applies at the
 * same cycle (cycle.c carries them in rank 0's negotiation message).
 *
 * Measuring.  A training loop repeats: the first tensor to run after a
 * setting applies marks the steps, each step lasting until it runs again.
 * A sample is HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE steps; its score is the
 * median over them of the bytes reduced per second (the median shrugs off
 * a step a noisy neighbour slowed).
 *
 * Tuning, as Horovod's ParameterManager: HOROVOD_AUTOTUNE_WARMUP_SAMPLES
 * samples are thrown away; then Bayesian optimisation (gp.h) of the
 * fusion threshold and the cycle time together, starting at the job's
 * settings and three fixed points, then expected improvement's proposals,
 * HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES samples in all; then each
 * categorical knob that can change (hierarchical allreduce, response
 * cache) is measured both ways, one sample each.  The best applies.
 *
 * Beyond Horovod: after settling it keeps measuring.  The median of the
 * first three samples with the best settings is the reference; three
 * samples in a row more than HOROVOD_AUTOTUNE_RETUNE_DROP below it (the
 * workload changed) start the tuning again from the current best, and the
 * log says when and why.
 *
 * The log (HOROVOD_AUTOTUNE_LOG, rank 0): a CSV line per sample,
 *   sample,phase,fusion_threshold_mb,cycle_time_ms,cache_enabled,
 *   hierarchical_allreduce,score_bytes_per_s,note
 * phase: warmup, bayes, categorical, settled (the chosen settings'
 * reference samples), watch, retune (the sample that triggered it).
 */
#ifndef HVD_AUTOTUNE_H
#define HVD_AUTOTUNE_H

#include <stdint.h>

/* The knobs. */
typedef struct {
  double fusion_mb; /* HOROVOD_FUSION_THRESHOLD in MiB (0: no fusion) */
  double cycle_ms;  /* HOROVOD_CYCLE_TIME */
  int cache_on;     /* the response cache's fast path */
  int hierarchical; /* HOROVOD_HIERARCHICAL_ALLREDUCE */
} hvd_tune;

typedef struct {
  int warmup_samples, steps_per_sample, max_samples;
  double noise;         /* HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE */
  double retune_drop;   /* HOROVOD_AUTOTUNE_RETUNE_DROP */
  int tune_cache, tune_hierarchical; /* whether these may change */
  const char *log_path; /* NULL: no log */
} hvd_autotune_config;

typedef struct hvd_autotune hvd_autotune;

/* Starts tuning from `start` (which applies now). */
int hvd__autotune_create(const hvd_autotune_config *cfg, const hvd_tune *start,
                         hvd_autotune **out);
void hvd__autotune_destroy(hvd_autotune *a);

/* A tensor of `bytes` named by `name_hash` ran at time `now` (seconds).
 * 1 when a sample ended and other settings are to apply (*next); until
 * hvd__autotune_applied says they do, tensors are not counted. */
int hvd__autotune_tensor(hvd_autotune *a, uint64_t name_hash, uint64_t bytes, double now,
                         hvd_tune *next);

/* The settings asked for last apply from now on (every rank, this cycle). */
void hvd__autotune_applied(hvd_autotune *a, double now);

/* Samples measured so far, and whether tuning has settled (for tests). */
int hvd__autotune_samples(const hvd_autotune *a);
int hvd__autotune_settled(const hvd_autotune *a);

#endif /* HVD_AUTOTUNE_H */
