/*
 * html.c -- DIR/report.html: one self-contained page (styles inline, the
 * charts embedded as data: URIs), readable offline and easy to pass on.
 * Everything that came from a file (paths, tensor names) is escaped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static const char style[] =
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;"
    "text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}"
    "li{margin:.5em 0}img{max-width:100%;border:1px solid #eee}.note{color:#555}";

static void esc(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '&': fputs("&amp;", f); break;
      case '"': fputs("&quot;", f); break;
      default: fputc(*s, f);
    }
  }
}

static void base64(FILE *f, const unsigned char *p, size_t n) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    fputc(digits[v >> 18 & 63], f);
    fputc(digits[v >> 12 & 63], f);
    fputc(i + 1 < n ? digits[v >> 6 & 63] : '=', f);
    fputc(i + 2 < n ? digits[v & 63] : '=', f);
  }
}

/* <img> with DIR/name inside it, or nothing if it cannot be read. */
static void image(FILE *f, const char *dir, const char *name, const char *alt) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *in = fopen(path, "rb");
  if (!in) return;
  unsigned char *buf = NULL;
  size_t n = 0, cap = 0, k;
  do {
    if (cap - n < 65536) {
      unsigned char *b = realloc(buf, cap = cap ? 2 * cap : 1 << 18);
      if (!b) break;
      buf = b;
    }
    k = fread(buf + n, 1, cap - n, in);
    n += k;
  } while (k > 0);
  fclose(in);
  fprintf(f, "<p><img alt=\"");
  esc(f, alt);
  fprintf(f, "\" src=\"data:image/png;base64,");
  base64(f, buf, n);
  fprintf(f, "\"></p>\n");
  free(buf);
}

static void pct(FILE *f, double x) { fprintf(f, "<td>%.0f%%</td>", 100 * x); }

static void summary(FILE *f, const rp_report *r) {
  const rp_timeline *ref = &r->tl[r->ref];
  const rp_steps *s = &r->steps[r->ref];
  char b[32];
  fprintf(f, "<p>%d timeline%s of a job of %d rank%s, transport %s, fusion threshold ", r->ntl,
          r->ntl == 1 ? "" : "s", ref->job.size, ref->job.size == 1 ? "" : "s",
          ref->job.transport[0] ? ref->job.transport : "unknown");
  if (ref->job.fusion_threshold >= 0) esc(f, rp_fmt_bytes(ref->job.fusion_threshold, b, sizeof b));
  else fputs("unknown", f);
  fprintf(f, ", cycle time %g ms. %d steps (the %d tensors reduced once per step mark them); "
             "median step %s.</p>\n",
          ref->job.cycle_ms, s->n, s->ntensors, rp_fmt_time(s->median_len, b, sizeof b));
}

static void findings(FILE *f, const rp_report *r) {
  fprintf(f, "<h2>Findings</h2>\n<ol>\n");
  for (int i = 0; i < r->nfindings; i++) {
    fprintf(f, "<li>");
    esc(f, r->findings[i].text);
    fprintf(f, "</li>\n");
  }
  if (r->nfindings == 0) fprintf(f, "<li>Nothing stands out.</li>\n");
  fprintf(f, "</ol>\n");
}

