/*
 * bandwidth.c -- the bus bandwidth the job's allreduces reached.
 *
 * busbw is nccl-tests' and hvd-bench's measure: bytes / time * 2(n-1)/n,
 * the rate each rank's link carried in a bandwidth-optimal allreduce,
 * comparable across job sizes and with what hvd-bench measured alone on
 * the same transport.  Allreduces are grouped by size, powers of two, and
 * each group gives the medians of its sizes, times and busbw.  A fused
 * allreduce counts once, with all its bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

double rp_busbw(double bytes, double us, int size) {
  if (size < 2 || !(us > 0) || !(bytes > 0)) return 0;
  return bytes / (us * 1e3) * 2.0 * (size - 1) / size;
}

typedef struct {
  int bucket;
  double bytes, us, busbw;
} sample;

static int by_bucket(const void *a, const void *b) {
  int x = ((const sample *)a)->bucket, y = ((const sample *)b)->bucket;
  return (x > y) - (x < y);
}

/* The medians of samples v[0..n), all of one bucket. */
static rp_bw_row row_of(sample *v, size_t n, const rp_bench *bench) {
  double *tmp = malloc(n * sizeof *tmp);
  rp_bw_row r = {ldexp(1, v[0].bucket), (long)n, 0, 0, 0, -1};
  if (!tmp) return r;
  for (size_t i = 0; i < n; i++) tmp[i] = v[i].bytes;
  r.bytes = rp_median(tmp, n);
  for (size_t i = 0; i < n; i++) tmp[i] = v[i].us;
  r.us = rp_median(tmp, n);
  for (size_t i = 0; i < n; i++) tmp[i] = v[i].busbw;
  r.busbw = rp_median(tmp, n);
  free(tmp);
  if (bench) r.bench = rp_bench_at(bench, r.bytes);
  return r;
}

void rp_bandwidth_of(const rp_timeline *t, const rp_bench *bench, rp_bandwidth *out) {
  memset(out, 0, sizeof *out);
  out->size = t->job.size;
  if (out->size < 2) return;
  sample *v = malloc((t->ncolls + 1) * sizeof *v);
  size_t n = 0;
  for (size_t i = 0; v && i < t->ncolls; i++) {
    const rp_coll *k = &t->colls[i];
    if (k->op != RP_ALLREDUCE || !(k->bytes >= 1) || !(k->end > k->begin)) continue;
    double us = k->end - k->begin;
    v[n++] = (sample){(int)floor(log2(k->bytes)), k->bytes, us, rp_busbw(k->bytes, us, out->size)};
  }
  qsort(v, n, sizeof *v, by_bucket);
  for (size_t i = 0; i < n && out->nrows < 64;) {
    size_t j = i;
    while (j < n && v[j].bucket == v[i].bucket) j++;
    out->rows[out->nrows++] = row_of(v + i, j - i, bench);
    i = j;
  }
  free(v);
}
