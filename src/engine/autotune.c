/*
 * autotune.c -- the autotuner's measuring and its search (autotune.h).
 *
 * The two continuous knobs live on the unit square for the Gaussian
 * process, on log scales: x0 = log2(1 + fusion MiB) / 8 (0 to 255 MiB, 0
 * meaning no fusion) and x1 = log(cycle / 0.1 ms) / log(250) (0.1 to
 * 25 ms).  Both matter by orders of magnitude, not by steps.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "autotune.h"
#include "gp.h"

#define FUSION_LOG2_MAX 8.0
#define CYCLE_MIN_MS 0.1
#define CYCLE_RANGE 250.0
#define BASELINE_SAMPLES 3 /* the reference after settling: their median */
#define LOW_SAMPLES 3      /* samples in a row below it before re-tuning */
#define MARKER_LOST_S 10.0 /* the step marker not seen this long: pick another */
#define MAX_STEPS 1000

enum { WARMUP, BAYES, CATEGORICAL, SETTLED, WATCH };
static const char *const phase_names[] = {"warmup", "bayes", "categorical", "settled", "watch"};

/* Where the search starts, after the job's own settings (Horovod starts
 * from four fixed points too). */
static const hvd_tune fixed_points[] = {{32, 1, 1, 0}, {128, 0.3, 1, 0}, {4, 5, 1, 0}};
#define NFIXED (int)(sizeof fixed_points / sizeof fixed_points[0])

struct hvd_autotune {
  hvd_autotune_config cfg;
  FILE *log;
  hvd_tune cur, best;
  int phase, waiting, sample;
  /* the sample being measured */
  uint64_t marker;
  int have_marker, step_open, nrates;
  double step_start, last_marker, rates[MAX_STEPS];
  uint64_t step_bytes;
  char note[160]; /* goes with the next log line */
  /* the phases' state */
  int warmup_left;
  hvd_gp gp;
  int knob, value;   /* categorical: knob 0 hierarchical, 1 cache; value tried */
  double tried[2];
  double baseline[BASELINE_SAMPLES], reference;
  int nbaseline, low;
};

/* ---- the knobs on the unit square ---- */

static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static void to_unit(const hvd_tune *t, double *x) {
  x[0] = clamp01(log2(1 + t->fusion_mb) / FUSION_LOG2_MAX);
  x[1] = clamp01(log(t->cycle_ms / CYCLE_MIN_MS) / log(CYCLE_RANGE));
}

static void from_unit(const double *x, hvd_tune *t) {
  t->fusion_mb = round((exp2(x[0] * FUSION_LOG2_MAX) - 1) * 16) / 16; /* 64 KiB steps */
  t->cycle_ms = round(CYCLE_MIN_MS * pow(CYCLE_RANGE, x[1]) * 1000) / 1000;
}

static int same(const hvd_tune *a, const hvd_tune *b) {
  return a->fusion_mb == b->fusion_mb && a->cycle_ms == b->cycle_ms &&
         a->cache_on == b->cache_on && a->hierarchical == b->hierarchical;
}

/* ---- the log ---- */

static void log_sample(hvd_autotune *a, const char *phase, double score) {
  if (!a->log) return;
  fprintf(a->log, "%d,%s,%.4f,%.4f,%d,%d,%.6g,%s\n", a->sample, phase,
          a->cur.fusion_mb, a->cur.cycle_ms, a->cur.cache_on, a->cur.hierarchical, score,
          a->note);
  fflush(a->log);
  a->note[0] = '\0';
}

static void say(const char *what, const hvd_tune *t, double score) {
  hvd__log(HVD_LOG_INFO, "autotune: %s: fusion threshold %.4g MiB, cycle time %.4g ms, "
           "response cache %s, hierarchical allreduce %s (%.3g GB/s)", what, t->fusion_mb,
           t->cycle_ms, t->cache_on ? "on" : "off", t->hierarchical ? "on" : "off", score / 1e9);
}

/* ---- choosing what to measure next ---- */

/* Asks for t: 1 with *next when it differs from what runs, else 0 (the
 * next sample simply goes on with the same settings). */
