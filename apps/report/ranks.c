/*
 * ranks.c -- which ranks the others waited for.
 *
 * An operation (a tensor's negotiation) ends on every rank in the same
 * cycle, at about the same moment: when the last rank was ready.  So how
 * long rank q waited on it, from its own "ready" tick to the
 * negotiation's end, is the same kind of number on every rank, measured on
 * one clock, and the rank that waited least was the one the others waited
 * for: rank q's lateness on the operation is the longest wait minus its
 * own.  No two files' clocks are ever compared (each rank's file counts
 * from its own start).
 *
 * Where a rank's wait comes from:
 *   its own file, paired with the reference timeline's operation by the
 *       tensor and the cycle that ended the negotiation (the same number
 *       on every rank; files without it pair by the tensor's occurrence);
 *   else the reference file's tick for that rank: a full exchange puts
 *       every rank's tick in every file.  The cached fast path exchanges
 *       one bit per tensor, so there a file holds only its own rank's
 *       tick: who was late then needs every rank's file (issue 30: rank
 *       0's file alone held the other ranks' ticks for the first round
 *       only, and that round's start-up skew read as a straggler).
 * The operations that count are those of the steps that are not outliers
 * (steps.c: the first, which holds the ranks' start-up, often is one)
 * with every rank's wait known; when fewer than half of them have it,
 * nobody is judged.
 *
 * A straggler is the latest rank on average when it stands out: alone
 * last (its wait more than RP_LAST_MARGIN_US shorter than every other's)
 * for at least half the operations and three times as often as any other
 * rank, at least twice as late on average as any other rank (so that
 * chance among few ranks does not count: of 2 ranks, one is last about
 * half the time; a loaded machine gives one rank less of the CPU for
 * stretches, the ranks by turns, and its mean grows with them), late
 * enough to matter (over 2 ms and a tenth of the median step), and
 * consistent with the steps: the others cannot wait longer for it than a
 * step lasts, so a mean lateness over the median step means the files do
 * not pair up, and nobody is named.
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

/* ---- Pairing an operation with the same one in another rank's file ---- */

/* One file's operations by tensor name, each tensor's in file order. */
typedef struct {
  const rp_timeline *t;
  int *by_name;   /* tensor indices sorted by name */
  size_t *occ;    /* occurrence indices grouped by tensor */
  size_t *first;  /* [nnames + 1]: tensor i's are occ[first[i] .. first[i + 1]) */
  size_t *cursor; /* [nnames]: the next to look at */
} file_index;

static const rp_timeline *sort_t; /* qsort has no context argument */

static int by_name(const void *a, const void *b) {
  return strcmp(sort_t->names[*(const int *)a], sort_t->names[*(const int *)b]);
}

static int index_file(const rp_timeline *t, file_index *x) {
  size_t n = (size_t)t->nnames;
  memset(x, 0, sizeof *x);
  x->t = t;
  x->by_name = malloc((n + 1) * sizeof *x->by_name);
  x->occ = malloc((t->nocc + 1) * sizeof *x->occ);
  x->first = calloc(n + 2, sizeof *x->first);
  x->cursor = calloc(n + 1, sizeof *x->cursor);
  if (!x->by_name || !x->occ || !x->first || !x->cursor) return rp_err("out of memory");
  for (size_t i = 0; i < n; i++) x->by_name[i] = (int)i;
  sort_t = t;
  qsort(x->by_name, n, sizeof *x->by_name, by_name);
  for (size_t i = 0; i < t->nocc; i++)
    if (t->occ[i].tensor >= 0) x->first[t->occ[i].tensor + 1]++;
  for (size_t i = 0; i < n; i++) x->first[i + 1] += x->first[i];
  for (size_t i = 0; i < n; i++) x->cursor[i] = x->first[i];
  for (size_t i = 0; i < t->nocc; i++)
    if (t->occ[i].tensor >= 0) x->occ[x->cursor[t->occ[i].tensor]++] = i;
  for (size_t i = 0; i < n; i++) x->cursor[i] = x->first[i];
  return 0;
}

static void index_free(file_index *x) {
  free(x->by_name);
  free(x->occ);
  free(x->first);
  free(x->cursor);
}

