/*
 * fusion.c -- how well allreduces were fused.
 *
 * Each allreduce collective in the timeline says how many tensors and
 * bytes it carried.  Collectives are grouped by the cycle that planned
 * them: a cycle negotiates first (every tensor's NEGOTIATE ends), then
 * runs its collectives one after the other, so a collective belongs to
 * the cycle of the one before it when its tensors' negotiation ended
 * before that cycle's first collective began.  A cycle that ran several
 * allreduces of one dtype could have run them as one: with fusion off
 * (threshold 0) that is what fusion would do, and when their bytes add
 * up to more than the threshold, the threshold is what split them.
 */
#include <string.h>

#include "report.h"

const char *rp_fusion_bin_label(int bin) {
  static const char *const labels[] = {"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", ">64"};
  return bin >= 0 && bin < 8 ? labels[bin] : "?";
}

static int bin_of(int tensors) {
  int bin = 0;
  for (int top = 1; bin < 7 && tensors > top; top *= 2) bin++;
  return bin;
}

/* One cycle's allreduces. */
typedef struct {
  int n;           /* collectives */
  int one_dtype;   /* all of the first one's dtype */
  const char *dtype;
  double bytes;
} cycle;

static void close_cycle(const cycle *c, rp_fusion *f) {
  if (c->n == 0) return;
  f->cycles++;
  if (c->bytes > f->max_cycle_bytes) f->max_cycle_bytes = c->bytes;
  if (c->n < 2 || !c->one_dtype) return;
  f->together++;
  if (f->threshold > 0 && c->bytes > f->threshold) f->split++;
}

static void add_to_cycle(cycle *c, const rp_coll *k) {
  if (c->n == 0) c->dtype = k->dtype, c->one_dtype = 1;
  c->one_dtype &= strcmp(c->dtype, k->dtype) == 0;
  c->n++;
  c->bytes += k->bytes > 0 ? k->bytes : 0;
}

static void count_collective(const rp_coll *k, rp_fusion *f, double *tensors, double *bytes) {
  f->ncoll++;
  f->single += k->tensors == 1;
  f->hist[bin_of(k->tensors)]++;
  *tensors += k->tensors;
  *bytes += k->bytes > 0 ? k->bytes : 0;
  if (k->bytes > f->max_bytes) f->max_bytes = k->bytes;
}

void rp_fusion_of(const rp_timeline *t, const rp_steps *s, rp_fusion *f) {
  memset(f, 0, sizeof *f);
  f->threshold = t->has_job ? t->job.fusion_threshold : -1;
  double lo = s->n > 0 ? s->begin[0] : -1, hi = s->n > 0 ? s->begin[s->n] : 1e300;
  double tensors = 0, bytes = 0, cycle_start = -1;
  long all_cycles = 0;
  cycle c = {0, 0, NULL, 0};
  for (size_t i = 0; i < t->ncolls; i++) {
    const rp_coll *k = &t->colls[i];
    if (k->begin < lo || k->begin >= hi) continue;
    if (cycle_start < 0 || k->planned > cycle_start) { /* planned after that cycle ran: a new one */
      close_cycle(&c, f);
      c = (cycle){0, 0, NULL, 0};
      cycle_start = k->begin;
      all_cycles++;
    }
    if (k->op != RP_ALLREDUCE) continue;
    add_to_cycle(&c, k);
    count_collective(k, f, &tensors, &bytes);
  }
  close_cycle(&c, f);
  if (f->ncoll > 0) {
    f->mean_tensors = tensors / (double)f->ncoll;
    f->mean_bytes = bytes / (double)f->ncoll;
  }
  if (s->n > 0) {
    f->per_step = (double)f->ncoll / s->n;
    f->cycles_per_step = (double)all_cycles / s->n;
  }
}
