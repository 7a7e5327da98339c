/*
 * shm_single_copy.c -- the ranks of a host reading each other's memory
 * (Linux's cross-memory attach, process_vm_readv): the shm transport's
 * optional peer_read op, and the probe that decides at setup whether it
 * can be used.
 *
 * The windows of shared memory cost two copies per byte (into a window,
 * out of it); reading a peer's buffer directly costs one, done by the
 * kernel.  Whether the kernel allows it depends on where the job runs:
 * the caller needs ptrace's "attach" permission over the other process
 * (same user, and Yama's kernel.yama.ptrace_scope at 0, or a container
 * whose seccomp profile and capabilities allow it).  So at setup every
 * rank publishes a word of its own memory (where it is and what it holds)
 * in the segment, reads every other rank's, and publishes what it found;
 * only if every rank read every word right is peer_read turned on, on
 * every rank at once.  HOROVOD_SHM_SINGLE_COPY=0 on any rank refuses it
 * for its host.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"
#include "shm_seg.h"
#include "transport.h"

/* Iovecs per process_vm_readv call: the kernel takes at most IOV_MAX. */
#define BATCH 1024

/* probe_result codes besides 0 (read right) and an errno. */
enum { PROBE_WRONG_VALUE = -1, PROBE_OFF = -2 };

/* The sync stamps of the probe's two syncs: no collective has run yet. */
#define PROBE_KIND 0x5c01u

/* ---- peer_read ---- */

/* A position in a list of iovecs. */
typedef struct {
  const struct iovec *v;
  size_t n, i, off; /* entry i, bytes of it already taken */
} cursor;

/* Bytes in the next BATCH nonempty entries from c. */
static size_t span(const cursor *c) {
  size_t bytes = 0, k = 0;
  for (size_t i = c->i; i < c->n && k < BATCH; i++) {
    size_t left = c->v[i].iov_len - (i == c->i ? c->off : 0);
    if (left) bytes += left, k++;
  }
  return bytes;
}

/* Exactly `bytes` of c's entries into out (at most BATCH), advancing c;
 * the last one taken may be cut.  Returns how many. */
static size_t fill(cursor *c, struct iovec *out, size_t bytes) {
  size_t k = 0;
  while (bytes && c->i < c->n) {
    size_t left = c->v[c->i].iov_len - c->off, n = left < bytes ? left : bytes;
    if (n) out[k++] = (struct iovec){(char *)c->v[c->i].iov_base + c->off, n};
    bytes -= n;
    c->off += n;
    if (c->off == c->v[c->i].iov_len) c->i++, c->off = 0;
  }
  return k;
}

static int read_failed(hvd_transport *t, int rank, size_t got, size_t want, int err) {
  int who = hvd__shm_job_rank(t, rank);
  if (err == ESRCH)
    return hvd__err(HVD_E_PEER_LOST, "rank %d lost: its process (pid %d) is gone", who,
                    hvd__shm_pid(t, rank));
  if (err == EFAULT)
    return hvd__err(HVD_E_PROTOCOL, "rank %d announced a buffer its memory does not hold", who);
  if (err == 0)
    return hvd__err(HVD_E_SYSTEM, "reading rank %d's memory stopped after %zu of %zu bytes",
                    who, got, want);
  return hvd__err_sys(HVD_E_SYSTEM, err, "reading rank %d's memory (process_vm_readv)", who);
}

static int peer_read(hvd_transport *t, int rank, const struct iovec *local, size_t nl,
                     const struct iovec *remote, size_t nr) {
  HVD__CHECK(hvd__check_peer(t, rank, local, nl, "source"));
  cursor lc = {local, nl, 0, 0}, rc = {remote, nr, 0, 0};
  struct iovec lv[BATCH], rv[BATCH];
  pid_t pid = hvd__shm_pid(t, rank);
  for (;;) {
    size_t a = span(&lc), b = span(&rc), bytes = a < b ? a : b;
    if (bytes == 0) {
      if (a != b)
        return hvd__err(HVD_E_INVALID, "peer_read: %zu more bytes %s than %s", a ? a : b,
                        a ? "asked for" : "to read", a ? "to read" : "asked for");
      return 0;
    }
    size_t nlv = fill(&lc, lv, bytes), nrv = fill(&rc, rv, bytes);
    ssize_t got = process_vm_readv(pid, lv, nlv, rv, nrv, 0);
    if (got < 0) return read_failed(t, rank, 0, bytes, errno);
    if ((size_t)got != bytes) return read_failed(t, rank, (size_t)got, bytes, 0);
  }
}

