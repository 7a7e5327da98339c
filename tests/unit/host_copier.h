/*
 * host_copier.h -- a host-memory stand-in for a GPU's copy engine, for
 * testing the staging pipeline (src/gpu/staging.c) without a GPU.
 *
 * It behaves as one CUDA stream does: copies and event records are queued
 * and a worker thread runs them in order (memcpy, after an artificial
 * delay), so copies are truly asynchronous to the caller.  "Device memory"
 * is plain host memory.  For the tests it keeps a log of what happened in
 * which order (copies completed, the collective's calls), can hold a copy
 * back until the test releases it (to prove overlap without timing), can
 * fail the Nth copy when it is queued or the pinned allocation, and says
 * whether pinned memory was freed while copies were still queued.
 */
#ifndef HVD_TEST_HOST_COPIER_H
#define HVD_TEST_HOST_COPIER_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "gpu/copier.h"

#define HC_MAX_OPS 4096
#define HC_LOG_MAX 4096

enum { HC_D2H, HC_H2D, HC_RECORD, HC_FN, HC_D2D }; /* log entry kinds */

struct hvd__copy_event {
  uint64_t target; /* done once this many operations have run */
};

typedef struct {
  int kind;
  void *dst;
  const void *src;
  size_t bytes;
  hvd__copy_event *ev;
  size_t number; /* copies: 1, 2, ... in the order queued */
} hc_op;

typedef struct {
  int kind;
  size_t offset; /* HC_D2H: source offset; HC_H2D: destination offset; HC_FN: chunk offset */
} hc_log_entry;

typedef struct host_copier {
  pthread_mutex_t mu;
  pthread_cond_t changed;
  pthread_t worker;
  int stopping;
  hc_op ops[HC_MAX_OPS]; /* ring */
  uint64_t queued, done;
  long delay_us;
  /* Offsets are logged relative to these (the test's device buffers). */
  const char *dev_src;
  char *dev_dst;
  hc_log_entry log[HC_LOG_MAX];
  size_t nlog;
  size_t copies_queued;
  long fail_copy_at; /* the copy (counted from 1) whose queueing fails; 0: none */
  int fail_alloc;    /* alloc_pinned fails */
  long hold_copy_at; /* the copy (from 1) that waits until hc_release(); 0: none */
  int holding, released;
  int freed_while_busy;
  int pinned_live;
  size_t d2d_queued; /* copies within the "device" (the engine's fusion buffer) */
  void *pinned_last; /* freed by hc_destroy if a broken pipeline left it */
} host_copier;

static inline void hc_log_locked(host_copier *h, int kind, size_t offset) {
  if (h->nlog < HC_LOG_MAX) h->log[h->nlog++] = (hc_log_entry){kind, offset};
}

/* The collective's side: tests call it from their hvd__staged_fn. */
static inline void hc_log(host_copier *h, int kind, size_t offset) {
  pthread_mutex_lock(&h->mu);
  hc_log_locked(h, kind, offset);
  pthread_mutex_unlock(&h->mu);
}

static inline void hc_sleep_us(long us) {
  struct timespec ts = {us / 1000000, us % 1000000 * 1000};
  nanosleep(&ts, NULL);
}

