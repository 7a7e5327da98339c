/*
 * launch_tree.c -- the shape of the launch tree (launch_tree.h).
 *
 * The hosts [lo, hi) under one starter are cut into at most `fanout`
 * runs of nearly equal length; the first host of each run is started by
 * that starter, and starts the rest of its run the same way.  A run of
 * m hosts leaves m - 1 below its first, so the depth grows by one each
 * time m is divided by fanout.
 */
#include "launch_tree.h"

static void place(int lo, int hi, int starter, int fanout, int *parent) {
  int n = hi - lo;
  int runs = n < fanout ? n : fanout;
  for (int r = 0, at = lo; r < runs; r++) {
    int len = n / runs + (r < n % runs);
    parent[at] = starter;
    place(at + 1, at + len, at, fanout, parent);
    at += len;
  }
}

void launch_tree(int n, int fanout, int *parent) {
  if (fanout <= 0 || n <= fanout) {
    for (int i = 0; i < n; i++) parent[i] = -1;
    return;
  }
  place(0, n, -1, fanout, parent);
}

int launch_tree_depth(int n, const int *parent) {
  int deepest = 0;
  for (int i = 0; i < n; i++) {
    int d = 1;
    for (int p = parent[i]; p >= 0; p = parent[p]) d++;
    if (d > deepest) deepest = d;
  }
  return deepest;
}