static void steps(FILE *f, const rp_report *r, const char *dir, int with_charts) {
  char b[32];
  fprintf(f, "<h2>Steps: computing, negotiating, communicating</h2>\n"
             "<p>Per step, the time the application's threads were blocked in <code>hvd_wait</code> "
             "while a collective ran (communicating) or otherwise (negotiating: waiting for a "
             "cycle, for the other ranks, for the plan), and the rest (computing). Occasional steps "
             "over 3x the median (at most 5%% of them: an evaluation, a checkpoint) are left out "
             "of the shares.</p>\n<table><tr><th>rank</th><th>steps</th>"
             "<th>median step</th><th>computing</th><th>negotiating</th><th>communicating</th>"
             "<th class=l>file</th></tr>\n");
  for (int i = 0; i < r->ntl; i++) {
    rp_split x = rp_shares(r, i);
    fprintf(f, "<tr><td>%d</td><td>%d</td><td>%s</td>", r->tl[i].job.rank, r->steps[i].n,
            rp_fmt_time(r->steps[i].median_len, b, sizeof b));
    pct(f, x.compute);
    pct(f, x.negotiate);
    pct(f, x.comm);
    fprintf(f, "<td class=l>");
    esc(f, r->tl[i].path);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
  if (with_charts) {
    image(f, dir, "steps.png", "each step of the first timeline");
    image(f, dir, "ranks.png", "the mean step of each rank");
  }
}

static void waiters(FILE *f, const rp_report *r) {
  const rp_lateness *l = &r->late;
  char b1[32], b2[32];
  fprintf(f, "<p>The tensors that waited longest from the first rank ready to the last:</p>\n"
             "<table><tr><th class=l>tensor</th><th>operations</th><th>mean wait</th>"
             "<th>longest</th><th>last rank most often</th></tr>\n");
  for (int i = 0; i < l->nwaiters; i++) {
    const rp_waiter *w = &l->waiters[i];
    fprintf(f, "<tr><td class=l>");
    esc(f, r->tl[r->ref].names[w->tensor]);
    fprintf(f, "</td><td>%ld</td><td>%s</td><td>%s</td>", w->n,
            rp_fmt_time(w->mean_wait, b1, sizeof b1), rp_fmt_time(w->max_wait, b2, sizeof b2));
    if (w->last_rank >= 0) fprintf(f, "<td>rank %d (%.0f%%)</td></tr>\n", w->last_rank, 100 * w->last_share);
    else fprintf(f, "<td>none</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

static void lateness(FILE *f, const rp_report *r, const char *dir, int with_charts) {
  const rp_lateness *l = &r->late;
  char b1[32], b2[32];
  fprintf(f, "<h2>Waiting for ranks</h2>\n<p>Over %ld of the %ld operations within the steps "
             "(those every rank's wait is known for), how long after the first rank each rank was "
             "ready (the longest wait from ready to the negotiation's end, minus its own), and how "
             "often it alone was last (its wait more than %.0f us shorter than every other's).</p>\n"
             "<table><tr><th>rank</th><th>mean</th><th>median</th><th>last</th></tr>\n",
          l->nocc, l->nstep_ops, RP_LAST_MARGIN_US);
  for (int q = 0; q < l->size; q++)
    fprintf(f, "<tr><td>%d%s</td><td>%s</td><td>%s</td><td>%.0f%%</td></tr>\n", q,
            q == l->straggler ? " (slow)" : "", rp_fmt_time(l->ranks[q].mean_late, b1, sizeof b1),
            rp_fmt_time(l->ranks[q].median_late, b2, sizeof b2), 100 * l->ranks[q].last_share);
  fprintf(f, "</table>\n");
  if (with_charts) image(f, dir, "lateness.png", "how late each rank was");
  waiters(f, r);
}

static void fusion(FILE *f, const rp_report *r, const char *dir, int with_charts) {
  const rp_fusion *u = &r->fusion;
  char b1[32], b2[32], b3[32], b4[32];
  fprintf(f, "<h2>Fusion</h2>\n<table>"
             "<tr><th class=l>allreduces within the steps</th><td>%ld (%.1f per step)</td></tr>"
             "<tr><th class=l>of them, one tensor alone</th><td>%ld</td></tr>"
             "<tr><th class=l>tensors per allreduce</th><td>%.2f</td></tr>"
             "<tr><th class=l>bytes per allreduce, mean / largest</th><td>%s / %s</td></tr>"
             "<tr><th class=l>fusion threshold</th><td>%s</td></tr>"
             "<tr><th class=l>cycles with allreduces</th><td>%ld</td></tr>"
             "<tr><th class=l>of them, several allreduces of one dtype</th><td>%ld</td></tr>"
             "<tr><th class=l>of those, more bytes than the threshold</th><td>%ld</td></tr>"
             "<tr><th class=l>most bytes in one cycle</th><td>%s</td></tr></table>\n",
          u->ncoll, u->per_step, u->single, u->mean_tensors,
          rp_fmt_bytes(u->mean_bytes, b1, sizeof b1), rp_fmt_bytes(u->max_bytes, b2, sizeof b2),
          u->threshold < 0 ? "unknown" : u->threshold == 0 ? "0 (fusion off)"
                                                            : rp_fmt_bytes(u->threshold, b3, sizeof b3),
          u->cycles, u->together, u->split, rp_fmt_bytes(u->max_cycle_bytes, b4, sizeof b4));
  if (with_charts) image(f, dir, "fusion.png", "tensors and bytes per allreduce");
}

static void bandwidth(FILE *f, const rp_report *r, const char *dir, int with_charts) {
  char b1[32], b2[32], b3[32];
  fprintf(f, "<h2>Bandwidth</h2>\n<p>Bus bandwidth (bytes / time x 2(n-1)/n, as hvd-bench and "
             "nccl-tests define it) of the allreduces, by size; medians.%s</p>\n<table><tr>"
             "<th>sizes</th><th>allreduces</th><th>median size</th><th>median time</th>"
             "<th>busbw (GB/s)</th><th>hvd-bench busbw</th><th>of hvd-bench</th></tr>\n",
          r->has_bench ? " hvd-bench's busbw is interpolated at each median size." : "");
  for (int i = 0; i < r->bw.nrows; i++) {
    const rp_bw_row *x = &r->bw.rows[i];
    fprintf(f, "<tr><td>%s-</td><td>%ld</td><td>%s</td><td>%s</td><td>%.4g</td>",
            rp_fmt_bytes(x->lo, b1, sizeof b1), x->n, rp_fmt_bytes(x->bytes, b2, sizeof b2),
            rp_fmt_time(x->us, b3, sizeof b3), x->busbw);
    if (x->bench > 0) fprintf(f, "<td>%.4g</td><td>%.0f%%</td></tr>\n", x->bench, 100 * x->busbw / x->bench);
    else fprintf(f, "<td></td><td></td></tr>\n");
  }
  fprintf(f, "</table>\n");
  if (with_charts) image(f, dir, "busbw.png", "allreduce bus bandwidth by size");
}

static void notes(FILE *f, const rp_report *r) {
  if (r->nnotes == 0) return;
  fprintf(f, "<h2>Notes</h2>\n<ul class=note>\n");
  for (int i = 0; i < r->nnotes; i++) {
    fprintf(f, "<li>");
    esc(f, r->notes[i]);
    fprintf(f, "</li>\n");
  }
  fprintf(f, "</ul>\n");
}

int rp_html(const rp_report *r, const char *dir, int with_charts) {
  char path[4096];
  snprintf(path, sizeof path, "%s/report.html", dir);
  FILE *f = fopen(path, "w");
  if (!f) return rp_err("%s: %s", path, strerror(errno));
  fprintf(f, "<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=\"utf-8\">\n"
             "<title>hvd-report: why doesn't my job scale?</title>\n<style>%s</style>\n</head>\n"
             "<body>\n<h1>Why doesn't my job scale?</h1>\n", style);
  summary(f, r);
  findings(f, r);
  steps(f, r, dir, with_charts);
  lateness(f, r, dir, with_charts);
  fusion(f, r, dir, with_charts);
  bandwidth(f, r, dir, with_charts);
  notes(f, r);
  fprintf(f, "</body>\n</html>\n");
  if (fclose(f) != 0) return rp_err("%s: %s", path, strerror(errno));
  return 0;
}
