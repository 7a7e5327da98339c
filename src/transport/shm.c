/*
 * shm.c -- the shared-memory transport (transport.h, shm.h): sendrecv over
 * the byte rings of one segment (shm_seg.h).
 *
 * sendrecv pushes what fits of the outgoing message into the ring to `to`
 * and pulls what has arrived from the ring from `from`, over and over
 * until both are done, so a ring step never deadlocks on a full ring.
 * With nothing to move it spins briefly, then sleeps on its futex word;
 * whoever fills a ring it reads or drains a ring it writes bumps the word
 * and wakes it, but only when it said it sleeps, so the fast path makes
 * no system call.  Sleeps are short (WAIT_SLICE_MS): between them the
 * rank checks the no-progress deadline and whether its peers still live.
 *
 * When the host's ranks outnumber its cores (512 ranks on 2 cores), a
 * waiting rank gives its core up at once: the rank it waits for needs it.
 * A sync then counts arrivals on one word of the segment and only the
 * last rank to arrive wakes the others, once each; with a core per rank
 * every rank announces its arrival in its own line and nobody sleeps for
 * long (a woken rank there costs more than a polled line).
 *
 * Failures.  There is no connection to see close, so a dead peer is
 * found by its pid (kill(pid, 0)) when a sleep ends without progress.  An
 * abort writes this rank's record in the segment (the rank it gave up on
 * and why) and wakes everyone, who fail at once naming that rank.
 *
 * Naming the stuck rank needs no exchange here, unlike over TCP: every
 * rank waiting in sendrecv publishes whom it waits on and a heartbeat
 * (refreshed at least every WAIT_SLICE_MS while it waits), so a rank at
 * its deadline follows the live chain of waits (3 waits on 2, 2 on 1, ...)
 * to the first rank that is dead, not waiting in the transport, or has
 * not run for STALE_MS: a stopped process, or one stuck outside hvd.
 *
 * Ranks here are the segment's (0..size-1).  When the segment holds only
 * some of a job's ranks (those of one host, under hybrid.c), `names` maps
 * them to the job's ranks, and every message names those: a user knows
 * rank 5, not "the second rank on this host".
 *
 * A transport is driven by one thread at a time.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "shm.h"
#include "shm_seg.h"
#include "transport.h"

/* Idle rounds with a pause instruction, then with sched_yield, then sleep.
 * With a core for every rank a peer is running and will answer soon:
 * spinning a while (2000 pauses, ~40 us here) saves a futex wake-up, the
 * whole price of a small collective.  Not longer: the thread driving the
 * engine spins beside the user's other threads, which compute.  With more
 * ranks than cores the peer we wait for needs our core: no pauses, give
 * the core up at once, and keep giving it up a while before sleeping; a
 * futex sleep and wake-up per wait cost more than the yields (measured at
 * np 4 on 2 cores, docs/algorithms.md: 8 B allreduce 21 us against 27 us
 * sleeping at once and 17-44 us with 256 pauses first). */
#define SPIN_PAUSES_OWN_CORE 2000
#define SPIN_PAUSES_PER_YIELD 32
#define SPIN_YIELDS_OWN_CORE 16
#define SPIN_YIELDS_SHARED 1000
/* Beyond this many ranks per core no yields either: a yield hands the
 * core to another waiting rank that yields in turn more often than to the
 * one with work, and hundreds of ranks yielding to each other starve it
 * (a cached 1 KiB allreduce took 11 s at 512 ranks on 2 cores).  A rank
 * that sleeps leaves the run queue to the ranks with work. */
#define YIELDING_RANKS_PER_CORE 2
#define WAIT_SLICE_MS 50 /* longest sleep between liveness checks */
#define STALE_MS 500     /* a waiting rank silent this long has stopped running */
#define WHY_MAX 512
#define CHAIN_MAX 256

typedef struct {
  hvd_transport base;
  seg_hdr *seg;
  size_t seg_bytes;
  size_t cap; /* of each ring, validated */
  seg_rank *ranks;
  hvd_ring **out, **in; /* out[p]: ring to p; in[p]: ring from p */
  pid_t *pids;          /* read once after setup */
  int *names;           /* the job's rank of each rank here; NULL: the same */
  int timeout_ms;
  uint32_t reports_seen;
  uint64_t syncs;  /* syncs this rank has reached */
  int counted;     /* syncs count arrivals (seg_hdr.shared_cores) */
  int spin_pauses; /* before yielding (see SPIN_PAUSES_*) */
  int spin_yields; /* then before sleeping */
  int broken;
  int lost;                          /* the rank whose failure broke it, -1 if none or unknown */
  int announced;                     /* our record is in the segment */
  uint64_t probe_word;               /* for the single-copy probe: the others read it */
  hvd_transport_ops single_copy_ops; /* shm_ops with peer_read, once the probe passed */
  int live_ms;                       /* hvd__shm_liveness's */
  hvd_alarm *alarm;
  char why[WHY_MAX];
} shm_transport;

