/*
 * findings.c -- the suggestions the numbers justify, each with them.
 *
 * Every rule names what it saw and where the time went, so a reader can
 * check it against the charts; none fires on a hunch:
 *   straggler   ranks.c found a rank last at least half the time and
 *               three times as often as any other, twice as late, late enough to matter, and no later
 *               than a step (what the others could have waited);
 *   fusion-off  HOROVOD_FUSION_THRESHOLD=0 (the job's own setting), said
 *               with how many allreduces fusion would have joined;
 *   threshold   cycles whose ready allreduces passed the threshold and ran
 *               split, in at least a fifth of the cycles;
 *   fp16        the ranks waited 15% or more of each step for float32
 *               allreduces large enough (64 KiB on average) to be
 *               bandwidth-bound: 16 bits halve their bytes;
 *   cycle       no straggler, 10% or more of each step waiting outside
 *               collectives, and a cycle period of at least a fifth of
 *               the median step: a negotiation that needs one more cycle
 *               (the engine keeps the period while it has work) costs
 *               that much of a step;
 *   bandwidth   allreduces of some size reached under half of what
 *               hvd-bench measured at that size (with --bench);
 *   compute     85% or more of each step computing: communication is not
 *               the limit.
 * The weight orders them: roughly the share of a step each concerns.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* The ranks' shares averaged over the timelines that have steps. */
typedef struct {
  rp_split share;
  double negotiate_us; /* per step */
  double median_us;    /* the reference timeline's median step */
  int n;
} overall;

static overall overall_of(const rp_report *r) {
  overall o = {{0, 0, 0}, 0, r->steps[r->ref].median_len, 0};
  for (int i = 0; i < r->ntl; i++) {
    const rp_steps *s = &r->steps[i];
    if (s->nkept == 0) continue;
    rp_split x = rp_shares(r, i);
    o.share.compute += x.compute;
    o.share.negotiate += x.negotiate;
    o.share.comm += x.comm;
    o.negotiate_us += s->total.negotiate / s->nkept;
    o.n++;
  }
  if (o.n > 0) {
    o.share.compute /= o.n;
    o.share.negotiate /= o.n;
    o.share.comm /= o.n;
    o.negotiate_us /= o.n;
  }
  return o;
}

static void add(rp_report *r, double weight, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(rp_report *r, double weight, const char *kind, const char *fmt, ...) {
  rp_finding *f = realloc(r->findings, ((size_t)r->nfindings + 1) * sizeof *f);
  if (!f) return; /* a finding lost to memory is not worth failing the report */
  r->findings = f;
  f = &f[r->nfindings++];
  f->weight = weight;
  snprintf(f->kind, sizeof f->kind, "%s", kind);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->text, sizeof f->text, fmt, ap);
  va_end(ap);
}

static void straggler(rp_report *r, const overall *o) {
  int q = r->late.straggler;
  if (q < 0) return;
  const rp_rank_late *x = &r->late.ranks[q];
  char mean[32], median[32], step[32];
  add(r, o->median_us > 0 ? x->mean_late / o->median_us : 1, "straggler",
      "Rank %d is slow: it was the last rank ready for %.0f%% of the tensors, on average %s "
      "after the first rank (median %s), so every step the others waited for it, %.0f%% of a "
      "median step of %s. Look at what differs on rank %d: its host, its data loading, the "
      "CPU it gets.",
      q, 100 * x->last_share, rp_fmt_time(x->mean_late, mean, sizeof mean),
      rp_fmt_time(x->median_late, median, sizeof median),
      o->median_us > 0 ? 100 * x->mean_late / o->median_us : 0,
      rp_fmt_time(o->median_us, step, sizeof step), q);
}

static void fusion(rp_report *r, const overall *o) {
  const rp_fusion *f = &r->fusion;
  char b1[32], b2[32];
  if (f->threshold == 0) {
    add(r, o->share.negotiate + o->share.comm + 0.01, "fusion-off",
        "Tensor fusion is off (HOROVOD_FUSION_THRESHOLD=0): every allreduce ran alone, %.1f "
        "per step, and in %ld of %ld cycles several allreduces were ready together that "
        "fusion would have run as one. Unset HOROVOD_FUSION_THRESHOLD (the default fuses up "
        "to 128 MiB) or set it above %s.",
        f->per_step, f->together, f->cycles, rp_fmt_bytes(f->max_cycle_bytes, b1, sizeof b1));
    return;
  }
  if (f->threshold > 0 && f->cycles > 0 && f->split * 5 >= f->cycles && f->split > 0) {
    double want = ldexp(1, (int)ceil(log2(f->max_cycle_bytes > 1 ? f->max_cycle_bytes : 2)));
    add(r, (double)f->split / (double)f->cycles * (o->share.comm + o->share.negotiate),
        "threshold",
        "Raise the fusion threshold: in %ld of %ld cycles (%.0f%%) the allreduces ready "
        "together carried more than HOROVOD_FUSION_THRESHOLD (%s) and ran as several "
        "collectives; the largest cycle carried %s. HOROVOD_FUSION_THRESHOLD=%.0f would run "
        "each as one.",
        f->split, f->cycles, 100.0 * (double)f->split / (double)f->cycles,
        rp_fmt_bytes(f->threshold, b1, sizeof b1), rp_fmt_bytes(f->max_cycle_bytes, b2, sizeof b2),
        want);
  }
}

