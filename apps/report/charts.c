/*
 * charts.c -- the report's PNG charts, drawn by gnuplot (Debian's
 * gnuplot-nox: its pngcairo terminal needs no display).
 *
 * One gnuplot script draws them all, with the data inline ($name << EOD
 * blocks), so one process starts however many charts there are.  The
 * script goes to DIR/.charts.gp and gnuplot's complaints to
 * DIR/.charts.log; both are removed when it succeeds.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

extern char **environ;

const char *const rp_chart_names[] = {"steps.png", "ranks.png", "lateness.png", "fusion.png",
                                      "busbw.png", NULL};

#define MAX_BARS 400    /* steps drawn; more are averaged in groups */
#define MAX_POINTS 5000 /* collectives drawn; more are sampled evenly */

static const char colors[] =
    "set style line 1 lc rgb '#4c9a2a' lw 1\n"  /* computing */
    "set style line 2 lc rgb '#e69f00' lw 1\n"  /* negotiating */
    "set style line 3 lc rgb '#0072b2' lw 1\n"  /* communicating */
    "set style line 4 lc rgb '#cc3311' lw 2\n"; /* attention */

/* path inside gnuplot's single quotes, where a quote is written twice */
static void put_path(FILE *f, const char *dir, const char *name) {
  fputc('\'', f);
  for (const char *p = dir; *p; p++) {
    if (*p == '\'') fputc('\'', f);
    fputc(*p, f);
  }
  fprintf(f, "/%s'", name);
}

static void begin_chart(FILE *f, const char *dir, const char *name, const char *title) {
  fprintf(f, "reset\nset terminal pngcairo size 960,360 font 'sans,10' noenhanced\n%s", colors);
  fprintf(f, "set output ");
  put_path(f, dir, name);
  fprintf(f, "\nset title '%s'\nset key outside right top\nset grid ytics\n"
             "set style fill solid 0.9 border -1\n", title);
}

/* An empty chart that says why. */
static void no_data(FILE *f, const char *why) {
  fprintf(f, "unset key\nset label 1 '%s' at graph 0.5, 0.5 center\nplot [0:1][0:1] NaN\n", why);
}

/* Stacked bars: $d holds x compute negotiate comm (ms); tallest drawn first. */
static void stacked(FILE *f, const char *xlabel) {
  fprintf(f, "set xlabel '%s'\nset ylabel 'ms'\nset boxwidth 0.8 relative\nset yrange [0:*]\n"
             "plot $d using 1:($2+$3+$4) with boxes ls 3 title 'communicating', "
             "'' using 1:($2+$3) with boxes ls 2 title 'negotiating', "
             "'' using 1:2 with boxes ls 1 title 'computing'\n", xlabel);
}

static void steps_chart(FILE *f, const rp_report *r, const char *dir) {
  const rp_steps *s = &r->steps[r->ref];
  char title[160];
  snprintf(title, sizeof title, "Rank %d: each step, computing / negotiating / communicating",
           r->tl[r->ref].job.rank >= 0 ? r->tl[r->ref].job.rank : r->ref);
  begin_chart(f, dir, "steps.png", title);
  if (s->n == 0) {
    no_data(f, "no steps found");
    return;
  }
  int group = (s->n + MAX_BARS - 1) / MAX_BARS;
  fprintf(f, "$d << EOD\n");
  for (int k = 0; k < s->n; k += group) {
    rp_split sum = {0, 0, 0};
    int m = 0;
    for (; m < group && k + m < s->n; m++) {
      sum.compute += s->split[k + m].compute;
      sum.negotiate += s->split[k + m].negotiate;
      sum.comm += s->split[k + m].comm;
    }
    fprintf(f, "%d %.4f %.4f %.4f\n", k, sum.compute / m / 1e3, sum.negotiate / m / 1e3,
            sum.comm / m / 1e3);
  }
  fprintf(f, "EOD\nset xrange [-1:%d]\n", s->n);
  stacked(f, group > 1 ? "step (each bar: the mean of a group of steps)" : "step");
}