static int ask(hvd_autotune *a, const hvd_tune *t, hvd_tune *next) {
  a->nrates = 0;
  a->step_open = 0;
  if (same(t, &a->cur)) return 0;
  a->cur = *next = *t;
  a->waiting = 1;
  return 1;
}

/* The continuous knobs of point i of the search (the job's settings,
 * the fixed points, then expected improvement's), with the categorical
 * ones as they are. */
static void bayes_point(hvd_autotune *a, int i, hvd_tune *t) {
  *t = a->best;
  if (i > 0 && i <= NFIXED) {
    t->fusion_mb = fixed_points[i - 1].fusion_mb;
    t->cycle_ms = fixed_points[i - 1].cycle_ms;
  } else if (i > NFIXED) {
    double x[2];
    if (hvd__gp_fit(&a->gp) == 0) hvd__gp_propose(&a->gp, x);
    else to_unit(&a->best, x);
    from_unit(x, t);
  }
}

/* The categorical knob k's value in t. */
static int *knob_of(hvd_tune *t, int k) { return k == 0 ? &t->hierarchical : &t->cache_on; }
static int knob_tunable(const hvd_autotune *a, int k) {
  return k == 0 ? a->cfg.tune_hierarchical : a->cfg.tune_cache;
}

/* The next categorical knob to measure from k on, or settle. */
static int next_knob(hvd_autotune *a, int k, hvd_tune *next) {
  while (k < 2 && !knob_tunable(a, k)) k++;
  hvd_tune t = a->best;
  if (k < 2) {
    a->phase = CATEGORICAL;
    a->knob = k;
    a->value = 0;
    *knob_of(&t, k) = 0;
    return ask(a, &t, next);
  }
  a->phase = SETTLED;
  a->nbaseline = 0;
  say("settled", &a->best, a->tried[0] > a->tried[1] ? a->tried[0] : a->tried[1]);
  return ask(a, &a->best, next);
}

static int bayes_done(hvd_autotune *a, hvd_tune *next) {
  hvd__gp_fit(&a->gp);
  from_unit(a->gp.x[hvd__gp_best_sample(&a->gp)], &a->best);
  a->tried[0] = a->tried[1] = a->gp.y[hvd__gp_best_sample(&a->gp)];
  return next_knob(a, 0, next);
}

static int bayes_sample(hvd_autotune *a, double score, hvd_tune *next) {
  double x[2];
  to_unit(&a->cur, x);
  hvd__gp_add(&a->gp, x, score);
  if (a->gp.n >= a->cfg.max_samples || a->gp.n == HVD_GP_MAX_SAMPLES) return bayes_done(a, next);
  hvd_tune t;
  bayes_point(a, a->gp.n, &t);
  return ask(a, &t, next);
}

static int categorical_sample(hvd_autotune *a, double score, hvd_tune *next) {
  a->tried[a->value] = score;
  if (a->value == 0) {
    hvd_tune t = a->cur;
    *knob_of(&t, a->knob) = 1;
    a->value = 1;
    return ask(a, &t, next);
  }
  *knob_of(&a->best, a->knob) = a->tried[1] > a->tried[0];
  return next_knob(a, a->knob + 1, next);
}

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Tuning starts again from the best settings (a re-tune). */
static int restart(hvd_autotune *a, hvd_tune *next) {
  hvd__gp_init(&a->gp, 2, a->cfg.noise);
  a->phase = BAYES;
  a->low = 0;
  return ask(a, &a->best, next);
}

/* After settling: the reference, then the watch for a drop.  1 when the
 * drop calls for tuning again (the note says why). */
static int watch(hvd_autotune *a, double score) {
  if (a->phase == SETTLED) {
    a->baseline[a->nbaseline++] = score;
    if (a->nbaseline == BASELINE_SAMPLES) {
      a->reference = median(a->baseline, BASELINE_SAMPLES);
      a->phase = WATCH;
      a->low = 0;
    }
    return 0;
  }
  a->low = score < (1 - a->cfg.retune_drop) * a->reference ? a->low + 1 : 0;
  if (a->low < LOW_SAMPLES) return 0;
  hvd__log(HVD_LOG_INFO, "autotune: throughput fell to %.3g GB/s for %d samples, more than "
           "%.0f%% (HOROVOD_AUTOTUNE_RETUNE_DROP) below the %.3g GB/s of the settled "
           "settings: the workload changed, tuning again", score / 1e9, LOW_SAMPLES,
           a->cfg.retune_drop * 100, a->reference / 1e9);
  snprintf(a->note, sizeof a->note, "%d samples more than %.0f%% below the reference %.6g: "
           "tuning again", LOW_SAMPLES, a->cfg.retune_drop * 100, a->reference);
  return 1;
}

