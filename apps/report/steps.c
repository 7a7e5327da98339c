/*
 * steps.c -- a run's training steps, and what each spends its time on.
 *
 * hvd is not told where a step begins, but data-parallel training shows
 * it: every gradient is reduced once per step.  The tensors seen the same
 * number of times that account for the most operations (count x tensors:
 * the gradients, not the per-epoch metrics or the first broadcasts, nor
 * one tensor reduced twice a step) mark rounds, and round
 * k begins when this rank hands hvd the first of them for the k-th time
 * (its own "ready" tick; the negotiation's start in a file that has no
 * rank).  The steps are the whole rounds between those beginnings.
 *
 * Each step splits the time of the application's threads:
 *   communicating  blocked in hvd_wait while a collective ran;
 *   negotiating    blocked in hvd_wait otherwise: until the next cycle,
 *                  until the other ranks were ready, until the plan;
 *   computing      the rest (when several threads wait at once, the time
 *                  any of them waited counts once).
 * Occasional steps over 3x the median length (an epoch's evaluation, a
 * checkpoint: at most 5% of the steps) stay in the per-step chart but
 * out of the totals; when long steps are more common than that they are
 * how the job runs, and count.
 */
#include <stdlib.h>
#include <string.h>

#include "report.h"

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double rp_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int by_begin(const void *a, const void *b) {
  double x = ((const rp_span *)a)->begin, y = ((const rp_span *)b)->begin;
  return (x > y) - (x < y);
}

/* Sorts v[0..n) and merges it into disjoint spans; returns how many. */
static size_t merge(rp_span *v, size_t n) {
  qsort(v, n, sizeof *v, by_begin);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && v[i].begin <= v[k - 1].end) {
      if (v[i].end > v[k - 1].end) v[k - 1].end = v[i].end;
    } else {
      v[k++] = v[i];
    }
  }
  return k;
}

rp_span *rp_coll_union(const rp_timeline *t, size_t *n) {
  rp_span *u = malloc((t->ncolls + 1) * sizeof *u);
  size_t k = 0;
  if (!u) return NULL;
  for (size_t i = 0; i < t->ncolls; i++)
    if (t->colls[i].end >= t->colls[i].begin) u[k++] = (rp_span){t->colls[i].begin, t->colls[i].end};
  *n = merge(u, k);
  return u;
}

double rp_covered(const rp_span *spans, size_t n, size_t *at, double lo, double hi) {
  while (*at < n && spans[*at].end <= lo) (*at)++;
  double sum = 0;
  for (size_t i = *at; i < n && spans[i].begin < hi; i++) {
    double a = spans[i].begin > lo ? spans[i].begin : lo;
    double b = spans[i].end < hi ? spans[i].end : hi;
    if (b > a) sum += b - a;
  }
  return sum;
}

static double start_of(const rp_occ *o) { return o->own_ready >= 0 ? o->own_ready : o->neg_begin; }

int rp_in_steps(const rp_steps *s, const rp_occ *o) {
  double at = start_of(o);
  return s->n > 0 && at >= s->begin[0] && at < s->begin[s->n];
}

