/*
 * ranks.c -- which ranks the others waited for.
 *
 * Every rank's timeline has a "rank N ready" tick per rank on every
 * operation, written in the cycle whose negotiation carried N's request.
 * So for each operation within the steps that has every rank's tick, a
 * rank's lateness is its tick minus the first rank's, and the rank
 * "last" is the one whose tick is more than RP_LAST_MARGIN_US after every
 * other's (ticks of one cycle lie microseconds apart: nobody was last).
 *
 * A straggler is the latest rank on average when it stands out: last for
 * at least half the operations, at least twice as late on average as any
 * other rank (so that chance among few ranks does not count), and late
 * enough to matter: over 2 ms and a tenth of the median step.  Ticks
 * come a cycle at a time, so a rank whose requests often reach one cycle
 * later than the others' (a millisecond or so, in a healthy job on a busy
 * machine) is not enough.
 */
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define MAX_WAITERS 10

/* The job's size, or without hvd_job the highest rank that ticked, + 1. */
static int job_size(const rp_timeline *t) {
  if (t->job.size > 0) return t->job.size;
  int size = 0;
  for (size_t i = 0; i < t->nticks; i++)
    if (t->ticks[i].rank + 1 > size) size = t->ticks[i].rank + 1;
  return size;
}

/* Operations whose ticks tell who was late: within the steps, every rank's. */
static int counts(const rp_timeline *t, const rp_steps *s, const rp_occ *o, int size) {
  if (!rp_in_steps(s, o) || o->nticks != size) return 0;
  for (int i = 0; i < o->nticks; i++)
    if (t->ticks[o->tick0 + i].rank < 0 || t->ticks[o->tick0 + i].rank >= size) return 0;
  return 1;
}

typedef struct {
  double first, last;
  int last_rank; /* -1: the last tick came within the margin of another */
} spread;

static spread spread_of(const rp_tick *ticks, int n) {
  spread r = {ticks[0].ts, ticks[0].ts, ticks[0].rank};
  double second = -1e300;
  for (int i = 1; i < n; i++) {
    double ts = ticks[i].ts;
    if (ts < r.first) r.first = ts;
    if (ts > r.last) {
      second = r.last;
      r.last = ts;
      r.last_rank = ticks[i].rank;
    } else if (ts > second) {
      second = ts;
    }
  }
  if (r.last - second <= RP_LAST_MARGIN_US) r.last_rank = -1;
  return r;
}

typedef struct {
  long n, *last_by; /* [size] */
  double sum, max;
} tensor_wait;

static int by_wait(const void *a, const void *b) {
  double x = ((const rp_waiter *)a)->mean_wait, y = ((const rp_waiter *)b)->mean_wait;
  return (x < y) - (x > y);
}

/* The tensors whose operations waited longest for their last rank. */
static int waiters(const rp_timeline *t, tensor_wait *w, int size, rp_lateness *out) {
  int n = 0;
  out->waiters = calloc((size_t)t->nnames + 1, sizeof *out->waiters);
  if (!out->waiters) return rp_err("out of memory");
  for (int i = 0; i < t->nnames; i++) {
    if (w[i].n == 0) continue;
    rp_waiter *x = &out->waiters[n++];
    *x = (rp_waiter){.tensor = i, .n = w[i].n, .mean_wait = w[i].sum / (double)w[i].n,
                     .max_wait = w[i].max, .last_rank = -1};
    for (int q = 0; q < size; q++)
      if (w[i].last_by[q] > 0 && (x->last_rank < 0 || w[i].last_by[q] > w[i].last_by[x->last_rank]))
        x->last_rank = q;
    if (x->last_rank >= 0) x->last_share = (double)w[i].last_by[x->last_rank] / (double)w[i].n;
  }
  qsort(out->waiters, (size_t)n, sizeof *out->waiters, by_wait);
  out->nwaiters = n < MAX_WAITERS ? n : MAX_WAITERS;
  return 0;
}

