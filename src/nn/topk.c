/*
 * topk.c -- which values top-k sparsification sends: the k of largest
 * magnitude (Aji and Heafield 2017; Stich et al. 2018 for the error
 * feedback that lossy.c keeps).
 *
 * Selection is a quickselect over (magnitude, index) keys, which are all
 * distinct, so the chosen set is fully determined by the values: a tie in
 * magnitude goes to the smaller index, whatever the pivot order did.
 */
#include <math.h>
#include <stdlib.h>

#include "lossy.h"

typedef struct {
  float mag;
  uint32_t idx;
} key;

size_t hvd_nn__topk_count(size_t n, double ratio) {
  double k = ceil(ratio * (double)n);
  if (k < 1.0) return n ? 1 : 0;
  return k >= (double)n ? n : (size_t)k;
}

/* a before b in the order of selection: larger magnitude, then smaller index. */
static int before(const key *a, const key *b) {
  return a->mag > b->mag || (a->mag == b->mag && a->idx < b->idx);
}

static void swap(key *a, key *b) {
  key t = *a;
  *a = *b;
  *b = t;
}

/* Rearranges keys[lo, hi] so that the first k (counted from 0) come
 * before all others (Hoare's selection, median-of-three pivot). */
static void select_first(key *keys, size_t lo, size_t hi, size_t k) {
  while (hi > lo) {
    size_t mid = lo + (hi - lo) / 2;
    if (before(&keys[mid], &keys[lo])) swap(&keys[mid], &keys[lo]);
    if (before(&keys[hi], &keys[lo])) swap(&keys[hi], &keys[lo]);
    if (before(&keys[hi], &keys[mid])) swap(&keys[hi], &keys[mid]);
    key pivot = keys[mid];
    size_t i = lo, j = hi;
    while (i <= j) {
      while (before(&keys[i], &pivot)) i++;
      while (before(&pivot, &keys[j])) j--;
      if (i <= j) {
        swap(&keys[i], &keys[j]);
        i++;
        if (j == 0) break;
        j--;
      }
    }
    /* Now [lo, j] come before [i, hi], and anything between equals the pivot. */
    if (k <= j && j != (size_t)-1 && j >= lo)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      return;
  }
}

static int by_index(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

int hvd_nn__topk_select(const float *v, size_t n, size_t k, uint32_t *idx) {
  if (k == 0) return 0;
  key *keys = malloc(n * sizeof *keys);
  if (!keys) return hvd_nn__err(HVD_E_NOMEM, "top-k: keys for %zu values", n);
  for (size_t i = 0; i < n; i++)
    keys[i] = (key){isnan(v[i]) ? INFINITY : fabsf(v[i]), (uint32_t)i};
  if (k < n) select_first(keys, 0, n - 1, k - 1);
  for (size_t i = 0; i < k; i++) idx[i] = keys[i].idx;
  free(keys);
  qsort(idx, k, sizeof *idx, by_index);
  return 0;
}