/* Whether most allreduce bytes were float32. */
static int mostly_float32(const rp_timeline *t) {
  double f32 = 0, all = 0;
  for (size_t i = 0; i < t->ncolls; i++) {
    const rp_coll *k = &t->colls[i];
    if (k->op != RP_ALLREDUCE || !(k->bytes > 0)) continue;
    all += k->bytes;
    if (strcmp(k->dtype, "float32") == 0) f32 += k->bytes;
  }
  return all > 0 && f32 >= 0.5 * all;
}

static void fp16(rp_report *r, const overall *o) {
  const rp_fusion *f = &r->fusion;
  if (o->n == 0 || o->share.comm < 0.15 || f->mean_bytes < 64 * 1024 ||
      !mostly_float32(&r->tl[r->ref]))
    return;
  char b1[32], b2[32];
  add(r, o->share.comm / 2, "fp16",
      "Enable fp16 compression: the ranks spent %.0f%% of each step waiting for float32 "
      "allreduces (%s per step, %s per collective on average), large enough to be "
      "bandwidth-bound; 16-bit gradients halve the bytes (hvd.torch: "
      "compression=hvd.Compression.fp16; hvd-train-fashion-mnist --fp16-allreduce; "
      "libhvd_nn: HVD_NN_COMPRESS_FP16).",
      100 * o->share.comm, rp_fmt_bytes(f->mean_bytes * f->per_step, b1, sizeof b1),
      rp_fmt_bytes(f->mean_bytes, b2, sizeof b2));
}

static void cycle_time(rp_report *r, const overall *o) {
  const rp_job *j = &r->tl[r->ref].job;
  double period_us = j->cycle_ms * 1000;
  if (r->late.straggler >= 0 || o->n == 0 || !(period_us > 0) || o->share.negotiate < 0.10 ||
      period_us < 0.2 * o->median_us)
    return;
  char b1[32], b2[32];
  double lower = j->cycle_ms / 4 < 0.1 ? 0.1 : j->cycle_ms / 4;
  add(r, o->share.negotiate, "cycle",
      "The cycle time is too long for these steps: a step lasts %s (median) and a cycle "
      "HOROVOD_CYCLE_TIME=%g ms, so each negotiation that needs one more cycle (a step took "
      "%.1f) can wait a large part of a step; the ranks waited %s per step (%.0f%%) outside "
      "collectives. Lower HOROVOD_CYCLE_TIME, e.g. to %g.",
      rp_fmt_time(o->median_us, b1, sizeof b1), j->cycle_ms, r->fusion.cycles_per_step,
      rp_fmt_time(o->negotiate_us, b2, sizeof b2), 100 * o->share.negotiate, lower);
}

static void bandwidth(rp_report *r, const overall *o) {
  const rp_bw_row *worst = NULL;
  for (int i = 0; i < r->bw.nrows; i++) {
    const rp_bw_row *x = &r->bw.rows[i];
    if (x->n < 3 || !(x->bench > 0) || x->bytes < 64 * 1024 || x->busbw >= 0.5 * x->bench) continue;
    if (!worst || x->busbw / x->bench < worst->busbw / worst->bench) worst = x;
  }
  if (!worst) return;
  char b1[32], b2[32];
  double ratio = worst->busbw / worst->bench;
  add(r, o->share.comm * (1 - ratio), "bandwidth",
      "Allreduces of %s to %s reached %.3f GB/s bus bandwidth, %.0f%% of the %.3f GB/s "
      "hvd-bench measured at that size: they shared the CPU or the link with the training, "
      "or ran over another transport than the measurement.",
      rp_fmt_bytes(worst->lo, b1, sizeof b1), rp_fmt_bytes(2 * worst->lo, b2, sizeof b2),
      worst->busbw, 100 * ratio, worst->bench);
}

static void compute_bound(rp_report *r, const overall *o) {
  if (o->n == 0 || o->share.compute < 0.85) return;
  add(r, 0.001, "compute",
      "The ranks computed %.0f%% of each step: communication is not what limits this job; "
      "speed up the computation per rank (more work per step, a faster input pipeline).",
      100 * o->share.compute);
}

static void no_steps(rp_report *r) {
  if (r->steps[r->ref].n > 0) return;
  add(r, 1, "no-steps",
      "No training steps found: no tensor recurs in the timeline(s), so nothing can be split "
      "per step. Record a run of several steps (HOROVOD_TIMELINE for the whole run, or "
      "hvd_start_timeline/hvd.start_timeline around some steps).");
}

static int by_weight(const void *a, const void *b) {
  double x = ((const rp_finding *)a)->weight, y = ((const rp_finding *)b)->weight;
  return (x < y) - (x > y);
}

int rp_collect_findings(rp_report *r) {
  overall o = overall_of(r);
  no_steps(r);
  straggler(r, &o);
  fusion(r, &o);
  fp16(r, &o);
  cycle_time(r, &o);
  bandwidth(r, &o);
  compute_bound(r, &o);
  if (r->nfindings > 1) qsort(r->findings, (size_t)r->nfindings, sizeof *r->findings, by_weight);
  return 0;
}
