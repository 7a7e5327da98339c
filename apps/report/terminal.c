/*
 * terminal.c -- what hvd-report prints: one line about the job, each
 * rank's split of a step, and the top findings, wrapped to 100 columns.
 */
#include <string.h>

#include "report.h"

#define WIDTH 100

/* text wrapped at spaces, each line after the first indented by `indent` */
static void wrapped(FILE *out, const char *text, int indent, int first_used) {
  int col = first_used;
  while (*text) {
    size_t word = strcspn(text, " ");
    if (col > indent && col + 1 + (int)word > WIDTH) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', out);
      col++;
    }
    fwrite(text, 1, word, out);
    col += (int)word;
    text += word;
    text += strspn(text, " ");
  }
  fputc('\n', out);
}

static void job_line(const rp_report *r, FILE *out) {
  const rp_timeline *ref = &r->tl[r->ref];
  const rp_steps *s = &r->steps[r->ref];
  char b[32];
  int lo = r->tl[0].job.rank, hi = r->tl[r->ntl - 1].job.rank;
  fprintf(out, "hvd-report: %d timeline%s", r->ntl, r->ntl == 1 ? "" : "s");
  if (lo >= 0 && lo == hi) fprintf(out, " (rank %d", lo);
  else if (lo >= 0) fprintf(out, " (ranks %d-%d", lo, hi);
  else fprintf(out, " (");
  fprintf(out, "%sof %d, %s), %d steps, median %s\n", lo >= 0 ? " " : "", ref->job.size,
          ref->job.transport[0] ? ref->job.transport : "transport unknown", s->n,
          rp_fmt_time(s->median_len, b, sizeof b));
}

void rp_print(const rp_report *r, FILE *out, int top) {
  char b[32];
  job_line(r, out);
  fprintf(out, "  %6s %6s %12s %10s %12s %14s\n", "rank", "steps", "median step", "computing",
          "negotiating", "communicating");
  for (int i = 0; i < r->ntl; i++) {
    rp_split x = rp_shares(r, i);
    fprintf(out, "  %6d %6d %12s %9.0f%% %11.0f%% %13.0f%%\n", r->tl[i].job.rank, r->steps[i].n,
            rp_fmt_time(r->steps[i].median_len, b, sizeof b), 100 * x.compute,
            100 * x.negotiate, 100 * x.comm);
  }
  fprintf(out, "Findings:\n");
  if (r->nfindings == 0) fprintf(out, "  nothing stands out\n");
  for (int i = 0; i < r->nfindings && i < top; i++) {
    fprintf(out, "  %d. ", i + 1);
    wrapped(out, r->findings[i].text, 5, 5);
  }
  if (r->nnotes) fprintf(out, "Notes:\n");
  for (int i = 0; i < r->nnotes; i++) {
    fprintf(out, "  - ");
    wrapped(out, r->notes[i], 4, 4);
  }
}