typedef struct {
  int peer;    /* -1: skipped */
  int checked; /* receiving: the header was checked */
  hvd_ring *ring;
  hvd_ring_msg m;
} half;

/* What a rank waits for: the two halves of a sendrecv, or a sync.  The
 * waiting loop (idle) only needs to know whether there is something to do
 * and on which ranks it waits. */
typedef struct waiter waiter;
struct waiter {
  /* The futex word to sleep on: NULL for this rank's own (seg_rank.wake). */
  _Atomic uint32_t *word;
  int (*ready)(const shm_transport *t, const waiter *w);
  /* The i-th rank still waited on (i from 0), -1 past the last. */
  int (*peer)(const shm_transport *t, const waiter *w, int i);
  /* The first rank waited on, its sign of life (live.h) when last seen
   * to move, and since when (check_live): seen is the rank + 1, 0 none. */
  int seen;
  uint64_t seen_value, seen_ms;
};

/* sendrecv's wait: w first, so a waiter * is an exchange *. */
typedef struct {
  waiter w;
  half s, r;
} exchange;

/* A sync's wait: for every rank to reach sync number k. */
typedef struct {
  waiter w;
  uint64_t k;
} gate;

typedef struct {
  int rank;
  int aborted; /* it gave up for a reason of its own */
  char why[WHY_MAX];
  char chain[CHAIN_MAX];
} verdict;

static int shm_sendrecv(hvd_transport *base, int to, const void *sbuf, size_t slen, int from,
                        void *rbuf, size_t rlen, uint32_t tag);
static void shm_abort(hvd_transport *base, int lost_rank, const char *why);
static void shm_destroy(hvd_transport *base);
static unsigned char *shm_window(hvd_transport *base, int rank, int which);
static int shm_sync(hvd_transport *base, const hvd_sync_stamp *mine, hvd_sync_stamp *odd,
                    int *odd_rank);
static int shm_sync_small(hvd_transport *base, const hvd_sync_stamp *mine, const void *small,
                          size_t n, hvd_sync_stamp *odd, int *odd_rank);
static const unsigned char *shm_synced(hvd_transport *base, int rank);

static const hvd_transport_ops shm_ops = {.name = "shm",
                                          .sendrecv = shm_sendrecv,
                                          .abort = shm_abort,
                                          .destroy = shm_destroy,
                                          .caps = {.window = shm_window,
                                                   .sync = shm_sync,
                                                   .sync_small = shm_sync_small,
                                                   .synced = shm_synced}};

/* The job's number of rank r (r may be -1: no rank). */
static int job_rank(const shm_transport *t, int r) {
  return t->names && r >= 0 && r < t->base.size ? t->names[r] : r;
}

static int fail(shm_transport *t, int rc) {
  if (!t->broken) {
    t->broken = 1;
    snprintf(t->why, sizeof t->why, "%s", hvd_last_error());
  }
  return rc;
}

static int fail_lost(shm_transport *t, int rc, int lost) {
  if (!t->broken) t->lost = lost;
  return fail(t, rc);
}

/* ---- sleeping and waking ---- */

/* A full (store-load) fence, what the sleeping handshake needs.  gcc
 * refuses atomic_thread_fence under -fsanitize=thread, so that build uses a
 * seq_cst read-modify-write instead: on x86 a locked instruction, the same
 * full barrier.  (TSan cannot follow the other processes anyway.) */
#if defined(__SANITIZE_THREAD__)
static _Atomic uint32_t fence_word;
#define FULL_FENCE() ((void)atomic_fetch_add_explicit(&fence_word, 0, memory_order_seq_cst))
#else
#define FULL_FENCE() atomic_thread_fence(memory_order_seq_cst)
#endif

