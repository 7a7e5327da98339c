/*
 * analyze.c -- every analysis over the timelines read, in order.
 *
 * Steps and their split are per timeline (each rank's own file holds its
 * own waits).  The job-wide answers -- who was late, fusion, bandwidth --
 * come from one timeline, the lowest rank's that has steps: every rank's
 * file holds every rank's ticks and the same collectives.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

rp_split rp_shares(const rp_report *r, int i) {
  const rp_steps *s = &r->steps[i];
  rp_split x = {0, 0, 0};
  if (!(s->total_len > 0)) return x;
  x.compute = s->total.compute / s->total_len;
  x.negotiate = s->total.negotiate / s->total_len;
  x.comm = s->total.comm / s->total_len;
  return x;
}

static void note(rp_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(rp_report *r, const char *fmt, ...) {
  if (r->nnotes == (int)(sizeof r->notes / sizeof r->notes[0])) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->notes[r->nnotes++], sizeof r->notes[0], fmt, ap);
  va_end(ap);
}

/* What a reader of the numbers should know about the files themselves. */
static void file_notes(rp_report *r) {
  char b1[32], b2[32];
  for (int i = 0; i < r->ntl; i++) {
    const rp_timeline *t = &r->tl[i];
    if (t->truncated)
      note(r, "%s reached HOROVOD_TIMELINE_MAX_MB (%s) and ends there: it covers the run's first %s.",
           t->path, rp_fmt_bytes(t->max_bytes, b1, sizeof b1), rp_fmt_time(t->last_ts, b2, sizeof b2));
    else if (t->cut_mid_event || !t->ended)
      note(r, "%s stops before its end (the process died, or was still running): read up to there.",
           t->path);
    if (!t->has_job)
      note(r, "%s has no hvd_job event (an older hvd?): the job's size and settings are guessed.",
           t->path);
  }
  const rp_lateness *l = &r->late;
  if (l->size > 1 && 2 * l->nocc < l->nstep_ops)
    note(r, "Who was late needs every rank's timeline: these files give every rank's wait for "
         "%ld of the %ld operations within the steps (cached tensors are agreed without news of "
         "the other ranks). Record with HOROVOD_TIMELINE=DIR/ and pass the directory.",
         l->nocc, l->nstep_ops);
  if (l->inconsistent)
    note(r, "A rank stood out by more than a median step, longer than the others could have "
         "waited: the files do not pair up (from different runs?), so no rank is named.");
  if (!r->has_bench)
    note(r, "No hvd-bench measurement to compare bandwidth with: run `hvdrun -np %d hvd-bench "
         "--op allreduce --csv > bench.csv` on the same hosts, then pass --bench bench.csv.",
         r->late.size > 1 ? r->late.size : 2);
}

int rp_analyze(rp_report *r) {
  r->steps = calloc((size_t)r->ntl, sizeof *r->steps);
  if (!r->steps) return rp_err("out of memory");
  for (int i = 0; i < r->ntl; i++)
    if (rp_find_steps(&r->tl[i], &r->steps[i]) < 0) return -1;
  r->ref = 0;
  for (int i = r->ntl - 1; i >= 0; i--)
    if (r->steps[i].n > 0) r->ref = i;
  const rp_timeline *ref = &r->tl[r->ref];
  if (rp_lateness_of(r->tl, r->ntl, r->ref, &r->steps[r->ref], &r->late) < 0) return -1;
  rp_fusion_of(ref, &r->steps[r->ref], &r->fusion);
  rp_bandwidth_of(ref, r->has_bench ? &r->bench : NULL, &r->bw);
  file_notes(r);
  return rp_collect_findings(r);
}

void rp_report_free(rp_report *r) {
  for (int i = 0; i < r->ntl; i++) {
    if (r->steps) rp_steps_free(&r->steps[i]);
    rp_timeline_free(&r->tl[i]);
  }
  free(r->steps);
  free(r->tl);
  rp_lateness_free(&r->late);
  rp_bench_free(&r->bench);
  free(r->findings);
  memset(r, 0, sizeof *r);
}
