/*
 * memcpy_bw.c -- single-thread memcpy bandwidth, the ceiling
 * bench/compare-openmpi prints beside the shared-memory results: a
 * shared-memory allreduce moves every byte through memory at least once.
 * Prints "bytes,GBps" for 16 MiB and 64 MiB (median of 9 copies).
 *
 * `memcpy_bw nt` copies with non-temporal (streaming) stores instead, the
 * way a shared-memory allreduce could write its results: they skip the
 * read for ownership of every line written, and also the caches, so the
 * next reader finds the bytes in DRAM.  Run both on a quiet machine to see
 * which wins at these sizes (docs/algorithms.md).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

#if defined(__x86_64__)
#include <emmintrin.h>

/* dst and n 64-byte aligned (the buffers below are). */
static void copy_nt(char *dst, const char *src, size_t n) {
  for (size_t i = 0; i < n; i += 64)
    for (int k = 0; k < 4; k++)
      _mm_stream_si128((__m128i *)(void *)(dst + i + 16 * k),
                       _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16 * k)));
  _mm_sfence();
}
#else
static void copy_nt(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }
#endif

int main(int argc, char **argv) {
  int nt = argc > 1 && strcmp(argv[1], "nt") == 0;
  static const size_t sizes[] = {16u << 20, 64u << 20};
  for (int s = 0; s < 2; s++) {
    size_t n = sizes[s];
    char *src = aligned_alloc(64, n), *dst = aligned_alloc(64, n);
    if (!src || !dst) return 1;
    memset(src, 1, n);
    memset(dst, 2, n);
    double t[9];
    for (int i = 0; i < 9; i++) {
      double t0 = now_s();
      if (nt) copy_nt(dst, src, n);
      else memcpy(dst, src, n);
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