/* A sample ended with `score`: log it, decide what comes next. */
static int sample_done(hvd_autotune *a, double score, hvd_tune *next) {
  int phase = a->phase, again;
  a->sample++;
  switch (phase) {
    case WARMUP:
      log_sample(a, phase_names[phase], score);
      if (--a->warmup_left <= 0) a->phase = BAYES; /* from the job's settings, as they run */
      return ask(a, &a->cur, next);
    case BAYES:
      log_sample(a, phase_names[phase], score);
      return bayes_sample(a, score, next);
    case CATEGORICAL:
      log_sample(a, phase_names[phase], score);
      return categorical_sample(a, score, next);
    default:
      again = watch(a, score);
      log_sample(a, again ? "retune" : phase_names[phase], score);
      return again ? restart(a, next) : ask(a, &a->cur, next);
  }
}

/* ---- measuring ---- */

int hvd__autotune_tensor(hvd_autotune *a, uint64_t name_hash, uint64_t bytes, double now,
                         hvd_tune *next) {
  if (a->waiting) return 0;
  if (a->have_marker && now - a->last_marker > MARKER_LOST_S) a->have_marker = 0;
  if (!a->have_marker) {
    a->marker = name_hash;
    a->have_marker = 1;
    a->step_open = 0;
  }
  if (name_hash == a->marker) {
    a->last_marker = now;
    if (a->step_open && now > a->step_start && a->nrates < MAX_STEPS)
      a->rates[a->nrates++] = (double)a->step_bytes / (now - a->step_start);
    a->step_open = 1;
    a->step_start = now;
    a->step_bytes = 0;
    if (a->nrates >= a->cfg.steps_per_sample) {
      int n = a->nrates;
      return sample_done(a, median(a->rates, n), next);
    }
  }
  if (a->step_open) a->step_bytes += bytes;
  return 0;
}

void hvd__autotune_applied(hvd_autotune *a, double now) {
  a->waiting = 0;
  a->nrates = 0;
  a->step_open = 0;
  a->last_marker = now;
}

/* ---- life ---- */

int hvd__autotune_create(const hvd_autotune_config *cfg, const hvd_tune *start,
                         hvd_autotune **out) {
  hvd_autotune *a = calloc(1, sizeof *a);
  if (!a) return hvd__err(HVD_E_NOMEM, "allocating the autotuner");
  a->cfg = *cfg;
  a->cfg.log_path = NULL;
  if (a->cfg.steps_per_sample > MAX_STEPS) a->cfg.steps_per_sample = MAX_STEPS;
  if (a->cfg.max_samples < 1) a->cfg.max_samples = 1;
  a->cur = a->best = *start;
  a->warmup_left = cfg->warmup_samples;
  a->phase = a->warmup_left > 0 ? WARMUP : BAYES;
  hvd__gp_init(&a->gp, 2, cfg->noise);
  if (cfg->log_path) {
    a->log = fopen(cfg->log_path, "w");
    if (!a->log) {
      int err = errno;
      free(a);
      return hvd__err_sys(HVD_E_SYSTEM, err, "HOROVOD_AUTOTUNE_LOG: opening %s", cfg->log_path);
    }
    fprintf(a->log, "sample,phase,fusion_threshold_mb,cycle_time_ms,cache_enabled,"
            "hierarchical_allreduce,score_bytes_per_s,note\n");
    fflush(a->log);
  }
  say("starting", start, 0);
  *out = a;
  return 0;
}

void hvd__autotune_destroy(hvd_autotune *a) {
  if (!a) return;
  if (a->log) fclose(a->log);
  free(a);
}

int hvd__autotune_samples(const hvd_autotune *a) { return a->sample; }
int hvd__autotune_settled(const hvd_autotune *a) { return a->phase >= SETTLED; }