static void ranks_chart(FILE *f, const rp_report *r, const char *dir) {
  begin_chart(f, dir, "ranks.png", "Each rank: the mean step, computing / negotiating / communicating");
  fprintf(f, "$d << EOD\n");
  int any = 0, last = 0;
  for (int i = 0; i < r->ntl; i++) {
    const rp_steps *s = &r->steps[i];
    int rank = r->tl[i].job.rank >= 0 ? r->tl[i].job.rank : i;
    if (s->nkept == 0) continue;
    any = 1;
    if (rank > last) last = rank;
    fprintf(f, "%d %.4f %.4f %.4f\n", rank,
            s->total.compute / s->nkept / 1e3, s->total.negotiate / s->nkept / 1e3,
            s->total.comm / s->nkept / 1e3);
  }
  fprintf(f, "EOD\n");
  if (!any) {
    no_data(f, "no steps found");
    return;
  }
  fprintf(f, "set xtics 1\nset xrange [-0.5:%d.5]\n", last);
  stacked(f, "rank");
}

static void lateness_chart(FILE *f, const rp_report *r, const char *dir) {
  const rp_lateness *l = &r->late;
  begin_chart(f, dir, "lateness.png",
              "How late each rank was ready, after the first rank (mean per tensor)");
  if (l->nocc == 0) {
    no_data(f, "no tensor with a ready tick from every rank");
    return;
  }
  fprintf(f, "$d << EOD\n");
  for (int q = 0; q < l->size; q++)
    fprintf(f, "%d %.4f %.4f\n", q, q == l->straggler ? 0 : l->ranks[q].mean_late / 1e3,
            q == l->straggler ? l->ranks[q].mean_late / 1e3 : 0);
  fprintf(f, "EOD\nset xlabel 'rank'\nset ylabel 'ms'\nset boxwidth 0.8 relative\nset xtics 1\n"
             "plot [-0.5:%d.5] $d using 1:2 with boxes ls 3 title 'mean lateness', "
             "'' using 1:3 with boxes ls 4 title 'slow rank'\n", l->size - 1);
}

static void fusion_hist(FILE *f, const rp_fusion *fu) {
  fprintf(f, "set title 'Tensors per allreduce'\nset boxwidth 0.8 relative\nunset key\n"
             "set ylabel 'allreduces'\nset xlabel 'tensors fused'\n$h << EOD\n");
  for (int b = 0; b < 8; b++) fprintf(f, "%d \"%s\" %ld\n", b, rp_fusion_bin_label(b), fu->hist[b]);
  fprintf(f, "EOD\nplot $h using 1:3:xtic(2) with boxes ls 3\n");
}

static void fusion_bytes(FILE *f, const rp_timeline *t, const rp_fusion *fu) {
  fprintf(f, "set title 'Bytes per allreduce, against the fusion threshold'\n"
             "set key inside bottom right\nset xlabel 'allreduce, in order'\nset ylabel 'bytes'\n"
             "set logscale y 2\nset format y '%%.0b %%BB'\nset xrange [0:*]\n$b << EOD\n");
  size_t n = 0, step;
  for (size_t i = 0; i < t->ncolls; i++) n += t->colls[i].op == RP_ALLREDUCE && t->colls[i].bytes > 0;
  step = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1;
  for (size_t i = 0, k = 0; i < t->ncolls; i++) {
    const rp_coll *c = &t->colls[i];
    if (c->op != RP_ALLREDUCE || !(c->bytes > 0)) continue;
    if (k++ % step == 0) fprintf(f, "%zu %.0f\n", k, c->bytes);
  }
  fprintf(f, "EOD\n");
  if (fu->threshold > 0)
    fprintf(f, "plot $b using 1:2 with points ls 3 pt 7 ps 0.4 title 'allreduce', "
               "%.0f with lines ls 4 title 'HOROVOD_FUSION_THRESHOLD'\n", fu->threshold);
  else
    fprintf(f, "plot $b using 1:2 with points ls 3 pt 7 ps 0.4 title '%s'\n",
            fu->threshold == 0 ? "allreduce (fusion off)" : "allreduce");
}

