/*
 * desync.c -- certain deadlocks: ranks that can never go on, found from
 * what every rank knows alike and ended on every rank in the same cycle
 * (docs/reliability.md, "No hang").
 *
 * Each rank's message in a full exchange says whether the rank is
 * blocked: every thread of it that could still submit a tensor waits on
 * hvd (waits.h).  A blocked rank submits nothing more until one of its
 * waits ends.  The pending table is the same on every rank, so every
 * rank can find the same set of stuck ranks: the largest set D of blocked
 * ranks such that every tensor a rank of D submitted and that has not
 * run lacks a rank of D.  Each rank of D waits on tensors that only ranks
 * of D could complete, and none of them can submit: nothing will ever
 * change.  (Ranks that submit different tensors and wait, or the same
 * ones in different orders synchronously, or a rank whose test failed
 * before a collective while the others wait in it and the rank waits in
 * the next.)
 *
 * Never ended: a rank that has submitted nothing is not in D, so ranks
 * waiting for a slow rank (a long evaluation on rank 0) are a stall, for
 * the stall inspector; asynchronous submissions that will complete are
 * not blocked waits; a tensor every rank submitted runs.
 *
 * When: rank 0 looks every CHECK_MS; once D has been the same non-empty
 * set for HOROVOD_DESYNC_TIMEOUT_SECONDS by its clock, its next message
 * says so (HVD_MSG_DESYNC), and every rank finds D again from that
 * cycle's messages: if it is not empty there, every rank breaks with
 * HVD_E_DESYNC and the same message; if it is (a rank went on in the
 * meantime), nothing happens.  The wait makes it conservative: a thread
 * the rule cannot see (a program that submits from a thread it never
 * used before) has that long to show up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

/* How often rank 0 looks for stuck ranks. */
#define CHECK_MS 200
/* Tensors named per rank in the message before "and N more". */
#define NAMED_PER_RANK 4

/* in[q] = 1 for the blocked ranks that submitted a tensor still in the
 * table (those wait on something negotiation can see). */
static void candidates(hvd_engine *e, uint8_t *in) {
  for (int q = 0; q < e->size; q++) in[q] = e->desync.blocked[q] && !e->join.joined[q] ? 1 : 0;
  for (const pending *p = e->table.head; p; p = p->next)
    for (int q = 0; p->submitted && q < e->size; q++)
      if (p->submitted[q]) in[q] |= 2;
  for (int q = 0; q < e->size; q++) in[q] = in[q] == 3;
}

/* Whether p lacks a rank marked in `in` (scratch: [size]). */
static int lacks_one_of(hvd_engine *e, const pending *p, const uint8_t *in, int *scratch) {
  int n = hvd__pending_missing(e, p, scratch);
  for (int i = 0; i < n; i++)
    if (in[scratch[i]]) return 1;
  return 0;
}

/* The stuck ranks (above) into in[]; how many. */
static int find_stuck(hvd_engine *e, uint8_t *in, int *scratch) {
  int n = 0;
  candidates(e, in);
  for (int changed = 1; changed;) {
    changed = 0;
    for (const pending *p = e->table.head; p; p = p->next) {
      if (!p->submitted || lacks_one_of(e, p, in, scratch)) continue;
      for (int q = 0; q < e->size; q++) /* its submitters can go on once it runs */
        if (p->submitted[q] && in[q]) in[q] = 0, changed = 1;
    }
  }
  for (int q = 0; q < e->size; q++) n += in[q];
  return n;
}

/* "rank 0 waits on 'a' (missing ranks [1]); rank 1 ..." for the ranks in
 * in[], the same text on every rank. */
static void describe(hvd_engine *e, const uint8_t *in, int *scratch, char *out, size_t cap) {
  size_t len = (size_t)snprintf(out, cap, "deadlock: these ranks wait in hvd on tensors that "
                                "only ranks also waiting could submit, so none can go on (do "
                                "all ranks call the same collectives, with the same names, in "
                                "an order that lets each complete?):");
  for (int q = 0, first = 1; q < e->size && len < cap; q++) {
    if (!in[q]) continue;
    int k = 0;
    len += (size_t)snprintf(out + len, cap - len, "%s rank %d waits on", first ? "" : ";", q);
    first = 0;
    for (const pending *p = e->table.head; p && len < cap; p = p->next) {
      if (!p->submitted || !p->submitted[q]) continue;
      int n = hvd__pending_missing(e, p, scratch);
      if (k++ >= NAMED_PER_RANK) continue;
      char ranks[256];
      hvd__format_ranks(ranks, sizeof ranks, scratch, n);
      len += (size_t)snprintf(out + len, cap - len, "%s '%s' (missing ranks %s)",
                              k > 1 ? "," : "", p->req.name, ranks);
    }
    if (k > NAMED_PER_RANK && len < cap)
      len += (size_t)snprintf(out + len, cap - len, " and %d more", k - NAMED_PER_RANK);
  }
}

/* Every rank, once rank 0 said the deadlock lasted: still there in this
 * cycle's messages?  Then the engine stops with its description. */
static int decide(hvd_engine *e, int *stop) {
  uint8_t *in = malloc((size_t)e->size);
  int *scratch = malloc((size_t)e->size * sizeof *scratch);
  int found = in && scratch && find_stuck(e, in, scratch) > 0;
  if (found) {
    char why[sizeof e->core.why];
    describe(e, in, scratch, why, sizeof why);
    pthread_mutex_lock(&e->core.lock); /* read by application threads under it */
    snprintf(e->core.why, sizeof e->core.why, "%s", why);
    pthread_mutex_unlock(&e->core.lock);
    *stop = HVD_E_DESYNC;
  }
  free(in);
  free(scratch);
  return found;
}

/* Rank 0: whether the stuck ranks are the same as at its last look, and
 * since when. */
static void look(hvd_engine *e) {
  hvd__desync *d = &e->desync;
  uint64_t now = hvd__engine_clock_ns(&e->core) / 1000000u;
  if (now - d->checked_ms < CHECK_MS) return;
  d->checked_ms = now;
  uint8_t *in = malloc((size_t)e->size);
  int *scratch = malloc((size_t)e->size * sizeof *scratch);
  if (in && scratch && find_stuck(e, in, scratch) > 0) {
    if (!d->since_ms || memcmp(in, d->stuck, (size_t)e->size) != 0) {
      memcpy(d->stuck, in, (size_t)e->size);
      d->since_ms = now;
    }
  } else {
    d->since_ms = 0;
  }
  free(in);
  free(scratch);
}

int hvd__desync_check(hvd_engine *e, const hvd_msg *msgs, int *stop) {
  int any = 0;
  for (int q = 0; q < e->size; q++) {
    e->desync.blocked[q] = (msgs[q].flags & HVD_MSG_BLOCKED) != 0;
    any |= e->desync.blocked[q];
  }
  if ((msgs[0].flags & HVD_MSG_DESYNC) && !*stop && decide(e, stop)) return 1;
  if (e->rank == 0 && e->desync.timeout_s > 0) {
    if (any && e->table.head) look(e);
    else e->desync.since_ms = 0;
  }
  return 0;
}

void hvd__desync_inspect(hvd_engine *e, hvd_msg *mine) {
  const hvd__desync *d = &e->desync;
  if (!d->since_ms || d->timeout_s <= 0) return;
  uint64_t now = hvd__engine_clock_ns(&e->core) / 1000000u;
  if (now - d->since_ms >= (uint64_t)d->timeout_s * 1000u) mine->flags |= HVD_MSG_DESYNC;
}
