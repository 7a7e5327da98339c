/*
 * transport.h -- moving bytes between ranks, plus what some transports
 * can do besides.
 *
 * A transport is a small struct of functions (as in NCCL): the collectives
 * are written against it and never see a socket.  Every transport moves
 * bytes (sendrecv, abort, destroy below).  TCP (tcp.c) does only that;
 * shared memory (shm.c, for ranks on one host) and hybrid.c (shared memory
 * within each host, TCP between them) declare optional capabilities as
 * well (hvd_transport_caps): shared windows and a barrier, reading another
 * rank's memory, a faster transport among the ranks of this host.  A
 * collective asks for a capability by testing its pointer, and works
 * without it; none of them is part of what moving bytes means.
 *
 * Semantics every transport keeps:
 *   - sendrecv() sends one message to `to` while receiving one message from
 *     `from`, at the same time, so a ring step never deadlocks on full
 *     socket buffers.  Either half may be skipped by passing peer -1.
 *     to == from is allowed (pairwise exchange).  The receiver always
 *     knows the exact size it expects (rlen); a message of another size,
 *     or with another tag, is a protocol/mismatch error.
 *   - Every call finishes or fails within the transport's timeout of no
 *     progress (HOROVOD_GLOO_TIMEOUT_SECONDS).  A peer that closes or
 *     fails gives HVD_E_PEER_LOST naming the rank; a peer that sent an
 *     ABORT gives HVD_E_PEER_LOST naming the rank that peer lost, with its
 *     reason, so the first failure propagates around the job.
 *   - After any error the transport is broken: abort() tells every peer
 *     (best effort, without blocking) and closes the connections.
 */
#ifndef HVD_TRANSPORT_H
#define HVD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common.h"
#include "wire/auth.h"
#include "wire/net.h"
#include "transport/live.h"

typedef struct hvd_transport hvd_transport;

#define HVD_WINDOWS 3
/* Bytes a sync carries (caps.sync_small): what is left of a cache line
 * beside its counter and stamp. */
#define HVD_SYNC_SMALL 40

/* What a rank says it is doing when it reaches a sync (below): every
 * rank must say the same, or the ranks called different collectives. */
typedef struct {
  uint32_t tag;   /* the collective's */
  uint32_t kind;  /* what the caller makes of it (dtype and op, say) */
  uint64_t bytes; /* of the whole collective */
} hvd_sync_stamp;

/* What a transport may offer besides moving bytes: each NULL where it
 * does not. */
typedef struct {
  /* The windows of shared memory the shm allreduce works in
   * (coll/shm_allreduce.c).  Every rank has HVD_WINDOWS windows of
   * window_bytes that every rank can read and write; window(t, r, w) is
   * rank r's window w. */
  unsigned char *(*window)(hvd_transport *t, int rank, int which);
  /* Waits until every rank has made as many sync calls as this one: a
   * barrier of the whole transport, within the same deadline and with the
   * same failure reports as sendrecv.  Returns 0, or 1 when a rank's stamp
   * differs from *mine (*odd then holds it and *odd_rank the rank), or an
   * error.  Offered with window. */
  int (*sync)(hvd_transport *t, const hvd_sync_stamp *mine, hvd_sync_stamp *odd, int *odd_rank);
  /* The same, publishing n <= HVD_SYNC_SMALL bytes with this rank's
   * arrival; after it returns 0, synced(t, r) is rank r's bytes of it
   * until this rank's next sync.  A small collective then needs no window:
   * its values travel in the line the ranks poll anyway.  Offered with
   * sync. */
  int (*sync_small)(hvd_transport *t, const hvd_sync_stamp *mine, const void *small, size_t n,
                    hvd_sync_stamp *odd, int *odd_rank);
  const unsigned char *(*synced)(hvd_transport *t, int rank);
  /* (shm.c, where the ranks may read each other's memory, which setup
   * probes): copies bytes of rank `rank`'s memory, remote[0..nr), into
   * this rank's local[0..nl) (the same number of bytes), as Linux's
   * process_vm_readv: one copy, by the kernel, with no shared buffer in
   * between.  The caller makes sure the other rank's buffers stay put
   * meanwhile (a sync on each side). */
  int (*peer_read)(hvd_transport *t, int rank, const struct iovec *local, size_t nl,
                   const struct iovec *remote, size_t nr);
  /* (hybrid.c): the faster transport this one uses among the ranks of
   * this rank's host, numbered in its own order; *members gets the job's
   * rank of each of its ranks.  It stays owned by t: a communicator may
   * run over it, never free it. */
  hvd_transport *(*host)(hvd_transport *t, const int **members);
} hvd_transport_caps;