/* ---- the probe ---- */

/* The smallest allreduce worth reading directly among n ranks, when
 * HOROVOD_SHM_SINGLE_COPY_MIN_BYTES does not say.  The kernel pins every
 * page it copies, which costs about as much as the copy into a window
 * saves: measured on the 2-core development machine (bench/shm-single-copy,
 * docs/algorithms.md), reading directly did not pay at any size or job
 * size there, so by default it does not run; machines whose memory
 * bandwidth the second copy hurts more can turn it on from a size. */
static size_t direct_min(int n) {
  (void)n;
  return SIZE_MAX;
}

static int probe_sync(hvd_transport *t) {
  hvd_sync_stamp mine = {0, PROBE_KIND, 0}, odd;
  int odd_rank;
  int rc = t->ops->caps.sync(t, &mine, &odd, &odd_rank);
  if (rc == 1)
    return hvd__err(HVD_E_MISMATCH, "rank %d is at collective #%u while the ranks of its host "
                    "set up shared memory", odd_rank, odd.tag);
  return rc;
}

/* Reads every other rank's word; 0, or what went wrong on *peer. */
static int probe_peers(hvd_transport *t, const seg_rank *ranks, int *peer) {
  for (int r = 0; r < t->size; r++) {
    if (r == t->rank) continue;
    uint64_t got = 0;
    struct iovec l = {&got, sizeof got};
    struct iovec rv = {(void *)(uintptr_t)ranks[r].probe_addr, sizeof got};
    *peer = r;
    errno = 0;
    if (process_vm_readv(hvd__shm_pid(t, r), &l, 1, &rv, 1, 0) != (ssize_t)sizeof got)
      return errno ? errno : EIO;
    if (got != ranks[r].probe_value) return PROBE_WRONG_VALUE;
  }
  return 0;
}

/* What a rank's failed probe says, for the log. */
static void describe(hvd_transport *t, int r, const seg_rank *s, char *why, size_t cap) {
  int peer = s->probe_peer >= 0 && s->probe_peer < t->size ? hvd__shm_job_rank(t, s->probe_peer)
                                                             : -1;
  int who = hvd__shm_job_rank(t, r);
  if (s->probe_result == PROBE_OFF)
    snprintf(why, cap, "rank %d has HOROVOD_SHM_SINGLE_COPY=0", who);
  else if (s->probe_result == PROBE_WRONG_VALUE)
    snprintf(why, cap, "rank %d read the wrong value from rank %d's memory", who, peer);
  else if (s->probe_result == EPERM)
    snprintf(why, cap, "rank %d may not read rank %d's memory (process_vm_readv: %s; the "
             "kernel's ptrace rules, such as kernel.yama.ptrace_scope above 0 or a "
             "container's seccomp profile, forbid it)", who, peer, strerror(EPERM));
  else if (s->probe_result > 0)
    snprintf(why, cap, "rank %d could not read rank %d's memory (process_vm_readv: %s)", who,
             peer, strerror(s->probe_result));
  else
    snprintf(why, cap, "rank %d reported probe result %d", who, (int)s->probe_result);
}

int hvd__shm_single_copy_probe(hvd_transport *t, int wanted, uint64_t min, char *why,
                               size_t cap) {
  seg_rank *ranks = hvd__shm_ranks(t), *me = &ranks[t->rank];
  uint64_t *word = hvd__shm_probe_word(t);
  *word = ((uint64_t)getpid() << 32 | (uint32_t)t->rank) ^ 0x9e3779b97f4a7c15ull;
  me->probe_addr = (uint64_t)(uintptr_t)word;
  me->probe_value = *word;
  me->probe_min = min;
  HVD__CHECK(probe_sync(t));
  int peer = -1, result = wanted ? probe_peers(t, ranks, &peer) : PROBE_OFF;
  me->probe_result = result;
  me->probe_peer = peer;
  HVD__CHECK(probe_sync(t));
  for (int r = 0; r < t->size; r++)
    if (ranks[r].probe_result != 0) {
      describe(t, r, &ranks[r], why, cap);
      return 0;
    }
  hvd__shm_enable_peer_read(t, peer_read);
  t->peer_read_min = ranks[0].probe_min ? (size_t)ranks[0].probe_min : direct_min(t->size);
  return 1;
}
