/*
 * bench.c -- what hvd-bench measured, to compare the job's allreduces with.
 *
 * `hvd-bench --csv` prints "op,bytes,time_us,algbw_GBps,busbw_GBps" lines;
 * through hvdrun they come prefixed "[0]<stdout>:", which is read past,
 * as are comments, blank lines and the header.  Only the allreduce rows
 * are kept, one per size (rows of one size repeated are averaged).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* The line without hvdrun's "[N]<stdout>:" prefix. */
static char *unprefixed(char *line) {
  if (line[0] != '[') return line;
  char *p = strstr(line, "]<stdout>:");
  return p ? p + strlen("]<stdout>:") : line;
}

static int by_bytes(const void *a, const void *b) {
  double x = ((const rp_point *)a)->bytes, y = ((const rp_point *)b)->bytes;
  return (x > y) - (x < y);
}

/* Sorts the points and averages those of one size. */
static void one_per_size(rp_bench *b) {
  qsort(b->p, (size_t)b->n, sizeof *b->p, by_bytes);
  int k = 0;
  for (int i = 0; i < b->n;) {
    int j = i;
    double sum = 0;
    for (; j < b->n && b->p[j].bytes == b->p[i].bytes; j++) sum += b->p[j].busbw;
    b->p[k++] = (rp_point){b->p[i].bytes, sum / (j - i)};
    i = j;
  }
  b->n = k;
}

/* One line into b: 0, 1 for a line that is not a row, -1 for a bad row. */
static int parse_line(char *line, rp_bench *b, int *cap) {
  char op[32];
  double bytes, us, algbw, busbw;
  char *s = unprefixed(line);
  s[strcspn(s, "\r\n")] = '\0';
  if (s[0] == '\0' || s[0] == '#' || strncmp(s, "op,", 3) == 0) return 1;
  char tail;
  if (sscanf(s, "%31[^,],%lf,%lf,%lf,%lf%c", op, &bytes, &us, &algbw, &busbw, &tail) != 5)
    return -1;
  if (strcmp(op, "allreduce") != 0 || !(bytes > 0) || !(busbw > 0)) return 0;
  if (b->n == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    rp_point *p = realloc(b->p, (size_t)*cap * sizeof *p);
    if (!p) return rp_err("out of memory");
    b->p = p;
  }
  b->p[b->n++] = (rp_point){bytes, busbw};
  return 0;
}

int rp_bench_read(const char *path, rp_bench *b) {
  memset(b, 0, sizeof *b);
  FILE *f = fopen(path, "r");
  if (!f) return rp_err("%s: %s", path, strerror(errno));
  char line[4096];
  int cap = 0, lineno = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    lineno++;
    if (parse_line(line, b, &cap) < 0)
      rc = rp_err("%s:%d: not an hvd-bench --csv line (op,bytes,time_us,algbw_GBps,busbw_GBps)",
                  path, lineno);
  }
  fclose(f);
  if (rc == 0 && b->n == 0) rc = rp_err("%s: no allreduce rows (make it with hvd-bench --op allreduce --csv)", path);
  if (rc < 0) return rp_bench_free(b), -1;
  one_per_size(b);
  return 0;
}

double rp_bench_at(const rp_bench *b, double bytes) {
  if (b->n == 0 || !(bytes > 0)) return -1;
  if (bytes <= b->p[0].bytes) return b->p[0].busbw;
  if (bytes >= b->p[b->n - 1].bytes) return b->p[b->n - 1].busbw;
  int i = 1;
  while (b->p[i].bytes < bytes) i++;
  double x0 = log2(b->p[i - 1].bytes), x1 = log2(b->p[i].bytes), x = log2(bytes);
  return b->p[i - 1].busbw + (b->p[i].busbw - b->p[i - 1].busbw) * (x - x0) / (x1 - x0);
}

void rp_bench_free(rp_bench *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