static void fusion_chart(FILE *f, const rp_report *r, const char *dir) {
  begin_chart(f, dir, "fusion.png", "");
  if (r->fusion.ncoll == 0) {
    no_data(f, "no allreduce within the steps");
    return;
  }
  fprintf(f, "set multiplot layout 1,2\nset key inside top right\n");
  fusion_hist(f, &r->fusion);
  fusion_bytes(f, &r->tl[r->ref], &r->fusion);
  fprintf(f, "unset multiplot\n");
}

static void busbw_chart(FILE *f, const rp_report *r, const char *dir) {
  const rp_timeline *t = &r->tl[r->ref];
  begin_chart(f, dir, "busbw.png", "Allreduce bus bandwidth by size");
  if (r->bw.nrows == 0) {
    no_data(f, "no allreduce between ranks");
    return;
  }
  fprintf(f, "set logscale x 2\nset format x '%%.0b %%BB'\nset xlabel 'bytes'\n"
             "set ylabel 'busbw (GB/s)'\nset key inside top left\nset yrange [0:*]\n$p << EOD\n");
  size_t step = t->ncolls > MAX_POINTS ? (t->ncolls + MAX_POINTS - 1) / MAX_POINTS : 1;
  for (size_t i = 0; i < t->ncolls; i += step) {
    const rp_coll *c = &t->colls[i];
    if (c->op == RP_ALLREDUCE && c->bytes >= 1 && c->end > c->begin)
      fprintf(f, "%.0f %.6f\n", c->bytes, rp_busbw(c->bytes, c->end - c->begin, r->bw.size));
  }
  fprintf(f, "EOD\n$m << EOD\n");
  for (int i = 0; i < r->bw.nrows; i++) fprintf(f, "%.0f %.6f\n", r->bw.rows[i].bytes, r->bw.rows[i].busbw);
  fprintf(f, "EOD\n$h << EOD\n");
  for (int i = 0; r->has_bench && i < r->bench.n; i++)
    fprintf(f, "%.0f %.6f\n", r->bench.p[i].bytes, r->bench.p[i].busbw);
  fprintf(f, "EOD\nplot $p using 1:2 with points ls 3 pt 7 ps 0.4 title 'each allreduce', "
             "$m using 1:2 with linespoints ls 2 title 'median by size'%s\n",
          r->has_bench ? ", $h using 1:2 with linespoints ls 4 title 'hvd-bench'" : "");
}

/* Runs gnuplot on script with stderr into log; 0 or -1 with a message. */
static int run_gnuplot(const char *script, const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char *argv[] = {"gnuplot", (char *)script, NULL};
  pid_t pid;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ), status = 0;
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return rp_err("cannot run gnuplot: %s (Debian: apt-get install gnuplot-nox); no charts",
                  strerror(rc));
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  char line[300], last[300] = ""; /* gnuplot ends with where and what */
  FILE *f = fopen(log, "r");
  while (f && fgets(line, sizeof line, f))
    if (line[strspn(line, " \t\n")]) memcpy(last, line, sizeof last);
  if (f) fclose(f);
  last[strcspn(last, "\n")] = '\0';
  return rp_err("gnuplot failed (see %s): %s", log, last);
}

int rp_charts(const rp_report *r, const char *dir) {
  char script[4096], log[4096];
  snprintf(script, sizeof script, "%s/.charts.gp", dir);
  snprintf(log, sizeof log, "%s/.charts.log", dir);
  FILE *f = fopen(script, "w");
  if (!f) return rp_err("%s: %s", script, strerror(errno));
  steps_chart(f, r, dir);
  ranks_chart(f, r, dir);
  lateness_chart(f, r, dir);
  fusion_chart(f, r, dir);
  busbw_chart(f, r, dir);
  if (fclose(f) != 0) return rp_err("%s: %s", script, strerror(errno));
  if (run_gnuplot(script, log) < 0) return -1;
  unlink(script);
  unlink(log);
  return 0;
}
