/*
 * test_join.c -- hvd_join: ranks that run out of data early.
 *
 * Ranks have different numbers of batches, as with an uneven data split.
 * Each batch allreduces one float32 tensor with SUM and one with AVERAGE.
 * A rank that has no more batches calls hvd_join(); the others' allreduces
 * go on with the joined ranks contributing zeros, so
 *   SUM     = the sum over the ranks still active in that batch
 *   AVERAGE = that sum divided by the full job size (as Horovod does).
 * hvd_join() returns on every rank once all have joined, with the rank
 * that joined last.
 *
 * Two epochs: in the first, rank r has 3 + r batches (the last rank joins
 * last); in the second the split is reversed (rank 0 joins last).  Between
 * and after them an allreduce over every rank checks that the job is back
 * to normal.  Inputs are small integers, so the reference is exact.  Last,
 * with one rank joined, an allgather and an alltoall fail on the others
 * (a joined rank has no data to give them), and the job goes on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, failures, checks;

#define COUNT 1000

/* Rank who's input for batch b of epoch e, element i: a small integer. */
static float input(int e, int b, int who, int i) {
  return (float)((who + 1) * (b + 1) + (i * 7 + e) % 13 - 6);
}

/* Batches rank who has in epoch e. */
static int batches(int e, int who) { return 3 + (e == 0 ? who : size - 1 - who); }

/* The "epoch" of the allreduces outside the epochs, where nobody joined. */
#define EVERYONE 9

static int active(int e, int b, int who) { return e == EVERYONE || b < batches(e, who); }

/* Checks one result against the sum over the ranks active in batch b. */
static void check_batch(const char *what, const float *got, int e, int b, int average) {
  int bad = 0, first_bad = -1;
  for (int i = 0; i < COUNT; i++) {
    double want = 0;
    for (int q = 0; q < size; q++)
      if (active(e, b, q)) want += input(e, b, q, i); /* joined ranks add zeros */
    if (average) want /= size;
    if (got[i] != (float)want && bad++ == 0) first_bad = i;
  }
  CHECK(bad == 0, "epoch %d batch %d %s: %d of %d elements wrong, first at %d (got %g)", e, b,
        what, bad, COUNT, first_bad, first_bad >= 0 ? got[first_bad] : 0.0);
}

/* Every rank takes part again: a plain allreduce over the whole job. */
static void check_everyone(const char *name) {
  float x[COUNT];
  for (int i = 0; i < COUNT; i++) x[i] = input(EVERYONE, 0, rank, i);
  int rc = hvd_allreduce(x, x, COUNT, HVD_FLOAT32, HVD_SUM, name);
  CHECK(rc == 0, "%s: %s: %s", name, hvd_err_name(rc), hvd_last_error());
  if (rc == 0) check_batch(name, x, EVERYONE, 0, 0);
}

static void epoch(int e) {
  float sum_in[COUNT], sum_out[COUNT], avg[COUNT];
  int mine = batches(e, rank);
  for (int b = 0; b < mine; b++) {
    for (int i = 0; i < COUNT; i++) sum_in[i] = avg[i] = input(e, b, rank, i);
    hvd_handle hs, ha;
    CALL(hs = hvd_allreduce_async(sum_in, sum_out, COUNT, HVD_FLOAT32, HVD_SUM, "join.grad.sum"));
    CALL(ha = hvd_allreduce_async(avg, avg, COUNT, HVD_FLOAT32, HVD_AVERAGE, "join.grad.avg"));
    int rs = hvd_wait(hs);
    CHECK(rs == 0, "epoch %d batch %d SUM: %s: %s", e, b, hvd_err_name(rs), hvd_last_error());
    int ra = hvd_wait(ha);
    CHECK(ra == 0, "epoch %d batch %d AVERAGE: %s: %s", e, b, hvd_err_name(ra), hvd_last_error());
    if (rs == 0) check_batch("SUM", sum_out, e, b, 0);
    if (ra == 0) check_batch("AVERAGE", avg, e, b, 1);
  }
  int last = hvd_join();
  int want = e == 0 ? size - 1 : 0; /* the rank with the most batches */
  CHECK(last == want, "epoch %d: hvd_join returned %d (%s), expected %d, the last rank to join",
        e, last, last < 0 ? hvd_last_error() : "", want);
}

/* Rank 0 joins at once; the others find that an allgather or an alltoall
 * cannot run without it (on every one of them, naming rank 0), while
 * allreduces go on with its zeros; then they join too. */
static void gather_while_joined(void) {
  if (rank == 0) {
    int last = hvd_join();
    CHECK(last > 0, "joined first, hvd_join returned %d (%s)", last, hvd_last_error());
    return;
  }
  float x = 1, y[8] = {0};
  void *out = NULL;
  size_t counts[64] = {0}, ones[64];
  for (int q = 0; q < size; q++) ones[q] = 1;
  int rc = hvd_allgather(&x, 1, HVD_FLOAT32, &out, counts, "join.gather");
  CHECK(rc == HVD_E_INVALID && strstr(hvd_last_error(), "allgather 'join.gather': ranks [0] "
                                                        "joined (hvd_join)"),
        "allgather with rank 0 joined: %s: %s", hvd_err_name(rc), hvd_last_error());
  free(out);
  out = NULL;
  rc = hvd_alltoall(y, ones, HVD_FLOAT32, &out, counts, "join.alltoall");
  CHECK(rc == HVD_E_INVALID && strstr(hvd_last_error(), "alltoall 'join.alltoall': ranks [0] "
                                                        "joined"),
        "alltoall with rank 0 joined: %s: %s", hvd_err_name(rc), hvd_last_error());
  free(out);
  rc = hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "join.after.gather");
  CHECK(rc == 0 && x == (float)(size - 1), "allreduce after the failures: %s, sum %g",
        hvd_last_error(), (double)x);
  int last = hvd_join();
  CHECK(last > 0, "hvd_join returned %d (%s), expected a rank joined after rank 0", last,
        hvd_last_error());
}

int main(void) {
  limit_stalls();
  CALL(hvd_init());
  rank = hvd_rank();
  size = hvd_size();
  check_everyone("join.before");
  epoch(0);
  check_everyone("join.between");
  epoch(1);
  check_everyone("join.after");
  if (size > 1) gather_while_joined();
  check_everyone("join.last");
  CALL(hvd_shutdown());
  return report_checks("test_join", rank, size, checks, failures);
}