static void futex_wait(_Atomic uint32_t *word, uint32_t val, int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void wake_all(_Atomic uint32_t *word) {
  atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void wake_rank(seg_rank *r) { wake_all(&r->wake); }

/* We moved bytes `peer` may wait for: wake it if it sleeps.  The fence
 * pairs with the one in sleep(): either it sees our bytes before it
 * sleeps, or we see its flag. */
static void notify(shm_transport *t, int peer) {
  FULL_FENCE();
  if (atomic_load_explicit(&t->ranks[peer].sleeping, memory_order_relaxed))
    wake_rank(&t->ranks[peer]);
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("pause");
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ms(void) { return hvd__now_ms(); }

/* Publishes that this rank runs, waiting on `peer` (-1: not waiting). */
static void beat(shm_transport *t, int peer) {
  seg_rank *me = &t->ranks[t->base.rank];
  atomic_store_explicit(&me->beat_ms, now_ms(), memory_order_relaxed);
  atomic_store_explicit(&me->waits_on, peer, memory_order_relaxed);
}

/* Publishes that this rank no longer waits.  Only when it did: a store
 * would take the record's line from the peers that read it (notify()
 * reads `sleeping` there) on every collective. */
static void unwait(shm_transport *t) {
  if (atomic_load_explicit(&t->ranks[t->base.rank].waits_on, memory_order_relaxed) != -1)
    beat(t, -1);
}

static int half_done(const half *h) { return h->peer < 0 || hvd__ring_msg_done(&h->m); }

static int exchange_ready(const shm_transport *t, const waiter *w) {
  const exchange *x = (const exchange *)w;
  return (!half_done(&x->s) && hvd__ring_writable(x->s.ring, t->cap)) ||
         (!half_done(&x->r) && hvd__ring_readable(x->r.ring));
}

/* The receiving half first: a rank that does not send is the likelier
 * culprit than one that does not drain. */
static int exchange_peer(const shm_transport *t, const waiter *w, int i) {
  (void)t;
  const exchange *x = (const exchange *)w;
  int ps[2], n = 0;
  if (!half_done(&x->r)) ps[n++] = x->r.peer;
  if (!half_done(&x->s)) ps[n++] = x->s.peer;
  return i < n ? ps[i] : -1;
}

/* Whether `rank` reached sync k: its record for k says so (it holds k,
 * or k - 2 while the rank has not). */
static int reached(const shm_transport *t, int rank, uint64_t k) {
  return atomic_load_explicit(&t->ranks[rank].sync[k % 2].reached, memory_order_acquire) >= k;
}

static int gate_peer(const shm_transport *t, const waiter *w, int i) {
  const gate *g = (const gate *)w;
  for (int r = 0; r < t->base.size; r++)
    if (r != t->base.rank && !reached(t, r, g->k) && i-- == 0) return r;
  return -1;
}

static int gate_ready(const shm_transport *t, const waiter *w) {
  const gate *g = (const gate *)w;
  if (t->counted) /* acquire: every record written before its rank's arrival is seen */
    return atomic_load_explicit(&t->seg->arrived, memory_order_acquire) >=
           g->k * (uint64_t)t->base.size;
  return gate_peer(t, w, 0) < 0;
}

static int news(const shm_transport *t) {
  return atomic_load_explicit(&t->seg->reports, memory_order_acquire) != t->reports_seen;
}

/* Sleeps until woken or `ms` pass, unless there is something to do. */
static void sleep_on(shm_transport *t, const waiter *w, int ms) {
  seg_rank *me = &t->ranks[t->base.rank];
  if (w->word) { /* a counted sync: its last rank wakes every sleeper with one call */
    uint32_t seq = atomic_load_explicit(w->word, memory_order_seq_cst);
    if (!w->ready(t, w) && !news(t)) futex_wait(w->word, seq, ms);
    return;
  }
  atomic_store_explicit(&me->sleeping, 1, memory_order_seq_cst);
  FULL_FENCE();
  uint32_t seq = atomic_load_explicit(&me->wake, memory_order_seq_cst);
  if (!w->ready(t, w) && !news(t)) futex_wait(&me->wake, seq, ms);
  atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
}

/* ---- the records in the segment ---- */

static int alive(const shm_transport *t, int rank) {
  pid_t pid = t->pids[rank];
  return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH;
}

/* Rank x's record: 1 and lost/why filled if it wrote one. */
static int record(const shm_transport *t, int x, int *lost, char *why, size_t cap) {
  seg_rank *r = &t->ranks[x];
  if (!atomic_load_explicit(&r->reported, memory_order_acquire)) return 0;
  int32_t l = r->lost;
  if (l < -1 || l >= t->base.size) l = -1; /* garbage: as if for its own reason */
  *lost = l;
  if (why) {
    size_t n = 0;
    while (n + 1 < cap && n < SEG_WHY_MAX && r->why[n]) n++;
    memcpy(why, r->why, n);
    why[n] = '\0';
    for (char *c = why; *c; c++) /* it goes into our messages verbatim */
      if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  }
  return 1;
}

/* Writes our record once and wakes everyone to read it. */
static void announce(shm_transport *t, int lost_rank, const char *why) {
  seg_rank *me = &t->ranks[t->base.rank];
  if (t->announced) return;
  t->announced = 1;
  me->lost = lost_rank;
  snprintf(me->why, sizeof me->why, "%s", why ? why : "");
  atomic_store_explicit(&me->reported, 1, memory_order_release);
  atomic_fetch_add_explicit(&t->seg->reports, 1, memory_order_seq_cst);
  for (int r = 0; r < t->base.size; r++)
    if (r != t->base.rank) wake_rank(&t->ranks[r]);
  if (t->counted) wake_all(&t->seg->sync_wake);
}

/* Whether rank x has not run in the transport for STALE_MS: a waiting
 * rank beats every WAIT_SLICE_MS, so it is stopped or stuck elsewhere. */
static int silent(const shm_transport *t, int x, uint64_t now) {
  if (x == t->base.rank) return 0;
  uint64_t last = atomic_load_explicit(&t->ranks[x].beat_ms, memory_order_relaxed);
  return now > last + STALE_MS;
}

/* Follows the live chain of waits from `start` to the rank at its end:
 * dead, silent, not waiting in the transport, or where the chain closes
 * on itself (ranks waiting on each other: then `start`).  "3 -> 1 -> 7"
 * into chain. */
static int follow(const shm_transport *t, int start, char *chain, size_t cap) {
  size_t len = (size_t)snprintf(chain, cap, "%d", job_rank(t, start));
  uint64_t now = now_ms();
  unsigned char *seen = calloc((size_t)t->base.size, 1);
  int x = start;
  for (int hops = 0; hops <= t->base.size; hops++) {
    if (!alive(t, x) || silent(t, x, now)) break;
    int next = atomic_load_explicit(&t->ranks[x].waits_on, memory_order_relaxed);
    if (next < 0 || next >= t->base.size || next == x) break;
    if (!seen || seen[next]) {
      x = start;
      break;
    }
    seen[x] = 1;
    x = next;
    if (len < cap) len += (size_t)snprintf(chain + len, cap - len, " -> %d", job_rank(t, x));
  }
  free(seen);
  return x;
}

/* Concludes which rank is stuck, starting from `start`. */
static void blame(shm_transport *t, int start, verdict *v) {
  int lost;
  v->rank = follow(t, start, v->chain, sizeof v->chain);
  v->aborted = record(t, v->rank, &lost, v->why, sizeof v->why) && lost < 0;
}

/* "rank 3 aborted: ..." and the like, for the verdict on `start` that
 * `reporter` told us about (reporter -1: we found it ourselves). */
static int conclude(shm_transport *t, int rc, int start, const verdict *v, const char *detail) {
  int me = job_rank(t, t->base.rank), who = job_rank(t, v->rank);
  if (v->aborted)
    return fail_lost(t,
                     hvd__err(HVD_E_PEER_LOST, "rank %d aborted: %s (waits: %d -> %s)", who, v->why,
                              me, v->chain),
                     v->rank);
  if (v->rank == start) return fail_lost(t, hvd__err(rc, "%s", detail), start);
  return fail_lost(t,
                   hvd__err(rc, "rank %d stopped responding (waits: %d -> %s); here: %s", who, me,
                            v->chain, detail),
                   v->rank);
}

/* Some rank wrote a record.  Prefer the ranks this one waits on. */
static int peer_aborted(shm_transport *t, const waiter *w) {
  char why[WHY_MAX], detail[WHY_MAX + 192];
  int lost, p = -1;
  t->reports_seen = atomic_load_explicit(&t->seg->reports, memory_order_acquire);
  for (int i = 0, q; p < 0 && (q = w->peer(t, w, i)) >= 0; i++)
    if (record(t, q, &lost, NULL, 0)) p = q;
  for (int x = 0; p < 0 && x < t->base.size; x++)
    if (x != t->base.rank && record(t, x, &lost, NULL, 0)) p = x;
  if (p < 0) return 0; /* our own record */
  record(t, p, &lost, why, sizeof why);
  if (lost < 0)
    return fail(t, hvd__err(HVD_E_PEER_LOST, "rank %d aborted: %s", job_rank(t, p), why));
  verdict v;
  if (lost == t->base.rank) {
    /* It gave up on us while we wait on somebody else (a peer's record
     * arrives at once here, not only when we read from it as over TCP):
     * the rank to blame is further down our own chain of waits. */
    int q = w->peer(t, w, 0);
    if (q < 0)
      return fail(t, hvd__err(HVD_E_PEER_LOST, "rank %d gave up on this rank: %s", job_rank(t, p),
                              why));
    snprintf(detail, sizeof detail,
             "rank %d is not responding (this rank waited on it when "
             "rank %d gave up on this rank: %s)",
             job_rank(t, q), job_rank(t, p), why);
    announce(t, q, detail);
    blame(t, q, &v);
    return conclude(t, HVD_E_TIMEOUT, q, &v, detail);
  }
  announce(t, lost, why); /* pass it on, as tcp.c does */
  blame(t, lost, &v);
  snprintf(detail, sizeof detail, "rank %d lost (reported by rank %d: %s)", job_rank(t, lost),
           job_rank(t, p), why);
  return conclude(t, HVD_E_PEER_LOST, lost, &v, detail);
}

/* A peer's process is gone. */
static int peer_dead(shm_transport *t, int peer) {
  char detail[128];
  snprintf(detail, sizeof detail, "rank %d lost: its process (pid %d) exited", job_rank(t, peer),
           (int)t->pids[peer]);
  announce(t, peer, detail);
  return fail_lost(t, hvd__err(HVD_E_PEER_LOST, "%s", detail), peer);
}

/* No progress until the deadline: blame `suspect` (or whoever it waits
 * on) with `mine`, what this rank saw. */
static int stuck(shm_transport *t, int suspect, const char *mine) {
  announce(t, suspect, mine);
  verdict v;
  blame(t, suspect, &v);
  return conclude(t, HVD_E_TIMEOUT, suspect, &v, mine);
}

static int exchange_timed_out(shm_transport *t, const exchange *x, uint32_t tag) {
  char what[2][160], mine[WHY_MAX];
  int n = 0;
  const half *s = &x->s, *r = &x->r;
  if (!half_done(r))
    snprintf(what[n++], sizeof what[0], "rank %d %s (%zu of %zu bytes received)",
             job_rank(t, r->peer), r->m.done ? "stopped sending" : "sent nothing",
             hvd__ring_msg_payload_done(&r->m), r->m.len);
  if (!half_done(s))
    snprintf(what[n++], sizeof what[0], "rank %d is not receiving (%zu of %zu bytes sent)",
             job_rank(t, s->peer), hvd__ring_msg_payload_done(&s->m), s->m.len);
  snprintf(mine, sizeof mine, "timed out after %g s without progress at collective #%u: %s%s%s",
           t->timeout_ms / 1000.0, tag, what[0], n > 1 ? "; " : "", n > 1 ? what[1] : "");
  return stuck(t, exchange_peer(t, &x->w, 0), mine);
}

static int gate_timed_out(shm_transport *t, const gate *g, uint32_t tag) {
  char mine[WHY_MAX];
  int late = gate_peer(t, &g->w, 0);
  snprintf(mine, sizeof mine,
           "timed out after %g s at collective #%u: rank %d did not reach the shared-memory "
           "barrier",
           t->timeout_ms / 1000.0, tag, job_rank(t, late));
  return stuck(t, late, mine);
}

/* ---- sendrecv ---- */

static int corrupt(shm_transport *t, int from, int to) {
  return fail(t, hvd__err(HVD_E_PROTOCOL, "the shared ring from rank %d to rank %d is corrupt",
                          job_rank(t, from), job_rank(t, to)));
}

static int check_header(shm_transport *t, half *h, uint32_t tag) {
  uint32_t got_tag;
  uint64_t got_len;
  h->checked = 1;
  if (hvd__ring_msg_header(&h->m, &got_tag, &got_len) < 0)
    return fail(t,
                hvd__err(HVD_E_PROTOCOL, "rank %d sent a malformed message", job_rank(t, h->peer)));
  if (got_tag != tag)
    return fail(t, hvd__err(HVD_E_MISMATCH,
                            "rank %d is at collective #%u, this rank at #%u (collectives "
                            "called in a different order?)",
                            job_rank(t, h->peer), got_tag, tag));
  if (got_len != h->m.len)
    return fail(t, hvd__err(HVD_E_MISMATCH,
                            "rank %d sent %llu bytes for collective #%u, this rank expected "
                            "%zu bytes (do all ranks pass the same count and dtype?)",
                            job_rank(t, h->peer), (unsigned long long)got_len, tag, h->m.len));
  return 0;
}

/* Pulls what has arrived, checking the header on the way.  Bytes, or <0. */
static long recv_step(shm_transport *t, half *h, uint32_t tag) {
  long moved = 0;
  while (!half_done(h)) {
    long n = hvd__ring_pull(h->ring, t->cap, &h->m);
    if (n < 0) return corrupt(t, h->peer, t->base.rank);
    if (n == 0) break;
    moved += n;
    if (!h->checked && h->m.done == HVD_RING_MSG_HDR_LEN) HVD__CHECK(check_header(t, h, tag));
  }
  if (moved > 0) notify(t, h->peer); /* room for its next bytes */
  return moved;
}

static long send_step(shm_transport *t, half *h) {
  long n = hvd__ring_push(h->ring, t->cap, &h->m);
  if (n < 0) return corrupt(t, t->base.rank, h->peer);
  if (n > 0) notify(t, h->peer);
  return n;
}

/* Another transport's watchdog gave up on a rank (hybrid.c): that rank
 * is not ours to name in the segment's records, its verdict is. */
static int alarmed(shm_transport *t) {
  announce(t, -1, t->alarm->why);
  return fail(t, hvd__err(HVD_E_PEER_LOST, "%s", t->alarm->why));
}

/* The first rank w waits on shows no sign of life (live.h) for the
 * window: lost.  It is stopped (SIGSTOP, its host), or the thread that
 * drives its engine is stuck outside hvd; a rank busy in its own code
 * still cycles.  0, or the verdict. */
static int check_live(shm_transport *t, waiter *w) {
  int q = w->peer(t, w, 0);
  if (q < 0 || t->live_ms <= 0) return 0;
  uint64_t v = atomic_load_explicit(&t->ranks[q].live, memory_order_relaxed), now = now_ms();
  if (w->seen != q + 1 || v != w->seen_value || (v & HVD_LIVE_RESTING)) {
    w->seen = q + 1, w->seen_value = v, w->seen_ms = now;
    return 0;
  }
  if (now - w->seen_ms < (uint64_t)t->live_ms) return 0;
  char why[WHY_MAX];
  snprintf(why, sizeof why,
           "rank %d gave no sign of life for %.1f s (its process is "
           "stopped, or the thread that drives its engine is stuck outside hvd)",
           job_rank(t, q), (double)(now - w->seen_ms) / 1000.0);
  announce(t, q, why);
  return fail_lost(t, hvd__err(HVD_E_PEER_LOST, "%s", why), q);
}

/* Nothing to do: spin, then sleep a slice.  1: go on, 0: the deadline
 * passed, <0: a peer died or shows no life.  *deadline (0: not set yet)
 * is set when the spinning ends: a wait that ends while spinning, as most
 * do, reads no clock (a read is 20 ns, a twentieth of a small sync). */
static int idle(shm_transport *t, waiter *w, int *spins, uint64_t *deadline) {
  int n = (*spins)++;
  if (n < t->spin_pauses) {
    /* Even with a core for every rank the scheduler may put the peer on
     * ours (nothing is pinned); a yield now and then lets it run at once
     * instead of after the whole spin.  Alone on the core it returns at
     * once. */
    if (n % SPIN_PAUSES_PER_YIELD == SPIN_PAUSES_PER_YIELD - 1)
      sched_yield();
    else
      cpu_relax();
    return 1;
  }
  if (n < t->spin_pauses + t->spin_yields) {
    sched_yield();
    return 1;
  }
  if (!*deadline) *deadline = hvd__deadline_in(t->timeout_ms);
  int ms = hvd__ms_left(*deadline);
  if (ms == 0) return 0;
  beat(t, w->peer(t, w, 0));
  sleep_on(t, w, ms < WAIT_SLICE_MS ? ms : WAIT_SLICE_MS);
  beat(t, w->peer(t, w, 0));
  hvd__live_beat();
  if (t->alarm && hvd__alarm_raised(t->alarm)) return alarmed(t);
  if (w->ready(t, w) || news(t)) return 1;
  /* A peer that wrote its record before it exited is read by the caller:
   * the record says more than its death (checked after it, as it was
   * written before). */
  for (int i = 0, q; (q = w->peer(t, w, i)) >= 0; i++)
    if (!alive(t, q)) return news(t) ? 1 : peer_dead(t, q);
  HVD__CHECK(check_live(t, w));
  return 1;
}

static int usable(shm_transport *t) {
  if (!t->broken) return 0;
  return hvd__err(HVD_E_ABORTED, "the shared memory to the other ranks broke earlier: %s", t->why);
}

static int shm_sendrecv(hvd_transport *base, int to, const void *sbuf, size_t slen, int from,
                        void *rbuf, size_t rlen, uint32_t tag) {
  shm_transport *t = (shm_transport *)base;
  exchange x = {.w = {.ready = exchange_ready, .peer = exchange_peer},
                .s = {.peer = to},
                .r = {.peer = from}};
  half *s = &x.s, *r = &x.r;
  HVD__CHECK(usable(t));
  HVD__CHECK(hvd__check_peer(base, to, sbuf, slen, "destination"));
  HVD__CHECK(hvd__check_peer(base, from, rbuf, rlen, "source"));
  if (to >= 0) {
    s->ring = t->out[to];
    hvd__ring_msg_out(&s->m, tag, sbuf, slen);
  }
  if (from >= 0) {
    r->ring = t->in[from];
    hvd__ring_msg_in(&r->m, rbuf, rlen);
  }

  uint64_t deadline = 0; /* set by idle(), again after any progress */
  int spins = 0;
  while (!half_done(s) || !half_done(r)) {
    long sent = half_done(s) ? 0 : send_step(t, s);
    if (sent < 0) return (int)sent;
    long got = half_done(r) ? 0 : recv_step(t, r, tag);
    if (got < 0) return (int)got;
    if (sent + got > 0) {
      deadline = 0;
      spins = 0;
      continue;
    }
    if (news(t)) HVD__CHECK(peer_aborted(t, &x.w));
    int rc = idle(t, &x.w, &spins, &deadline);
    if (rc == 0) return exchange_timed_out(t, &x, tag);
    if (rc < 0) return rc;
  }
  unwait(t);
  return 0;
}

/* ---- the windows and syncs of the shm allreduce ---- */

static unsigned char *shm_window(hvd_transport *base, int rank, int which) {
  shm_transport *t = (shm_transport *)base;
  return seg_window(t->seg, (size_t)base->size, t->cap, rank, which);
}

/* Every rank's stamp for sync k must be ours. */
static int compare_stamps(shm_transport *t, uint64_t k, const hvd_sync_stamp *mine,
                          hvd_sync_stamp *odd, int *odd_rank) {
  for (int r = 0; r < t->base.size; r++) {
    hvd_sync_stamp theirs = t->ranks[r].sync[k % 2].stamp;
    if (r == t->base.rank ||
        (theirs.tag == mine->tag && theirs.kind == mine->kind && theirs.bytes == mine->bytes))
      continue;
    *odd = theirs;
    *odd_rank = job_rank(t, r);
    return 1;
  }
  return 0;
}

/* Our record for sync k is written: whoever sleeps learns it.  Counted,
 * only the last to arrive wakes the others, all with one call (each rank
 * waking every sleeper as it arrived made n^2 wake-ups a sync, and one
 * call per sleeper hands the core to each woken rank in turn). */
static void arrive(shm_transport *t, uint64_t k) {
  if (t->counted) {
    uint64_t n = atomic_fetch_add_explicit(&t->seg->arrived, 1, memory_order_seq_cst) + 1;
    if (n == k * (uint64_t)t->base.size) wake_all(&t->seg->sync_wake);
    return;
  }
  for (int r = 0; r < t->base.size; r++)
    if (r != t->base.rank) notify(t, r);
}

/* Publishes our arrival at the next sync (with n bytes of small), wakes
 * whoever sleeps, and waits for everyone else's. */
static int shm_sync_small(hvd_transport *base, const hvd_sync_stamp *mine, const void *small,
                          size_t n, hvd_sync_stamp *odd, int *odd_rank) {
  shm_transport *t = (shm_transport *)base;
  HVD__CHECK(usable(t));
  if (n > HVD_SYNC_SMALL)
    return hvd__err(HVD_E_INVALID, "%zu bytes for a sync, at most %d", n, HVD_SYNC_SMALL);
  gate g = {.w = {.word = t->counted ? &t->seg->sync_wake : NULL,
                  .ready = gate_ready,
                  .peer = gate_peer},
            .k = ++t->syncs};
  seg_sync *rec = &t->ranks[base->rank].sync[g.k % 2];
  rec->stamp = *mine;
  if (n) memcpy(rec->small, small, n);
  atomic_store_explicit(&rec->reached, g.k, memory_order_release);
  arrive(t, g.k);

  uint64_t deadline = 0; /* set by idle() */
  int spins = 0;
  while (!gate_ready(t, &g.w)) {
    if (news(t)) HVD__CHECK(peer_aborted(t, &g.w));
    int rc = idle(t, &g.w, &spins, &deadline);
    if (rc == 0) return gate_timed_out(t, &g, mine->tag);
    if (rc < 0) return rc;
  }
  unwait(t);
  if (compare_stamps(t, g.k, mine, odd, odd_rank)) return 1;
  /* A rank that gave up after it arrived still counts as arrived: do not
   * go on with it. */
  if (news(t)) HVD__CHECK(peer_aborted(t, &g.w));
  return 0;
}

static int shm_sync(hvd_transport *base, const hvd_sync_stamp *mine, hvd_sync_stamp *odd,
                    int *odd_rank) {
  return shm_sync_small(base, mine, NULL, 0, odd, odd_rank);
}

/* Read after the sync's acquire of every record: the bytes were written
 * before the release that published them. */
static const unsigned char *shm_synced(hvd_transport *base, int rank) {
  shm_transport *t = (shm_transport *)base;
  return t->ranks[rank].sync[t->syncs % 2].small;
}

/* ---- for shm_single_copy.c ---- */

seg_rank *hvd__shm_ranks(hvd_transport *base) { return ((shm_transport *)base)->ranks; }

int hvd__shm_pid(hvd_transport *base, int rank) { return ((shm_transport *)base)->pids[rank]; }

int hvd__shm_job_rank(hvd_transport *base, int rank) {
  return job_rank((shm_transport *)base, rank);
}

uint64_t *hvd__shm_probe_word(hvd_transport *base) { return &((shm_transport *)base)->probe_word; }

void hvd__shm_enable_peer_read(hvd_transport *base, hvd_peer_read_fn *peer_read) {
  shm_transport *t = (shm_transport *)base;
  t->single_copy_ops = shm_ops;
  t->single_copy_ops.caps.peer_read = peer_read;
  base->ops = &t->single_copy_ops;
}

/* ---- abort, destroy, creation ---- */

static void shm_abort(hvd_transport *base, int lost_rank, const char *why) {
  shm_transport *t = (shm_transport *)base;
  if (lost_rank < 0 && t->broken) lost_rank = t->lost;
  announce(t, lost_rank, why);
  if (!t->broken) {
    t->broken = 1;
    snprintf(t->why, sizeof t->why, "aborted: %s", why ? why : "");
  }
}

static void shm_destroy(hvd_transport *base) {
  shm_transport *t = (shm_transport *)base;
  if (!t) return;
  hvd__live_unpublish(&t->ranks[base->rank].live);
  munmap(t->seg, t->seg_bytes);
  free(t->out);
  free(t->in);
  free(t->pids);
  free(t->names);
  free(t);
}

int hvd__shm_transport_new(seg_hdr *seg, int size, size_t cap, int rank, int timeout_ms,
                           const int *names, hvd_transport **out) {
  shm_transport *t = calloc(1, sizeof *t);
  if (t) {
    t->out = calloc((size_t)size, sizeof *t->out);
    t->in = calloc((size_t)size, sizeof *t->in);
    t->pids = calloc((size_t)size, sizeof *t->pids);
    t->names = names ? malloc((size_t)size * sizeof *t->names) : NULL;
  }
  if (!t || !t->out || !t->in || !t->pids || (names && !t->names)) {
    if (t) free(t->out), free(t->in), free(t->pids), free(t->names);
    free(t);
    return hvd__err(HVD_E_NOMEM, "shm transport: out of memory for %d ranks", size);
  }
  if (names) memcpy(t->names, names, (size_t)size * sizeof *t->names);
  t->base.ops = &shm_ops;
  t->base.rank = rank;
  t->base.size = size;
  t->base.window_bytes = seg_window_bytes(cap);
  t->base.in_flight = cap - HVD_RING_MSG_HDR_LEN;
  t->seg = seg;
  t->seg_bytes = seg_bytes((size_t)size, cap);
  t->cap = cap;
  t->ranks = seg_ranks(seg);
  t->timeout_ms = timeout_ms;
  t->lost = -1;
  for (int p = 0; p < size; p++) {
    t->out[p] = seg_ring(seg, (size_t)size, cap, rank, p);
    t->in[p] = seg_ring(seg, (size_t)size, cap, p, rank);
    t->pids[p] = atomic_load_explicit(&t->ranks[p].pid, memory_order_acquire);
  }
  t->reports_seen = atomic_load_explicit(&seg->reports, memory_order_acquire);
  t->counted = seg->shared_cores != 0;
  t->spin_pauses = t->counted ? 0 : SPIN_PAUSES_OWN_CORE;
  t->spin_yields = !t->counted                                     ? SPIN_YIELDS_OWN_CORE
                   : size <= YIELDING_RANKS_PER_CORE * hvd__cpus() ? SPIN_YIELDS_SHARED
                                                                   : 0;
  /* Without a free slot the word stays resting: this rank is not judged */
  (void)hvd__live_publish(&t->ranks[rank].live);
  *out = &t->base;
  return 0;
}

void hvd__shm_liveness(hvd_transport *base, int live_ms, hvd_alarm *alarm) {
  shm_transport *t = (shm_transport *)base;
  t->live_ms = live_ms;
  t->alarm = alarm;
}
