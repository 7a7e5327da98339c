/*
 * main.c -- hvd-report: why doesn't my job scale?
 *
 *   hvd-report TIMELINE... [-o DIR] [--bench CSV] [--no-charts] [--top N]
 *
 * TIMELINE is a timeline file, or a directory of them (what
 * HOROVOD_TIMELINE=DIR/ writes: every *.json in it).  Reads them all,
 * analyses them (report.h says how), prints the job's summary and the top
 * findings, and writes DIR/report.html (self-contained) and the charts
 * (PNG files in DIR, drawn by gnuplot).  Exit status 0, 1 when a file cannot be read
 * or written (the message names it), 2 for a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "report.h"

typedef struct {
  const char *out;   /* -o */
  const char *bench; /* --bench */
  int charts, top;
  char **paths;      /* files, directories expanded */
  int npaths;
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: hvd-report TIMELINE... [-o DIR] [--bench CSV] [--no-charts] [--top N]\n\n"
          "Reads hvd timelines (HOROVOD_TIMELINE: rank 0's file, or every rank's with %%r or a\n"
          "directory) and says why the job does not scale: per step, time computing,\n"
          "negotiating and communicating; the ranks the others waited for; fusion; bus\n"
          "bandwidth; and what to change.  TIMELINE is a file or a directory of *.json.\n\n"
          "  -o, --output DIR  where report.html and the charts go (default: hvd-report)\n"
          "  --bench CSV       hvd-bench --op allreduce --csv output from the same hosts and\n"
          "                    transport, to compare the allreduces' bus bandwidth with\n"
          "  --no-charts       skip the PNG charts (gnuplot)\n"
          "  --top N           findings printed on the terminal (default 5; the page has all)\n"
          "  -h, --help        this help\n");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int add_path(options *o, const char *path) {
  char **p = realloc(o->paths, ((size_t)o->npaths + 1) * sizeof *p);
  if (!p) return rp_err("out of memory");
  o->paths = p;
  if (!(p[o->npaths] = strdup(path))) return rp_err("out of memory");
  o->npaths++;
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.json in dir. */
static int add_dir(options *o, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return rp_err("%s: %s", dir, strerror(errno));
  int before = o->npaths, rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0 || e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    rc = add_path(o, path);
  }
  closedir(d);
  if (rc == 0 && o->npaths == before) rc = rp_err("%s: no *.json timelines in it", dir);
  if (o->npaths - before > 1) qsort(o->paths + before, (size_t)(o->npaths - before), sizeof *o->paths, by_name);
  return rc;
}

static int parse(int argc, char **argv, options *o) {
  static const struct option longs[] = {{"output", required_argument, 0, 'o'},
                                        {"bench", required_argument, 0, 'b'},
                                        {"no-charts", no_argument, 0, 'n'},
                                        {"top", required_argument, 0, 't'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  *o = (options){.out = "hvd-report", .charts = 1, .top = 5};
  int c;
  char *end;
  while ((c = getopt_long(argc, argv, "o:h", longs, NULL)) != -1) {
    switch (c) {
      case 'o': o->out = optarg; break;
      case 'b': o->bench = optarg; break;
      case 'n': o->charts = 0; break;
      case 't':
        o->top = (int)strtol(optarg, &end, 10);
        if (*end || o->top < 0) return fprintf(stderr, "hvd-report: --top '%s': expected a count\n", optarg), 2;
        break;
      case 'h': usage(stdout); return 1;
      default: usage(stderr); return 2;
    }
  }
  if (optind == argc) return fprintf(stderr, "hvd-report: no timeline given\n"), usage(stderr), 2;
  for (int i = optind; i < argc; i++) {
    struct stat st;
    int rc = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? add_dir(o, argv[i]) : add_path(o, argv[i]);
    if (rc < 0) return fprintf(stderr, "hvd-report: %s\n", rp_error()), 3;
  }
  return 0;
}

static int by_rank(const void *a, const void *b) {
  int x = ((const rp_timeline *)a)->job.rank, y = ((const rp_timeline *)b)->job.rank;
  if (x < 0) x = 1 << 30;
  if (y < 0) y = 1 << 30;
  return (x > y) - (x < y);
}

/* Reads every timeline, by rank; one job's, one file per rank. */
static int read_all(const options *o, rp_report *r, double *bytes) {
  r->tl = calloc((size_t)o->npaths, sizeof *r->tl);
  if (!r->tl) return rp_err("out of memory");
  for (int i = 0; i < o->npaths; i++) {
    if (rp_read(o->paths[i], &r->tl[i]) < 0) return -1;
    r->ntl++;
    *bytes += (double)r->tl[i].file_bytes;
  }
  qsort(r->tl, (size_t)r->ntl, sizeof *r->tl, by_rank);
  for (int i = 1; i < r->ntl; i++) {
    const rp_timeline *a = &r->tl[i - 1], *b = &r->tl[i];
    if (a->job.rank >= 0 && a->job.rank == b->job.rank)
      return rp_err("%s and %s are both rank %d's timeline", a->path, b->path, a->job.rank);
    if (a->has_job && b->has_job && a->job.size != b->job.size)
      return rp_err("%s and %s come from different jobs (of %d and %d ranks)", a->path, b->path,
                    a->job.size, b->job.size);
  }
  return 0;
}

static int make_dir(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(path, 0755) < 0 && errno != EEXIST) return rp_err("cannot create %s: %s", path, strerror(errno));
    *p = c;
    if (c == '\0') return 0;
  }
}

static int run(const options *o) {
  rp_report r;
  memset(&r, 0, sizeof r);
  double t0 = now_s(), bytes = 0;
  int rc = read_all(o, &r, &bytes);
  if (rc == 0 && o->bench) rc = rp_bench_read(o->bench, &r.bench), r.has_bench = rc == 0;
  if (rc == 0) rc = rp_analyze(&r);
  if (rc == 0) rc = make_dir(o->out);
  int charts = 0;
  if (rc == 0 && o->charts) {
    charts = rp_charts(&r, o->out) == 0;
    if (!charts) fprintf(stderr, "hvd-report: no charts: %s\n", rp_error());
  }
  if (rc == 0) rc = rp_html(&r, o->out, charts);
  if (rc == 0) {
    rp_print(&r, stdout, o->top);
    printf("Wrote %s/report.html%s (%.1f MB of timelines in %.2f s)\n", o->out,
           charts ? " and its charts" : "", bytes / 1e6, now_s() - t0);
  } else {
    fprintf(stderr, "hvd-report: %s\n", rp_error());
  }
  rp_report_free(&r);
  return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc == 0) rc = run(&o);
  else rc = rc == 1 ? 0 : rc == 3 ? 1 : 2;
  for (int i = 0; i < o.npaths; i++) free(o.paths[i]);
  free(o.paths);
  return rc;
}