static void find_straggler(rp_lateness *l, const rp_steps *s) {
  int q = 0;
  double runner_up = 0;
  for (int r = 1; r < l->size; r++)
    if (l->ranks[r].mean_late > l->ranks[q].mean_late) q = r;
  for (int r = 0; r < l->size; r++)
    if (r != q && l->ranks[r].mean_late > runner_up) runner_up = l->ranks[r].mean_late;
  const rp_rank_late *x = &l->ranks[q];
  if (l->nocc > 0 && x->last_share >= 0.5 && x->mean_late >= 2 * runner_up &&
      x->mean_late >= 2000 && x->mean_late >= 0.1 * s->median_len)
    l->straggler = q;
}

/* Lateness of every rank: lates[r] holds its lateness per operation. */
static int tally(const rp_timeline *t, const rp_steps *s, int size, double **lates,
                 long *last, tensor_wait *w) {
  long k = 0;
  for (size_t i = 0; i < t->nocc; i++) {
    const rp_occ *o = &t->occ[i];
    if (!counts(t, s, o, size)) continue;
    const rp_tick *ticks = t->ticks + o->tick0;
    spread sp = spread_of(ticks, o->nticks);
    for (int j = 0; j < o->nticks; j++) lates[ticks[j].rank][k] = ticks[j].ts - sp.first;
    if (sp.last_rank >= 0) last[sp.last_rank]++;
    if (o->tensor >= 0) {
      tensor_wait *x = &w[o->tensor];
      x->n++;
      x->sum += sp.last - sp.first;
      if (sp.last - sp.first > x->max) x->max = sp.last - sp.first;
      if (sp.last_rank >= 0) x->last_by[sp.last_rank]++;
    }
    k++;
  }
  return (int)k;
}

int rp_lateness_of(const rp_timeline *t, const rp_steps *s, rp_lateness *out) {
  memset(out, 0, sizeof *out);
  out->straggler = -1;
  int size = job_size(t);
  if (size < 2 || s->n == 0) return 0;
  long n = 0;
  for (size_t i = 0; i < t->nocc; i++) n += counts(t, s, &t->occ[i], size);
  double **lates = calloc((size_t)size, sizeof *lates);
  long *last = calloc((size_t)size, sizeof *last), *last_by = NULL;
  tensor_wait *w = calloc((size_t)t->nnames + 1, sizeof *w);
  out->ranks = calloc((size_t)size, sizeof *out->ranks);
  int rc = lates && last && w && out->ranks ? 0 : -1;
  for (int q = 0; rc == 0 && q < size; q++) rc = (lates[q] = malloc(((size_t)n + 1) * sizeof **lates)) ? 0 : -1;
  if (rc == 0) rc = (last_by = calloc(((size_t)t->nnames + 1) * (size_t)size, sizeof *last_by)) ? 0 : -1;
  for (int i = 0; rc == 0 && i < t->nnames; i++) w[i].last_by = last_by + (size_t)i * (size_t)size;
  if (rc == 0) {
    out->size = size;
    out->nocc = tally(t, s, size, lates, last, w);
    for (int q = 0; q < size && n > 0; q++) {
      double sum = 0;
      for (long k = 0; k < n; k++) sum += lates[q][k];
      out->ranks[q] = (rp_rank_late){sum / (double)n, rp_median(lates[q], (size_t)n),
                                     (double)last[q] / (double)n};
    }
    find_straggler(out, s);
    rc = waiters(t, w, size, out);
  } else {
    rc = rp_err("out of memory");
  }
  for (int q = 0; lates && q < size; q++) free(lates[q]);
  free(lates);
  free(last);
  free(last_by);
  free(w);
  return rc;
}

void rp_lateness_free(rp_lateness *l) {
  free(l->ranks);
  free(l->waiters);
  memset(l, 0, sizeof *l);
}