/* The tensor named name in x's file, or -1. */
static int tensor_named(const file_index *x, const char *name) {
  size_t lo = 0, hi = (size_t)x->t->nnames;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(x->t->names[x->by_name[mid]], name);
    if (c == 0) return x->by_name[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* How an operation is known across files: the cycle that ended its
 * negotiation, or without one its occurrence number (k). */
static long key_of(const rp_occ *o, long k) { return o->cycle >= 0 ? o->cycle : k; }

/* The operation of x's file on tensor `name` with key `key` (asked in
 * growing order per tensor), or NULL. */
static const rp_occ *paired(file_index *x, const char *name, long key, int by_cycle) {
  int i = tensor_named(x, name);
  if (i < 0) return NULL;
  for (size_t *c = &x->cursor[i]; *c < x->first[i + 1]; (*c)++) {
    const rp_occ *o = &x->t->occ[x->occ[*c]];
    long k = key_of(o, (long)(*c - x->first[i]));
    if (by_cycle != (o->cycle >= 0) || k > key) return NULL;
    if (k == key) return o;
  }
  return NULL;
}

/* ---- Waits ---- */

typedef struct {
  const rp_timeline *ref;
  file_index *files; /* by rank; .t NULL where that rank's file is absent */
  int size;
  long *seen;        /* [ref nnames]: occurrences of each tensor so far */
} pairing;

/* wait[q] for every rank q on the reference's operation o; 0 if some
 * rank's is unknown. */
static int waits_of(pairing *p, const rp_occ *o, double *wait) {
  const rp_timeline *ref = p->ref;
  long k = p->seen[o->tensor]++;
  if (o->neg_end < 0) return 0;
  for (int q = 0; q < p->size; q++) {
    wait[q] = -1;
    file_index *x = &p->files[q];
    if (x->t) {
      const rp_occ *m = x->t == ref ? o : paired(x, ref->names[o->tensor], key_of(o, k), o->cycle >= 0);
      if (m && m->own_ready >= 0 && m->neg_end >= 0) wait[q] = m->neg_end - m->own_ready;
      continue;
    }
    for (int i = 0; i < o->nticks; i++)
      if (ref->ticks[o->tick0 + i].rank == q) wait[q] = o->neg_end - ref->ticks[o->tick0 + i].ts;
  }
  for (int q = 0; q < p->size; q++)
    if (wait[q] < 0) return 0;
  return 1;
}

/* ---- Lateness ---- */

/* Whether o is in a step that counts (not an outlier). */
static int counts(const rp_steps *s, const rp_occ *o) {
  int k = o->tensor >= 0 ? rp_step_of(s, o) : -1;
  return k >= 0 && !s->outlier[k];
}

typedef struct {
  long n, *last_by; /* [size] */
  double sum, max;
} tensor_wait;

typedef struct {
  double spread;  /* the longest wait minus the shortest */
  int last_rank;  /* the rank that waited least; -1 within the margin of another */
} spread;

static spread spread_of(const double *wait, int n) {
  int least = 0;
  double most = wait[0], second = 1e300;
  for (int q = 1; q < n; q++) {
    if (wait[q] > most) most = wait[q];
    if (wait[q] < wait[least]) second = wait[least], least = q;
    else if (wait[q] < second) second = wait[q];
  }
  spread s = {most - wait[least], least};
  if (second - wait[least] <= RP_LAST_MARGIN_US) s.last_rank = -1;
  return s;
}

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
  if (l->nocc == 0 || 2 * l->nocc < l->nstep_ops) return; /* too few paired to judge */
  for (int r = 1; r < l->size; r++)
    if (l->ranks[r].mean_late > l->ranks[q].mean_late) q = r;
  double last_runner_up = 0;
  for (int r = 0; r < l->size; r++) {
    if (r == q) continue;
    if (l->ranks[r].mean_late > runner_up) runner_up = l->ranks[r].mean_late;
    if (l->ranks[r].last_share > last_runner_up) last_runner_up = l->ranks[r].last_share;
  }
  const rp_rank_late *x = &l->ranks[q];
  if (x->last_share < 0.5 || x->last_share < 3 * last_runner_up || x->mean_late < 2 * runner_up ||
      x->mean_late < 2000 || x->mean_late < 0.1 * s->median_len)
    return;
  if (x->mean_late > s->median_len) { /* waiting longer than a step: not paired right */
    l->inconsistent = 1;
    return;
  }
  l->straggler = q;
}

/* Every rank's lateness per counted operation into lates[q][k]. */
static long tally(pairing *p, const rp_steps *s, double **lates, long *last, tensor_wait *w,
                  double *wait) {
  const rp_timeline *t = p->ref;
  long k = 0;
  for (size_t i = 0; i < t->nocc; i++) {
    const rp_occ *o = &t->occ[i];
    if (o->tensor < 0) continue;
    int in = counts(s, o);
    if (!waits_of(p, o, wait) || !in) continue;
    spread sp = spread_of(wait, p->size);
    double most = wait[0];
    for (int q = 1; q < p->size; q++)
      if (wait[q] > most) most = wait[q];
    for (int q = 0; q < p->size; q++) lates[q][k] = most - wait[q];
    if (sp.last_rank >= 0) last[sp.last_rank]++;
    tensor_wait *x = &w[o->tensor];
    x->n++;
    x->sum += sp.spread;
    if (sp.spread > x->max) x->max = sp.spread;
    if (sp.last_rank >= 0) x->last_by[sp.last_rank]++;
    k++;
  }
  return k;
}

/* The other ranks' files, by rank, indexed for pairing. */
static int index_files(const rp_timeline *tl, int ntl, int ref, int size, file_index *files) {
  for (int i = 0; i < ntl; i++) {
    int q = i == ref ? tl[ref].job.rank : tl[i].has_job ? tl[i].job.rank : -1;
    if (q < 0 || q >= size || files[q].t) continue;
    if (i == ref) files[q].t = &tl[i];
    else if (index_file(&tl[i], &files[q]) < 0) return -1;
  }
  return 0;
}

static int lateness(const rp_timeline *tl, int ntl, int ref, const rp_steps *s, int size,
                    rp_lateness *out) {
  const rp_timeline *t = &tl[ref];
  size_t nn = (size_t)t->nnames + 1;
  long n = 0;
  for (size_t i = 0; i < t->nocc; i++) n += counts(s, &t->occ[i]);
  pairing p = {t, calloc((size_t)size, sizeof *p.files), size, calloc(nn, sizeof *p.seen)};
  double **lates = calloc((size_t)size, sizeof *lates), *wait = malloc((size_t)size * sizeof *wait);
  long *last = calloc((size_t)size, sizeof *last), *last_by = calloc(nn * (size_t)size, sizeof *last_by);
  tensor_wait *w = calloc(nn, sizeof *w);
  out->ranks = calloc((size_t)size, sizeof *out->ranks);
  int rc = p.files && p.seen && lates && wait && last && last_by && w && out->ranks ? 0 : rp_err("out of memory");
  for (int q = 0; rc == 0 && q < size; q++)
    if (!(lates[q] = malloc(((size_t)n + 1) * sizeof **lates))) rc = rp_err("out of memory");
  for (size_t i = 0; rc == 0 && i < nn; i++) w[i].last_by = last_by + i * (size_t)size;
  if (rc == 0) rc = index_files(tl, ntl, ref, size, p.files);
  if (rc == 0) {
    out->size = size;
    out->nstep_ops = n;
    out->nocc = tally(&p, s, lates, last, w, wait);
    for (int q = 0; q < size && out->nocc > 0; q++) {
      double sum = 0;
      for (long k = 0; k < out->nocc; k++) sum += lates[q][k];
      out->ranks[q] = (rp_rank_late){sum / (double)out->nocc, rp_median(lates[q], (size_t)out->nocc),
                                     (double)last[q] / (double)out->nocc};
    }
    find_straggler(out, s);
    rc = waiters(t, w, size, out);
  }
  for (int q = 0; p.files && q < size; q++)
    if (p.files[q].t && p.files[q].t != t) index_free(&p.files[q]);
  for (int q = 0; lates && q < size; q++) free(lates[q]);
  free(p.files);
  free(p.seen);
  free(lates);
  free(wait);
  free(last);
  free(last_by);
  free(w);
  return rc;
}

int rp_lateness_of(const rp_timeline *tl, int ntl, int ref, const rp_steps *s, rp_lateness *out) {
  memset(out, 0, sizeof *out);
  out->straggler = -1;
  int size = job_size(&tl[ref]);
  if (size < 2 || s->n == 0) return 0;
  return lateness(tl, ntl, ref, s, size, out);
}

void rp_lateness_free(rp_lateness *l) {
  free(l->ranks);
  free(l->waiters);
  memset(l, 0, sizeof *l);
}
