/*
 * live.c -- this process's sign of life and the transports' alarms
 * (live.h).
 *
 * The counter is process-wide: one engine drives one set of transports
 * per process.  (Tests that run several ranks as threads of one process
 * share it, and every one of those ranks is then as alive as the
 * process, which is what they are.)
 */
#include "live.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common.h"
#include "wire/net.h"

/* Published words: shared-memory segments of this process (one, or one
 * per rank in tests that run ranks as threads). */
#define PUBLISHED_MAX 64

static _Atomic uint64_t counter = HVD_LIVE_RESTING;
static _Atomic(_Atomic uint64_t *) published[PUBLISHED_MAX];

uint64_t hvd__live_value(void) { return atomic_load_explicit(&counter, memory_order_relaxed); }

static void publish_all(uint64_t v) {
  for (int i = 0; i < PUBLISHED_MAX; i++) {
    _Atomic uint64_t *w = atomic_load_explicit(&published[i], memory_order_acquire);
    if (w) atomic_store_explicit(w, v, memory_order_relaxed);
  }
}

void hvd__live_beat(void) {
  /* 2^63 beats never happen: the resting bit is never carried into */
  publish_all(atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) + 1);
}

void hvd__live_active(int on) {
  uint64_t v = atomic_load_explicit(&counter, memory_order_relaxed), next;
  do /* a beat may add meanwhile: none is lost, the bit is what changes */
    next = on ? (v & ~HVD_LIVE_RESTING) + 1 : v | HVD_LIVE_RESTING;
  while (!atomic_compare_exchange_weak(&counter, &v, next));
  publish_all(next);
}

int hvd__live_publish(_Atomic uint64_t *word) {
  atomic_store_explicit(word, hvd__live_value(), memory_order_relaxed);
  for (int i = 0; i < PUBLISHED_MAX; i++) {
    _Atomic uint64_t *none = NULL;
    if (atomic_compare_exchange_strong(&published[i], &none, word)) return 0;
  }
  return -1;
}

void hvd__live_unpublish(_Atomic uint64_t *word) {
  for (int i = 0; i < PUBLISHED_MAX; i++) {
    _Atomic uint64_t *w = word;
    if (atomic_compare_exchange_strong(&published[i], &w, NULL)) return;
  }
}

int hvd__alarm_init(hvd_alarm *a) {
  memset(a, 0, sizeof *a);
  a->lost = -1;
  a->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (a->fd < 0) return hvd__err_sys(HVD_E_SYSTEM, errno, "eventfd for the liveness alarm");
  return 0;
}

void hvd__alarm_close(hvd_alarm *a) {
  if (a->fd >= 0) close(a->fd);
  a->fd = -1;
}

void hvd__alarm_raise(hvd_alarm *a, int lost, const char *why) {
  int expected = 0;
  /* 2 while the verdict is written, 1 once it may be read */
  if (!atomic_compare_exchange_strong(&a->raised, &expected, 2)) return;
  a->lost = lost;
  snprintf(a->why, sizeof a->why, "%s", why);
  atomic_store_explicit(&a->raised, 1, memory_order_release);
  hvd__net_wake(a->fd);
}

int hvd__alarm_raised(hvd_alarm *a) {
  return atomic_load_explicit(&a->raised, memory_order_acquire) == 1;
}