int rp_step_of(const rp_steps *s, const rp_occ *o) {
  if (!rp_in_steps(s, o)) return -1;
  double at = start_of(o);
  int lo = 0, hi = s->n; /* begin[lo] <= at < begin[hi] */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (at >= s->begin[mid]) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* The occurrence count whose tensors account for the most operations
 * (the larger count on a tie), among tensors seen at least twice; 0 if
 * none. */
static long step_count(const long *count, int n) {
  long best = 0;
  double best_ops = 0;
  for (int i = 0; i < n; i++) {
    long c = count[i], same = 0;
    if (c < 2) continue;
    for (int j = 0; j < n; j++) same += count[j] == c;
    double ops = (double)c * (double)same;
    if (ops > best_ops || (ops == best_ops && c > best)) best = c, best_ops = ops;
  }
  return best;
}

/* begin[k]: the earliest start of the k-th occurrence of a tensor seen
 * exactly `rounds` times. */
static void round_starts(const rp_timeline *t, const long *count, long rounds, double *begin) {
  long *seen = calloc((size_t)t->nnames + 1, sizeof *seen);
  for (long k = 0; k < rounds; k++) begin[k] = -1;
  for (size_t i = 0; seen && i < t->nocc; i++) {
    const rp_occ *o = &t->occ[i];
    if (o->tensor < 0 || count[o->tensor] != rounds) continue;
    long k = seen[o->tensor]++;
    if (begin[k] < 0 || start_of(o) < begin[k]) begin[k] = start_of(o);
  }
  free(seen);
}

/* How step [a, b) splits, given the merged waits and collectives. */
static rp_split split_step(double a, double b, const rp_span *waits, size_t nw, size_t *wi,
                           const rp_span *colls, size_t nc, size_t *ci) {
  rp_split s = {0, 0, 0};
  double waited = 0;
  while (*wi < nw && waits[*wi].end <= a) (*wi)++;
  for (size_t j = *wi; j < nw && waits[j].begin < b; j++) {
    double lo = waits[j].begin > a ? waits[j].begin : a;
    double hi = waits[j].end < b ? waits[j].end : b;
    if (hi <= lo) continue;
    waited += hi - lo;
    s.comm += rp_covered(colls, nc, ci, lo, hi);
  }
  s.negotiate = waited - s.comm;
  s.compute = (b - a) - waited;
  return s;
}

static void totals(rp_steps *s) {
  double *len = malloc((size_t)s->n * sizeof *len);
  for (int k = 0; len && k < s->n; k++) len[k] = s->begin[k + 1] - s->begin[k];
  s->median_len = len ? rp_median(len, (size_t)s->n) : 0;
  free(len);
  int long_steps = 0;
  for (int k = 0; k < s->n; k++) long_steps += s->begin[k + 1] - s->begin[k] > 3 * s->median_len;
  for (int k = 0; k < s->n; k++) {
    double l = s->begin[k + 1] - s->begin[k];
    s->outlier[k] = l > 3 * s->median_len && long_steps * 20 <= s->n;
    if (s->outlier[k]) continue;
    s->nkept++;
    s->total_len += l;
    s->total.compute += s->split[k].compute;
    s->total.negotiate += s->split[k].negotiate;
    s->total.comm += s->split[k].comm;
  }
}

static int split_steps(const rp_timeline *t, rp_steps *s) {
  size_t nw = t->nwaits, nc = 0, wi = 0, ci = 0;
  rp_span *waits = malloc((nw + 1) * sizeof *waits);
  rp_span *colls = rp_coll_union(t, &nc);
  s->split = calloc((size_t)s->n + 1, sizeof *s->split);
  s->outlier = calloc((size_t)s->n + 1, 1);
  if (!waits || !colls || !s->split || !s->outlier) {
    free(waits);
    free(colls);
    return rp_err("out of memory");
  }
  if (nw > 0) memcpy(waits, t->waits, nw * sizeof *waits);
  nw = merge(waits, nw);
  for (int k = 0; k < s->n; k++)
    s->split[k] = split_step(s->begin[k], s->begin[k + 1], waits, nw, &wi, colls, nc, &ci);
  free(waits);
  free(colls);
  totals(s);
  return 0;
}

int rp_find_steps(const rp_timeline *t, rp_steps *s) {
  memset(s, 0, sizeof *s);
  long *count = calloc((size_t)t->nnames + 1, sizeof *count);
  s->is_step = calloc((size_t)t->nnames + 1, 1);
  if (!count || !s->is_step) return free(count), rp_err("out of memory");
  for (size_t i = 0; i < t->nocc; i++)
    if (t->occ[i].tensor >= 0) count[t->occ[i].tensor]++;
  long rounds = step_count(count, t->nnames);
  for (int i = 0; rounds && i < t->nnames; i++) {
    s->is_step[i] = count[i] == rounds || count[i] == rounds + 1;
    s->ntensors += s->is_step[i];
  }
  s->begin = malloc(((size_t)rounds + 1) * sizeof *s->begin);
  if (!s->begin) return free(count), rp_err("out of memory");
  round_starts(t, count, rounds, s->begin);
  free(count);
  s->n = rounds > 1 ? (int)rounds - 1 : 0;
  for (int k = 0; k < s->n; k++) /* rounds that overlap are not steps */
    if (s->begin[k + 1] < s->begin[k]) s->begin[k + 1] = s->begin[k];
  return split_steps(t, s);
}

void rp_steps_free(rp_steps *s) {
  free(s->begin);
  free(s->split);
  free(s->outlier);
  free(s->is_step);
  memset(s, 0, sizeof *s);
}