typedef struct {
  const char *name;
  int (*sendrecv)(hvd_transport *t, int to, const void *sbuf, size_t slen, int from, void *rbuf,
                  size_t rlen, uint32_t tag);
  /* Tells every peer that this rank gives up because of `lost_rank` and
   * `why`; closes everything.  Idempotent.  lost_rank -1 means "the rank
   * whose failure the transport itself saw, if any", so the peers learn
   * which rank was lost and not only that this one gave up. */
  void (*abort)(hvd_transport *t, int lost_rank, const char *why);
  void (*destroy)(hvd_transport *t);
  hvd_transport_caps caps; /* optional */
} hvd_transport_ops;

struct hvd_transport {
  const hvd_transport_ops *ops;
  int rank, size;
  size_t window_bytes; /* of each window; 0 without caps.window */
  /* Bytes a send may leave for its receiver to read later: a send of at
   * most this much completes whatever the receiver is doing (the ring's
   * room; for TCP what any Linux socket buffers).  The same on every rank
   * of the transport, so both ends of a pair can size messages by it. */
  size_t in_flight;
  /* With caps.peer_read: the smallest allreduce worth reading the other
   * ranks' buffers directly (shm.c sets it, the same on every rank). */
  size_t peer_read_min;
};

typedef struct {
  int rank, size;
  hvd_secret key;
  int listen_fd;              /* bound and listening; the transport owns it */
  const hvd_peer_addr *peers; /* size entries; peers[rank] is this rank */
  uint64_t connect_deadline;  /* for the watch connections at start-up */
  int timeout_ms;             /* no-progress deadline for each sendrecv */
  /* Microseconds a waiting sendrecv keeps trying its sockets without
   * blocking before it sleeps in poll(): a peer with a core of its own
   * answers within microseconds, sooner than the wake-up from poll()
   * would.  0 where the ranks of this host share cores: spinning then
   * takes the core a peer needs. */
  int spin_us;
  /* With spin_us 0: whether a waiting sendrecv yields its core a while
   * before it sleeps (up to 2 ranks a core, as shm.c decides), or sleeps
   * at once: hundreds of ranks yielding to each other keep the run queue
   * full and starve the ranks (and hvdrun's agents) with work. */
  int yield_first;
  /* How long a rank may show no sign of life (live.h) before this rank
   * gives up on it, in ms; 0: never (the watch connections are made and
   * this rank's life is sent all the same, so that the peers' setting
   * needs no agreement). */
  int live_ms;
  const char *const *hosts; /* [size]: each rank's host, for messages; NULL: none */
} hvd_tcp_config;

/* Starts the TCP transport: a thread that accepts and authenticates the
 * peers' connections ("data" purpose, ids = ranks; tcp_links.h), and the
 * watch connections to this rank's neighbours on the ring of ranks
 * ("watch" purpose, watch.h), served by a watchdog thread, made before
 * connect_deadline (HVD_E_TIMEOUT naming the ranks missing).  Data
 * connections are made on first use, one per pair of ranks that talk.
 * Connections that fail authentication or send garbage are dropped. */
int hvd__tcp_create(const hvd_tcp_config *cfg, hvd_transport **out);

/* The TCP transport's alarm (live.h): raised by its watchdog, it fails
 * the wait in progress; a transport that waits for the same ranks in
 * another way (shared memory under hybrid.c) listens to it too. */
hvd_alarm *hvd__tcp_alarm(hvd_transport *t);

/* The data connections a TCP transport holds now (made or accepted):
 * one per peer it has exchanged with.  t must be a TCP transport. */
int hvd__tcp_connections(hvd_transport *t);

/* The checks every sendrecv makes of a peer argument (-1: that half is
 * skipped); 0 if usable.  role: "destination" or "source". */
static inline int hvd__check_peer(const hvd_transport *t, int peer, const void *buf, size_t len,
                                  const char *role) {
  if (peer == -1) return 0;
  if (peer < 0 || peer >= t->size)
    return hvd__err(HVD_E_INVALID, "sendrecv: %s rank %d out of range (size %d)", role, peer,
                    t->size);
  if (peer == t->rank)
    return hvd__err(HVD_E_INVALID, "sendrecv: %s rank %d is this rank", role, peer);
  if (len > 0 && !buf) return hvd__err(HVD_E_INVALID, "sendrecv: NULL buffer for %zu bytes", len);
  return 0;
}

/* Convenience wrappers over the ops. */
static inline int hvd__sendrecv(hvd_transport *t, int to, const void *sbuf, size_t slen, int from,
                                void *rbuf, size_t rlen, uint32_t tag) {
  return t->ops->sendrecv(t, to, sbuf, slen, from, rbuf, rlen, tag);
}
static inline int hvd__send(hvd_transport *t, int to, const void *buf, size_t len, uint32_t tag) {
  return t->ops->sendrecv(t, to, buf, len, -1, NULL, 0, tag);
}
static inline int hvd__recv(hvd_transport *t, int from, void *buf, size_t len, uint32_t tag) {
  return t->ops->sendrecv(t, -1, NULL, 0, from, buf, len, tag);
}

#endif /* HVD_TRANSPORT_H */
