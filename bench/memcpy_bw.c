/*
 * memcpy_bw.c -- single-thread memcpy bandwidth, the ceiling
 * bench/compare-openmpi prints beside the shared-memory results: a
 * shared-memory allreduce moves every byte through memory at least once.
 * Prints "bytes,GBps" for 16 MiB and 64 MiB (median of 9 copies).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

int main(void) {
  static const size_t sizes[] = {16u << 20, 64u << 20};
  for (int s = 0; s < 2; s++) {
    size_t n = sizes[s];
    char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) return 1;
    memset(src, 1, n);
    memset(dst, 2, n);
    double t[9];
    for (int i = 0; i < 9; i++) {
      double t0 = now_s();
      memcpy(dst, src, n);
      t[i] = now_s() - t0;
      src[i] = dst[n - 1 - (size_t)i]; /* keep the copies observable */
    }
    qsort(t, 9, sizeof t[0], by_value);
    printf("%zu,%.2f\n", n, (double)n / t[4] / 1e9);
    free(src);
    free(dst);
  }
  return 0;
}