static inline void *hc_worker(void *arg) {
  host_copier *h = arg;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (!h->stopping && h->done == h->queued) pthread_cond_wait(&h->changed, &h->mu);
    if (h->done == h->queued) break; /* stopping with nothing left */
    hc_op op = h->ops[h->done % HC_MAX_OPS];
    if (op.kind != HC_RECORD && (long)op.number == h->hold_copy_at) {
      h->holding = 1;
      pthread_cond_broadcast(&h->changed);
      while (!h->released) pthread_cond_wait(&h->changed, &h->mu);
      h->holding = 0;
    }
    if (op.kind != HC_RECORD) {
      pthread_mutex_unlock(&h->mu);
      if (h->delay_us) hc_sleep_us(h->delay_us);
      memcpy(op.dst, op.src, op.bytes);
      pthread_mutex_lock(&h->mu);
      size_t off = op.kind == HC_D2H ? (size_t)((const char *)op.src - h->dev_src)
                                     : (size_t)((char *)op.dst - h->dev_dst);
      hc_log_locked(h, op.kind, off);
    }
    h->done++;
    pthread_cond_broadcast(&h->changed);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

/* Lets the held copy (and so every operation after it) run. */
static inline void hc_release(host_copier *h) {
  pthread_mutex_lock(&h->mu);
  h->released = 1;
  pthread_cond_broadcast(&h->changed);
  pthread_mutex_unlock(&h->mu);
}

/* Copies are numbered from 1 as queued; the held one waits in the worker
 * until hc_release(), and every later operation behind it, as on a stream. */
static inline int hc_queue(host_copier *h, hc_op op) {
  pthread_mutex_lock(&h->mu);
  int rc = 0;
  if (op.kind != HC_RECORD) op.number = ++h->copies_queued;
  if (op.kind != HC_RECORD && (long)op.number == h->fail_copy_at) {
    rc = hvd__err(HVD_E_SYSTEM, "stand-in: copy %zu refused", h->copies_queued);
  } else if (h->queued - h->done >= HC_MAX_OPS) {
    rc = hvd__err(HVD_E_NOMEM, "stand-in: queue full");
  } else {
    if (op.kind == HC_RECORD) op.ev->target = h->queued + 1;
    h->ops[h->queued % HC_MAX_OPS] = op;
    h->queued++;
    pthread_cond_broadcast(&h->changed);
  }
  pthread_mutex_unlock(&h->mu);
  return rc;
}

static inline int hc_alloc_pinned(void *ctx, size_t bytes, void **out) {
  host_copier *h = ctx;
  if (h->fail_alloc) return hvd__err(HVD_E_NOMEM, "stand-in: no pinned memory");
  *out = malloc(bytes ? bytes : 1);
  if (*out == NULL) return hvd__err(HVD_E_NOMEM, "stand-in: no memory");
  pthread_mutex_lock(&h->mu);
  h->pinned_live++;
  h->pinned_last = *out;
  pthread_mutex_unlock(&h->mu);
  return 0;
}

static inline void hc_free_pinned(void *ctx, void *p) {
  host_copier *h = ctx;
  pthread_mutex_lock(&h->mu);
  if (h->done != h->queued) h->freed_while_busy = 1;
  h->pinned_live--;
  pthread_mutex_unlock(&h->mu);
  free(p);
}

static inline int hc_copy(void *ctx, int kind, void *dst, const void *src, size_t bytes) {
  return hc_queue(ctx, (hc_op){kind, dst, src, bytes, NULL, 0});
}

static inline int hc_d2h(void *ctx, void *host, const void *dev, size_t bytes) {
  return hc_copy(ctx, HC_D2H, host, dev, bytes);
}

static inline int hc_h2d(void *ctx, void *dev, const void *host, size_t bytes) {
  return hc_copy(ctx, HC_H2D, dev, host, bytes);
}

static inline int hc_d2d(void *ctx, void *dst, const void *src, size_t bytes) {
  host_copier *h = ctx;
  pthread_mutex_lock(&h->mu);
  h->d2d_queued++;
  pthread_mutex_unlock(&h->mu);
  return hc_copy(ctx, HC_D2D, dst, src, bytes);
}

/* "Device memory" is host memory. */
static inline int hc_alloc_device(void *ctx, size_t bytes, void **out) {
  (void)ctx;
  *out = malloc(bytes ? bytes : 1);
  return *out ? 0 : hvd__err(HVD_E_NOMEM, "stand-in: no memory");
}

static inline void hc_free_device(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

static inline int hc_event_create(void *ctx, hvd__copy_event **out) {
  (void)ctx;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : hvd__err(HVD_E_NOMEM, "stand-in: no memory");
}

static inline void hc_event_destroy(void *ctx, hvd__copy_event *ev) {
  (void)ctx;
  free(ev);
}

static inline int hc_event_record(void *ctx, hvd__copy_event *ev) {
  return hc_queue(ctx, (hc_op){HC_RECORD, NULL, NULL, 0, ev, 0});
}

static inline int hc_event_query(void *ctx, hvd__copy_event *ev) {
  host_copier *h = ctx;
  pthread_mutex_lock(&h->mu);
  int done = h->done >= ev->target;
  pthread_mutex_unlock(&h->mu);
  return done;
}

static inline int hc_event_wait(void *ctx, hvd__copy_event *ev, uint64_t deadline) {
  host_copier *h = ctx;
  pthread_mutex_lock(&h->mu);
  while (h->done < ev->target && hvd__now_ms() < deadline) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&h->changed, &h->mu, &ts);
  }
  int done = h->done >= ev->target;
  pthread_mutex_unlock(&h->mu);
  return done ? 0 : hvd__err(HVD_E_TIMEOUT, "stand-in: copies not done by the deadline");
}

static const hvd__copier_ops hc_ops = {
    hc_alloc_pinned, hc_free_pinned, hc_d2h,        hc_h2d,          hc_event_create,
    hc_event_destroy, hc_event_record, hc_event_query, hc_event_wait, hc_alloc_device,
    hc_free_device,  hc_d2d,         NULL /* no streams: no wait_ready */};

static inline host_copier *hc_create(long delay_us) {
  host_copier *h = calloc(1, sizeof *h);
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->changed, NULL);
  h->delay_us = delay_us;
  pthread_create(&h->worker, NULL, hc_worker, h);
  return h;
}

static inline hvd__copier hc_copier(host_copier *h) { return (hvd__copier){&hc_ops, h}; }

/* Drains the queue (releasing a held copy), stops the worker, frees the
 * pinned memory a broken pipeline left. */
static inline void hc_destroy(host_copier *h) {
  pthread_mutex_lock(&h->mu);
  h->stopping = 1;
  h->released = 1;
  pthread_cond_broadcast(&h->changed);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->worker, NULL);
  pthread_cond_destroy(&h->changed);
  pthread_mutex_destroy(&h->mu);
  if (h->pinned_live > 0) free(h->pinned_last);
  free(h);
}

#endif /* HVD_TEST_HOST_COPIER_H */
