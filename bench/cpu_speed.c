/*
 * cpu_speed.c -- how fast this core runs right now: a fixed chain of
 * dependent integer operations, timed.  Prints "ns_per_iter" (the median
 * of 5 pieces of 10^7 iterations, about 10 ms each).
 *
 * The development machine is a VM whose speed moves with its neighbours:
 * the same loop read 1.1 to 1.7 ns per iteration across 50 ms pieces of
 * one second.  A small allreduce is mostly instructions, so its time
 * moves with it, and two programs timed a few seconds apart can differ by
 * that much for that reason alone.  bench/compare-openmpi runs this before
 * every job and prints the spread beside its tables, so that a reader
 * can tell a quiet run from a noisy one.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "timing.h"

#define ITERS 10000000L
#define PIECES 5

/* Each step needs the last: no two overlap, whatever the core. */
static double piece_ns(void) {
  volatile uint32_t sink;
  uint32_t x = 1;
  double t0 = now_s();
  for (long i = 0; i < ITERS; i++) x = x * 1664525u + 1013904223u;
  double t = now_s() - t0;
  sink = x;
  (void)sink;
  return t * 1e9 / (double)ITERS;
}

int main(void) {
  double ns[PIECES];
  for (int i = 0; i < PIECES; i++) ns[i] = piece_ns();
  qsort(ns, PIECES, sizeof ns[0], by_value);
  printf("%.3f\n", ns[PIECES / 2]);
  return 0;
}
