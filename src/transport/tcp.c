/*
 * tcp.c -- the TCP transport (transport.h): authenticated connections,
 * one per pair of ranks that talk, and framed sendrecv over them.
 *
 * Connections on first use.  A rank connects to a peer the first time a
 * sendrecv needs it (to send or to receive), so that a rank holds only
 * the connections its collectives use: a full mesh made at start-up
 * meant n(n-1)/2 handshakes at once, which 256 ranks did not survive.
 * The peer's links thread (tcp_links.c) accepts and authenticates it
 * whatever the peer's own thread is doing, and decides which connection
 * survives when both ends connect at once.  At start-up only the watch
 * connections (watch.h) are made.
 *
 * sendrecv.  One DATA frame (frame.h) goes out while one comes in, both
 * sockets multiplexed with poll(), so a ring step cannot deadlock on full
 * socket buffers.  The payload goes straight from the caller's buffer to
 * the socket (sendmsg with two iovecs: header and payload) and from the
 * socket into the caller's buffer (a small frame's header and payload by
 * one recvmsg: one system call each way); nothing is copied.  The
 * deadline is one of no progress: it restarts whenever bytes move, so a
 * slow peer is fine and a stuck one fails.
 *
 * A transport is driven by one thread at a time; abort() must not race a
 * sendrecv() in another thread.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "wire/frame.h"
#include "tcp_links.h"
#include "transport.h"
#include "watch.h"

/* What a send may leave in the socket buffers without the receiver
 * reading: hvd asks for 4 MiB each way (net.c) and Linux caps that at
 * net.core.wmem_max, which is 208 KiB by default and more on every tuned
 * system; a constant, so that every rank sizes messages alike. */
#define TCP_IN_FLIGHT (128u * 1024u)
/* An ABORT payload: i32 lost rank, then the reason (u16 length + bytes). */
#define ABORT_REASON_MAX 512
#define ABORT_PAYLOAD_MAX (4 + 2 + ABORT_REASON_MAX)
_Static_assert(HVD_FRAME_HDR_LEN + ABORT_PAYLOAD_MAX <= HVD_LINKS_ABORT_MAX,
               "the links can pass an ABORT frame on");
#define WHY_MAX 512
/* Watch connections of a rank: its two neighbours on the ring. */
#define WATCH_MAX 2

typedef struct {
  int fd;
  /* A frame to this peer stopped half-way: anything written after it
   * would be read as its payload.  Payload bytes still owed (abort() pads
   * them with zeros before its ABORT), or SIZE_MAX when the header itself
   * was cut and no ABORT can follow. */
  size_t unsent;
} tcp_conn;

/* What blame() knows of a peer: the rank it waited on, or one of these. */
#define REPORT_NONE (-1)    /* nothing heard (yet) */
#define REPORT_GONE (-2)    /* connection closed or unreadable */
#define REPORT_ABORTED (-3) /* aborted for a reason of its own, not a lost rank */

/* What blame() concludes. */
typedef struct {
  int rank;    /* the rank at the end of the chain of waits */
  int aborted; /* it aborted for its own reason (why), rather than going silent */
  char why[512];
  char chain[256]; /* "3 -> 1 -> 7" */
} verdict;

/* How long abort() may spend finishing cut frames, over all peers: the
 * peers are alive and reading, or they are not and this is lost anyway. */
#define ABORT_PAD_MS 200
/* With more ranks on the host than cores, yields before poll(): a
 * poll() sleep and its wake-up cost more than handing the core to the
 * peer (np 4 on 2 cores, 8 B allreduce: 43 us sleeping at once, 16-25 us
 * with 64-1000 yields first, as OpenMPI yields when oversubscribed). */
#define SHARED_YIELDS 256

struct tcp_transport {
  hvd_transport base;   /* first: hvd_transport * and tcp_transport * convert */
  tcp_conn *conns;      /* size entries, -1 until first use; conns[rank].fd stays -1 */
  hvd_links *links;     /* the accepting thread; NULL alone, and once aborted */
  hvd_peer_addr *peers; /* [size]: where each rank listens */
  hvd_secret key;
  int timeout_ms;
  int spin_us, yield_first; /* hvd_tcp_config's */
  int broken;               /* an error or an abort happened: later calls fail fast */
  int lost;                 /* the rank whose failure broke it, -1 if none or unknown */
  int announced;            /* our ABORT went out already (see blame) */
  const struct half *cur_r; /* the receiving half of the sendrecv in progress */
  char why[WHY_MAX];        /* what broke it, for those later calls */
  /* Liveness (live.h): the watchdog, its alarm, and until it starts the
   * watch connections being made (watch_fd[i] to watch_peer[i]). */
  hvd_alarm alarm;
  hvd_watch *watch;
  int live_ms;
  int nwatch;
  int watch_peer[WATCH_MAX], watch_fd[WATCH_MAX];
  char watch_host[WATCH_MAX][256]; /* for the verdicts' messages */
};

static int tcp_sendrecv(hvd_transport *base, int to, const void *sbuf, size_t slen, int from,
                        void *rbuf, size_t rlen, uint32_t tag);
static void tcp_abort(hvd_transport *base, int lost_rank, const char *why);
static void tcp_destroy(hvd_transport *base);
static void announce(struct tcp_transport *t, int lost_rank, const char *why);

static const hvd_transport_ops tcp_ops = {.name = "tcp",
                                          .sendrecv = tcp_sendrecv,
                                          .abort = tcp_abort,
                                          .destroy = tcp_destroy};

/* Marks t broken by the error just set, and returns it. */
static int fail(struct tcp_transport *t, int rc) {
  if (!t->broken) {
    t->broken = 1;
    snprintf(t->why, sizeof t->why, "%s", hvd_last_error());
  }
  return rc;
}

/* Like fail(), remembering which rank was lost so that abort() can tell
 * the other peers who it was, not just that this rank gave up. */
static int fail_lost(struct tcp_transport *t, int rc, int lost) {
  if (!t->broken) t->lost = lost;
  return fail(t, rc);
}

/* Shuts the connection down gracefully.  Whatever the peer sent that we
 * never read is discarded first: closing a socket with unread data makes
 * the kernel send a reset, which would throw away our own unsent bytes
 * (an ABORT frame) instead of delivering them. */
static void close_conn(tcp_conn *c) {
  char sink[16384];
  if (c->fd < 0) return;
  shutdown(c->fd, SHUT_WR);
  for (int i = 0; i < 256; i++) /* bounded: a peer may keep sending */
    if (recv(c->fd, sink, sizeof sink, MSG_TRUNC | MSG_DONTWAIT) <= 0) break;
  hvd__net_close(&c->fd);
}

/* ================================================================== */
/* Start-up: the links thread and the watch connections              */
/* ================================================================== */

static int check_config(const hvd_tcp_config *cfg) {
  if (cfg->size < 1 || cfg->rank < 0 || cfg->rank >= cfg->size)
    return hvd__err(HVD_E_INVALID, "tcp transport: rank %d out of range for size %d", cfg->rank,
                    cfg->size);
  if (cfg->size > 1 && !cfg->peers) return hvd__err(HVD_E_INVALID, "tcp transport: no peer table");
  if (cfg->size > 1 && cfg->listen_fd < 0)
    return hvd__err(HVD_E_INVALID, "tcp transport: no listening socket for the peers");
  if (cfg->timeout_ms <= 0)
    return hvd__err(HVD_E_INVALID, "tcp transport: timeout %d ms must be positive",
                    cfg->timeout_ms);
  return 0;
}

/* The ranks this one watches and is watched by: its neighbours on the
 * ring of ranks (watch.h).  The higher rank of each pair connects, so
 * the ring's last rank connects to rank 0. */
static void watch_ring(struct tcp_transport *t) {
  int r = t->base.rank, n = t->base.size;
  t->nwatch = 0;
  for (int i = 0; i < WATCH_MAX; i++) t->watch_fd[i] = -1;
  if (n < 2) return;
  t->watch_peer[t->nwatch++] = (r + n - 1) % n;
  if (n > 2) t->watch_peer[t->nwatch++] = (r + 1) % n;
}

/* Reads len bytes before the deadline, in slices with a sign of life
 * after each (live.h): a first contact happens inside a collective, and
 * under load the peer's links thread may take seconds to answer, which
 * must not look like a stuck engine to this rank's watchers.
 * HVD_E_ABORTED when the alarm was raised meanwhile. */
static int read_living(struct tcp_transport *t, int fd, uint8_t *buf, size_t len,
                       uint64_t deadline) {
  size_t done = 0;
  while (done < len) {
    long n = hvd__net_read_some(fd, buf + done, len - done);
    if (n < 0) return (int)n;
    done += (size_t)n;
    if (n > 0) continue;
    int left = hvd__ms_left(deadline);
    if (left == 0)
      return hvd__err(HVD_E_TIMEOUT, "no answer in time (%zu of %zu bytes)", done, len);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, left < HVD_LIVE_SLICE_MS ? left : HVD_LIVE_SLICE_MS) < 0 && errno != EINTR)
      return hvd__err_sys(HVD_E_SYSTEM, errno, "poll");
    hvd__live_beat();
    if (hvd__alarm_raised(&t->alarm)) return hvd__err(HVD_E_ABORTED, "the alarm was raised");
  }
  return 0;
}

/* The connector's side of the handshake (auth.h) as rank r's peer for
 * `purpose`, then the acceptor's decision (tcp_links.h). */
static int handshake_with(struct tcp_transport *t, int fd, int r, const char *purpose,
                          uint64_t deadline, uint8_t *decision) {
  hvd_auth_state st;
  uint8_t challenge[HVD_AUTH_CHALLENGE_LEN], response[HVD_AUTH_RESPONSE_LEN],
      proof[HVD_AUTH_PROOF_LEN + 1];
  uint32_t id;
  HVD__CHECK(read_living(t, fd, challenge, sizeof challenge, deadline));
  HVD__CHECK(hvd__auth_respond(&t->key, purpose, (uint32_t)t->base.rank, challenge, &st, response));
  HVD__CHECK(hvd__net_write_all(fd, response, sizeof response, deadline));
  int rc = read_living(t, fd, proof, sizeof proof, deadline);
  if (rc == HVD_E_PEER_LOST) /* what an acceptor does to a response it rejects */
    return hvd__err_prefix(rc, "auth: the peer hung up after our response (is its secret key "
                               "this job's?)");
  if (rc < 0) return rc;
  HVD__CHECK(hvd__auth_verify_proof(&t->key, purpose, proof, &st, &id));
  if (id != (uint32_t)r)
    return hvd__err(HVD_E_AUTH, "the peer proved it is rank %u (peer table out of date?)", id);
  *decision = proof[HVD_AUTH_PROOF_LEN];
  if (*decision != HVD_LINK_ACCEPT && *decision != HVD_LINK_REFUSE)
    return hvd__err(HVD_E_PROTOCOL, "it answered 0x%02x, expected accept or refuse", *decision);
  return 0;
}

/* Connects and authenticates to rank r for `purpose`: *out is the
 * connection when it was accepted, -1 when the peer's own wins. */
static int connect_one(struct tcp_transport *t, int r, const char *purpose, uint64_t deadline,
                       int *out) {
  const hvd_peer_addr *p = &t->peers[r];
  uint8_t decision = 0;
  int fd;
  int rc = hvd__net_connect_listening(p->addr, p->port, deadline, &fd);
  if (rc < 0) return hvd__err_prefix(rc, "connecting to rank %d", r);
  rc = handshake_with(t, fd, r, purpose, deadline, &decision);
  if (rc < 0 || decision != HVD_LINK_ACCEPT) hvd__net_close(&fd);
  if (rc < 0)
    return hvd__err_prefix(rc, "authenticating with rank %d (%s port %d)", r, p->addr, p->port);
  *out = fd;
  return 0;
}

/* Connects to the lower of this rank's watch neighbours: the higher rank
 * of each pair connects (the ring's last rank to rank 0). */
static int connect_watch(struct tcp_transport *t, uint64_t deadline) {
  for (int i = 0; i < t->nwatch; i++) {
    int r = t->watch_peer[i];
    if (r > t->base.rank) continue;
    HVD__CHECK(connect_one(t, r, HVD_WATCH_PURPOSE, deadline, &t->watch_fd[i]));
    if (t->watch_fd[i] < 0)
      return hvd__err(HVD_E_PROTOCOL, "rank %d refused this rank's watch connection", r);
  }
  return 0;
}

/* Claims the watch connections the higher neighbours made; how many are
 * still missing. */
static int watch_missing(struct tcp_transport *t) {
  int missing = 0, k = 0; /* k: its index among the links' watch peers */
  for (int i = 0; i < t->nwatch; i++) {
    if (t->watch_peer[i] < t->base.rank) continue;
    if (t->watch_fd[i] < 0 && !hvd__links_claim_watch(t->links, k, &t->watch_fd[i])) missing++;
    k++;
  }
  return missing;
}

static int watch_timeout(const struct tcp_transport *t, uint64_t start) {
  char list[64] = "";
  size_t len = 0;
  int n = 0;
  for (int i = 0; i < t->nwatch; i++)
    if (t->watch_peer[i] > t->base.rank && t->watch_fd[i] < 0)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", n++ ? " and " : "",
                              t->watch_peer[i]);
  return hvd__err(HVD_E_TIMEOUT, "%s %s never connected to rank %d (waited %.1f s)",
                  n == 1 ? "rank" : "ranks", list, t->base.rank,
                  (double)(hvd__now_ms() - start) / 1000.0);
}

/* Waits for the higher watch neighbours' connections, which the links
 * thread accepts. */
static int await_watch(struct tcp_transport *t, uint64_t deadline, uint64_t start) {
  while (watch_missing(t) > 0) {
    struct pollfd p = {.fd = hvd__links_event_fd(t->links), .events = POLLIN};
    int left = hvd__ms_left(deadline);
    if (left == 0) return watch_timeout(t, start);
    /* in slices: the event is a hint, the table the truth */
    if (poll(&p, 1, left < HVD_LIVE_SLICE_MS ? left : HVD_LIVE_SLICE_MS) < 0 && errno != EINTR)
      return hvd__err_sys(HVD_E_SYSTEM, errno, "poll");
    hvd__links_event_clear(t->links);
  }
  return 0;
}

/* TCP_IN_FLIGHT is a promise about the kernel's socket buffers (Linux
 * reports twice what a buffer holds): say so when this kernel breaks it,
 * because then a job on several hosts can stall (hybrid.c).  Every
 * socket of the transport gets the same buffers (net.c): one tells. */
static void check_buffers(const struct tcp_transport *t, int fd) {
  int bytes = 0;
  socklen_t len = sizeof bytes;
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len) != 0) return;
  if ((size_t)bytes < 2 * TCP_IN_FLIGHT)
    hvd__log(HVD_LOG_WARNING,
             "rank %d: the kernel gives TCP sockets only %d bytes of send "
             "buffer (net.core.wmem_max); hvd needs at least %u: raise it",
             t->base.rank, bytes / 2, TCP_IN_FLIGHT);
}

static int tcp_alloc(const hvd_tcp_config *cfg, struct tcp_transport **out) {
  struct tcp_transport *t = calloc(1, sizeof *t);
  if (!t) goto fail;
  t->conns = calloc((size_t)cfg->size, sizeof *t->conns);
  t->peers = calloc((size_t)cfg->size, sizeof *t->peers);
  if (!t->conns || !t->peers) goto free_t;
  for (int r = 0; r < cfg->size; r++) t->conns[r].fd = -1;
  if (cfg->size > 1) memcpy(t->peers, cfg->peers, (size_t)cfg->size * sizeof *t->peers);
  t->key = cfg->key;
  t->lost = -1;
  t->base.ops = &tcp_ops;
  t->base.rank = cfg->rank;
  t->base.size = cfg->size;
  t->base.in_flight = TCP_IN_FLIGHT;
  t->timeout_ms = cfg->timeout_ms;
  t->spin_us = cfg->spin_us;
  t->yield_first = cfg->yield_first;
  t->live_ms = cfg->live_ms;
  watch_ring(t);
  for (int i = 0; i < t->nwatch; i++)
    snprintf(t->watch_host[i], sizeof t->watch_host[i], "%s",
             cfg->hosts && cfg->hosts[t->watch_peer[i]] ? cfg->hosts[t->watch_peer[i]] : "");
  int rc = hvd__alarm_init(&t->alarm);
  if (rc < 0) {
    free(t->conns);
    free(t->peers);
    free(t);
    return rc;
  }
  *out = t;
  return 0;

free_t:
  free(t->conns);
  free(t->peers);
  free(t);
fail:
  return hvd__err(HVD_E_NOMEM, "tcp transport: out of memory for %d ranks", cfg->size);
}

/* Starts the thread that accepts connections (it owns listen_fd from
 * here); none for a job of one. */
static int start_links(struct tcp_transport *t, int listen_fd) {
  int watchers[WATCH_MAX], n = 0;
  if (t->base.size < 2) {
    hvd__net_close(&listen_fd);
    return 0;
  }
  for (int i = 0; i < t->nwatch; i++)
    if (t->watch_peer[i] > t->base.rank) watchers[n++] = t->watch_peer[i];
  hvd_links_config lc = {.rank = t->base.rank,
                         .size = t->base.size,
                         .key = t->key,
                         .listen_fd = listen_fd,
                         .nwatch = n,
                         .watch_peer = watchers};
  return hvd__links_start(&lc, &t->links);
}

/* The watch connections are made: the watchdog takes them. */
static int start_watch(struct tcp_transport *t) {
  const char *hosts[WATCH_MAX];
  for (int i = 0; i < t->nwatch; i++) hosts[i] = t->watch_host[i];
  if (t->nwatch > 0) check_buffers(t, t->watch_fd[0]);
  hvd_watch_config wc = {.rank = t->base.rank,
                         .n = t->nwatch,
                         .fds = t->watch_fd,
                         .peers = t->watch_peer,
                         .hosts = hosts,
                         .window_ms = t->live_ms,
                         .alarm = &t->alarm};
  return hvd__watch_start(&wc, &t->watch);
}

hvd_alarm *hvd__tcp_alarm(hvd_transport *base) { return &((struct tcp_transport *)base)->alarm; }

int hvd__tcp_create(const hvd_tcp_config *cfg, hvd_transport **out) {
  int listen_fd = cfg->listen_fd; /* ours from here on, whatever happens */
  uint64_t start = hvd__now_ms();
  struct tcp_transport *t = NULL;
  *out = NULL;
  int rc = check_config(cfg);
  if (rc == 0) rc = tcp_alloc(cfg, &t);
  if (rc < 0) {
    hvd__net_close(&listen_fd);
    return rc;
  }
  rc = start_links(t, listen_fd);
  if (rc == 0) rc = connect_watch(t, cfg->connect_deadline);
  if (rc == 0 && t->links) rc = await_watch(t, cfg->connect_deadline, start);
  if (rc == 0) rc = start_watch(t);
  if (rc < 0) {
    tcp_destroy(&t->base);
    return rc;
  }
  hvd__log(HVD_LOG_DEBUG,
           "rank %d: watching %d peers, data connections made on first use "
           "(%.1f ms)",
           cfg->rank, t->nwatch, (double)(hvd__now_ms() - start));
  *out = &t->base;
  return 0;
}

/* ================================================================== */
/* sendrecv                                                            */
/* ================================================================== */

/* One direction of a sendrecv: one frame, header then payload. */
typedef struct half {
  int peer; /* -1: this half is skipped */
  int fd;
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  uint8_t *payload;
  size_t len;  /* payload bytes */
  size_t done; /* bytes moved so far, header included */
  int abort;   /* receiving: the frame is an ABORT, payload in abort_buf */
  uint8_t abort_buf[ABORT_PAYLOAD_MAX];
} half;

static int half_done(const half *h) { return h->peer < 0 || h->done == HVD_FRAME_HDR_LEN + h->len; }

/* Payload bytes moved, for messages. */
static size_t half_payload_done(const half *h) {
  return h->done > HVD_FRAME_HDR_LEN ? h->done - HVD_FRAME_HDR_LEN : 0;
}

static void blame(struct tcp_transport *t, int start, int start_report, verdict *v);

/* Our connection to `peer` closed or reset.  It may have died, or it may
 * have aborted and closed after telling us why: its ABORT is then still in
 * our receive buffer (Linux keeps received bytes after a reset), and the
 * other ranks' reports say more. */
static int peer_lost(struct tcp_transport *t, int peer) {
  char detail[WHY_MAX];
  verdict v;
  snprintf(detail, sizeof detail, "%s", hvd_last_error());
  announce(t, peer, detail);
  blame(t, peer, REPORT_NONE, &v);
  if (v.aborted)
    return fail_lost(t,
                     hvd__err(HVD_E_PEER_LOST, "rank %d aborted: %s (waits: %s)", v.rank, v.why,
                              v.chain),
                     v.rank);
  if (v.rank == peer)
    return fail_lost(t, hvd__err(HVD_E_PEER_LOST, "rank %d lost: %s", peer, detail), peer);
  return fail_lost(t,
                   hvd__err(HVD_E_PEER_LOST,
                            "rank %d lost (waits: %s; rank %d closed its connection)", v.rank,
                            v.chain, peer),
                   v.rank);
}

static int io_failed(struct tcp_transport *t, int rc, int peer, const char *doing) {
  if (rc == HVD_E_PEER_LOST) return peer_lost(t, peer);
  return fail(t, hvd__err_prefix(rc, "%s rank %d", doing, peer));
}

/* Writes what the socket takes now.  Bytes moved, or <0. */
static long send_step(struct tcp_transport *t, half *h) {
  struct iovec iov[2];
  int cnt = 0;
  if (h->done < HVD_FRAME_HDR_LEN)
    iov[cnt++] = (struct iovec){.iov_base = h->hdr + h->done,
                                .iov_len = HVD_FRAME_HDR_LEN - h->done};
  size_t off = half_payload_done(h);
  if (off < h->len)
    iov[cnt++] = (struct iovec){.iov_base = h->payload + off, .iov_len = h->len - off};
  long n = hvd__net_writev_some(h->fd, iov, cnt);
  if (n < 0) return io_failed(t, (int)n, h->peer, "sending to");
  h->done += (size_t)n;
  return n;
}

/* The ABORT frame the peer sent is complete: turn it into our error.  A
 * peer that names a lost rank may only have seen its own neighbour go
 * silent, so follow the reports to the rank that is really stuck. */
static int peer_aborted(struct tcp_transport *t, const half *h) {
  hvd_reader r = {.buf = h->abort_buf, .len = h->len};
  int32_t lost = (int32_t)hvd__get_u32(&r);
  char why[ABORT_REASON_MAX];
  verdict v;
  hvd__get_str(&r, why, sizeof why);
  if (!hvd__reader_done(&r) || lost < -1 || lost >= t->base.size)
    return fail(t, hvd__err(HVD_E_PROTOCOL, "rank %d sent a malformed ABORT frame", h->peer));
  for (char *c = why; *c; c++) /* it goes into our messages and logs verbatim */
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  if (lost < 0) return fail(t, hvd__err(HVD_E_PEER_LOST, "rank %d aborted: %s", h->peer, why));
  if (lost == t->base.rank)
    return fail(t, hvd__err(HVD_E_PEER_LOST, "rank %d gave up on this rank: %s", h->peer, why));
  /* Pass the news on at once: ranks further away wait on us. */
  announce(t, lost, why);
  blame(t, h->peer, lost, &v);
  if (v.aborted)
    return fail_lost(t,
                     hvd__err(HVD_E_PEER_LOST, "rank %d aborted: %s (waits: %s)", v.rank, v.why,
                              v.chain),
                     v.rank);
  if (v.rank == lost)
    return fail_lost(t,
                     hvd__err(HVD_E_PEER_LOST, "rank %d lost (reported by rank %d: %s)", lost,
                              h->peer, why),
                     lost);
  return fail_lost(t,
                   hvd__err(HVD_E_PEER_LOST, "rank %d lost (waits: %s; rank %d reported: %s)",
                            v.rank, v.chain, h->peer, why),
                   v.rank);
}

/* The header is complete, and `early` bytes after it were read into the
 * payload's buffer with it: is it the frame we expect?  An ABORT is the
 * last frame a peer sends, so its early bytes are its payload's first and
 * move to abort_buf. */
static int check_header(struct tcp_transport *t, half *h, uint32_t tag, size_t early) {
  hvd_frame f;
  if (hvd__frame_decode(h->hdr, &f) < 0)
    return fail(t, hvd__err_prefix(HVD_E_PROTOCOL, "rank %d sent a malformed frame", h->peer));
  if (f.type == HVD_FRAME_ABORT) {
    if (f.len > sizeof h->abort_buf || early > f.len)
      return fail(t, hvd__err(HVD_E_PROTOCOL,
                              "rank %d sent an ABORT frame of %llu bytes (at most %zu) with "
                              "%zu bytes behind its header",
                              h->peer, (unsigned long long)f.len, sizeof h->abort_buf, early));
    memcpy(h->abort_buf, h->payload, early);
    h->abort = 1;
    h->payload = h->abort_buf;
    h->len = (size_t)f.len;
    return 0;
  }
  if (f.type != HVD_FRAME_DATA)
    return fail(t, hvd__err(HVD_E_PROTOCOL, "rank %d sent a frame of type %u, expected data",
                            h->peer, f.type));
  if (f.tag != tag)
    return fail(t, hvd__err(HVD_E_MISMATCH,
                            "rank %d is at collective #%u, this rank at #%u (collectives "
                            "called in a different order?)",
                            h->peer, f.tag, tag));
  if (f.len != h->len)
    return fail(t, hvd__err(HVD_E_MISMATCH,
                            "rank %d sent %llu bytes for collective #%u, this rank expected "
                            "%zu bytes (do all ranks pass the same count and dtype?)",
                            h->peer, (unsigned long long)f.len, tag, h->len));
  return 0;
}

/* A payload up to this size is read in the same call as its header.
 * Beyond it a system call is a small part of the frame's time, and the
 * larger first read measured slower (np 2 4 MiB, busbw -11% over 12
 * alternating pairs; the cause is not known), so the header comes alone. */
#define RECV_WITH_HEADER_MAX (16u << 10)

/* Reads what the socket holds now.  Until the header is complete a small
 * payload's buffer is read into by the same call: a small frame costs one
 * system call, not two.  Only the expected frame or an ABORT can be read
 * that way without harm: any other fails the transport (the bytes read
 * past it do not matter then), and the buffer holds no result when the
 * sendrecv fails.  Bytes moved, or <0. */
static long recv_step(struct tcp_transport *t, half *h, uint32_t tag) {
  long moved = 0;
  while (!half_done(h)) {
    long n;
    size_t had = h->done;
    if (had < HVD_FRAME_HDR_LEN && h->len && h->len <= RECV_WITH_HEADER_MAX) {
      struct iovec iov[2] = {{h->hdr + had, HVD_FRAME_HDR_LEN - had}, {h->payload, h->len}};
      n = hvd__net_readv_some(h->fd, iov, 2);
    } else if (had < HVD_FRAME_HDR_LEN) {
      n = hvd__net_read_some(h->fd, h->hdr + had, HVD_FRAME_HDR_LEN - had);
    } else {
      n = hvd__net_read_some(h->fd, h->payload + half_payload_done(h),
                             h->len - half_payload_done(h));
    }
    if (n < 0) return io_failed(t, (int)n, h->peer, "receiving from");
    if (n == 0) break;
    h->done += (size_t)n;
    moved += n;
    if (had < HVD_FRAME_HDR_LEN && h->done >= HVD_FRAME_HDR_LEN)
      HVD__CHECK(check_header(t, h, tag, h->done - HVD_FRAME_HDR_LEN));
  }
  if (h->abort && half_done(h)) return peer_aborted(t, h);
  return moved;
}

/* The no-progress deadline passed.  Before failing, tell every peer whom
 * we waited on and learn whom they waited on, so the error names the rank
 * that is really stuck rather than the neighbour it stalled. */
static void note_cut(struct tcp_transport *t, const half *s);

static int timed_out(struct tcp_transport *t, const half *s, const half *r, uint32_t tag) {
  char what[2][160], mine[WHY_MAX];
  verdict v;
  int n = 0;
  if (!half_done(r))
    snprintf(what[n++], sizeof what[0], "rank %d %s (%zu of %zu bytes received)", r->peer,
             r->done ? "stopped sending" : "sent nothing", half_payload_done(r), r->len);
  if (!half_done(s))
    snprintf(what[n++], sizeof what[0], "rank %d is not receiving (%zu of %zu bytes sent)", s->peer,
             half_payload_done(s), s->len);
  snprintf(mine, sizeof mine, "timed out after %g s without progress at collective #%u: %s%s%s",
           t->timeout_ms / 1000.0, tag, what[0], n > 1 ? "; " : "", n > 1 ? what[1] : "");
  int suspect = !half_done(r) ? r->peer : s->peer;
  note_cut(t, s);
  announce(t, suspect, mine);
  blame(t, suspect, REPORT_NONE, &v);
  if (v.aborted)
    return fail_lost(t,
                     hvd__err(HVD_E_PEER_LOST, "rank %d aborted: %s (waits: %d -> %s)", v.rank,
                              v.why, t->base.rank, v.chain),
                     v.rank);
  if (v.rank == suspect) return fail_lost(t, hvd__err(HVD_E_TIMEOUT, "%s", mine), suspect);
  return fail_lost(t,
                   hvd__err(HVD_E_TIMEOUT, "rank %d stopped responding (waits: %d -> %s); here: %s",
                            v.rank, t->base.rank, v.chain, mine),
                   v.rank);
}

/* The watchdog gave up on a rank (live.h): its verdict is our error, and
 * the peers hear it as they hear any. */
static int alarmed(struct tcp_transport *t) {
  hvd_alarm *a = &t->alarm;
  announce(t, a->lost, a->why);
  return fail_lost(t, hvd__err(HVD_E_PEER_LOST, "%s", a->why), a->lost);
}

/* Waits until a socket of an unfinished half is ready, in slices, with a
 * sign of life after each (live.h).  1: ready, 0: the no-progress deadline
 * passed, 2: the alarm was raised, <0: error. */
static int sendrecv_wait(struct tcp_transport *t, const half *s, const half *r, uint64_t deadline) {
  struct pollfd p[3];
  int np = 0;
  p[np++] = (struct pollfd){.fd = t->alarm.fd, .events = POLLIN};
  if (!half_done(s)) p[np++] = (struct pollfd){.fd = s->fd, .events = POLLOUT};
  if (!half_done(r)) {
    if (np > 1 && p[1].fd == r->fd)
      p[1].events |= POLLIN; /* to == from: one socket, both ways */
    else
      p[np++] = (struct pollfd){.fd = r->fd, .events = POLLIN};
  }
  for (;;) {
    int left = hvd__ms_left(deadline);
    int n = poll(p, (nfds_t)np, left < HVD_LIVE_SLICE_MS ? left : HVD_LIVE_SLICE_MS);
    hvd__live_beat();
    if (hvd__alarm_raised(&t->alarm)) return 2;
    if (n > 0) return 1;
    if (n == 0 && hvd__ms_left(deadline) == 0) return 0;
    if (n < 0 && errno != EINTR) return fail(t, hvd__err_sys(HVD_E_SYSTEM, errno, "poll"));
  }
}

/* ---- first contact ---- */

static void put_conn(void *arg, int peer, int fd) {
  ((struct tcp_transport *)arg)->conns[peer].fd = fd;
}

/* Takes every connection the links accepted and nobody claimed yet: an
 * ABORT, and the search for the rank that is stuck, reach them too. */
static void claim_handed(struct tcp_transport *t) {
  if (t->links) hvd__links_claim_all(t->links, put_conn, t);
}

/* The first connect to `peer` failed: a refusal means it has gone (it
 * ended or aborted, closing its listening socket), anything else that it
 * could not be reached in time. */
static int first_contact_failed(struct tcp_transport *t, int peer, int rc) {
  if (rc == HVD_E_PEER_LOST) return peer_lost(t, peer);
  char why[WHY_MAX];
  snprintf(why, sizeof why, "%s", hvd_last_error());
  announce(t, peer, why);
  return fail_lost(t, hvd__err(rc, "%s", why), peer);
}

/* Connects to `peer`: ours is kept, or the peer's wins and is on its way. */
static int dial(struct tcp_transport *t, int peer, uint64_t deadline) {
  int fd = -1;
  int rc = connect_one(t, peer, HVD_LINK_PURPOSE, deadline, &fd);
  if (hvd__links_connected(t->links, peer, rc < 0 ? -1 : fd >= 0) < 0) {
    hvd__net_close(&fd);
    return fail(t, hvd__err(HVD_E_PROTOCOL,
                            "rank %d and this rank both kept a connection of "
                            "their own to the other (a bug of the links' rule)",
                            peer));
  }
  if (rc < 0 && hvd__alarm_raised(&t->alarm)) return alarmed(t);
  if (rc < 0) return first_contact_failed(t, peer, rc);
  t->conns[peer].fd = fd;
  return 0;
}

/* The peer's connection did not come in time though ours was refused for
 * it: the peer is stuck between its connect and its handshake. */
static int never_connected(struct tcp_transport *t, int peer, uint32_t tag) {
  char why[WHY_MAX];
  snprintf(why, sizeof why,
           "timed out after %g s at collective #%u: rank %d refused this "
           "rank's connection for its own, which never came",
           t->timeout_ms / 1000.0, tag, peer);
  announce(t, peer, why);
  return fail_lost(t, hvd__err(HVD_E_TIMEOUT, "%s", why), peer);
}

/* Waits a slice for the links to hand a connection over. */
static int await_link(struct tcp_transport *t, int peer, uint64_t deadline, uint32_t tag) {
  struct pollfd p[2] = {{.fd = t->alarm.fd, .events = POLLIN},
                        {.fd = hvd__links_event_fd(t->links), .events = POLLIN}};
  int left = hvd__ms_left(deadline);
  if (left == 0) return never_connected(t, peer, tag);
  int n = poll(p, 2, left < HVD_LIVE_SLICE_MS ? left : HVD_LIVE_SLICE_MS);
  hvd__live_beat();
  if (hvd__alarm_raised(&t->alarm)) return alarmed(t);
  if (n < 0 && errno != EINTR) return fail(t, hvd__err_sys(HVD_E_SYSTEM, errno, "poll"));
  if (n > 0 && (p[1].revents & POLLIN)) hvd__links_event_clear(t->links);
  return 0;
}

/* Makes sure there is a connection to `peer` (-1: none needed). */
static int obtain(struct tcp_transport *t, int peer, uint64_t deadline, uint32_t tag) {
  while (peer >= 0 && t->conns[peer].fd < 0) {
    int fd = -1, how = hvd__links_claim(t->links, peer, &fd);
    if (how == HVD_LINK_TAKEN)
      t->conns[peer].fd = fd;
    else if (how == HVD_LINK_CONNECT)
      HVD__CHECK(dial(t, peer, deadline));
    else
      HVD__CHECK(await_link(t, peer, deadline, tag));
  }
  return 0;
}

int hvd__tcp_connections(hvd_transport *base) {
  struct tcp_transport *t = (struct tcp_transport *)base;
  int n = 0;
  claim_handed(t);
  for (int r = 0; r < t->base.size; r++) n += t->conns[r].fd >= 0;
  return n;
}

/* Checks the peer arguments and connects to the peers first needed; 0 if
 * usable. */
static int check_peers(struct tcp_transport *t, int to, const void *sbuf, size_t slen, int from,
                       const void *rbuf, size_t rlen, uint32_t tag) {
  HVD__CHECK(hvd__check_peer(&t->base, to, sbuf, slen, "destination"));
  HVD__CHECK(hvd__check_peer(&t->base, from, rbuf, rlen, "source"));
  uint64_t deadline = hvd__deadline_in(t->timeout_ms);
  HVD__CHECK(obtain(t, to, deadline, tag));
  return obtain(t, from, deadline, tag);
}

static void half_init(half *h, const struct tcp_transport *t, int peer, void *payload, size_t len) {
  h->peer = peer;
  h->fd = peer >= 0 ? t->conns[peer].fd : -1;
  h->payload = payload;
  h->len = peer >= 0 ? len : 0;
  h->done = 0;
  h->abort = 0;
}

static int tcp_sendrecv(hvd_transport *base, int to, const void *sbuf, size_t slen, int from,
                        void *rbuf, size_t rlen, uint32_t tag) {
  struct tcp_transport *t = (struct tcp_transport *)base;
  half s, r;
  if (t->broken)
    return hvd__err(HVD_E_ABORTED, "the connections to the other ranks broke earlier: %s", t->why);
  if (hvd__alarm_raised(&t->alarm)) return alarmed(t);
  HVD__CHECK(check_peers(t, to, sbuf, slen, from, rbuf, rlen, tag));

  half_init(&s, t, to, (void *)sbuf, slen); /* only ever read from */
  half_init(&r, t, from, rbuf, rlen);
  t->cur_r = &r;
  if (to >= 0)
    hvd__frame_encode(&(hvd_frame){.type = HVD_FRAME_DATA, .tag = tag, .len = slen}, s.hdr);

  uint64_t deadline = hvd__deadline_in(t->timeout_ms);
  int rc;
  uint64_t spin_until = 0; /* while nothing moves: try again until then */
  int yields = 0;
  while (!half_done(&s) || !half_done(&r)) {
    long sent = half_done(&s) ? 0 : send_step(t, &s);
    long got = sent < 0 || half_done(&r) ? 0 : recv_step(t, &r, tag);
    if (sent < 0 || got < 0) {
      rc = (int)(sent < 0 ? sent : got);
      goto mark_cut;
    }
    if (sent + got > 0) {
      /* bytes moved: a sign of life too (live.h), or a long collective
       * whose waits never reach poll() (the yields find the bytes first,
       * as at 256 ranks on 2 cores) looks stuck to this rank's watchers */
      hvd__live_beat();
      deadline = hvd__deadline_in(t->timeout_ms);
      spin_until = 0, yields = 0;
      continue; /* try again before paying for a poll */
    }
    if (t->spin_us == 0 && t->yield_first && yields < SHARED_YIELDS) {
      /* more ranks than cores: the peer we wait for may need this core;
       * give it up, and try again before paying for poll()'s sleep */
      yields++;
      sched_yield();
      continue;
    }
    if (t->spin_us > 0) {
      uint64_t now = hvd__now_us();
      if (spin_until == 0) spin_until = now + (uint64_t)t->spin_us;
      if (now < spin_until) continue;
      spin_until = 0;
    }
    rc = sendrecv_wait(t, &s, &r, deadline);
    if (rc == 0) rc = timed_out(t, &s, &r, tag);
    if (rc == 2) {
      note_cut(t, &s);
      rc = alarmed(t);
    }
    if (rc < 0) goto mark_cut;
  }
  t->cur_r = NULL;
  return 0;

mark_cut:
  note_cut(t, &s);
  t->cur_r = NULL;
  return rc;
}

/* A frame to s's peer stopped half-way: what announce() must finish
 * before its ABORT can follow. */
static void note_cut(struct tcp_transport *t, const half *s) {
  if (s->peer >= 0 && s->done > 0 && !half_done(s))
    t->conns[s->peer].unsent = s->done < HVD_FRAME_HDR_LEN ? SIZE_MAX
                                                           : HVD_FRAME_HDR_LEN + s->len - s->done;
}

/* ================================================================== */
/* abort, destroy                                                      */
/* ================================================================== */

/* header + (i32 lost rank, str reason); returns the frame's length. */
static size_t encode_abort(uint8_t *out, size_t cap, int lost_rank, const char *why) {
  char reason[ABORT_REASON_MAX];
  hvd_writer w = {.buf = out + HVD_FRAME_HDR_LEN, .cap = cap - HVD_FRAME_HDR_LEN};
  snprintf(reason, sizeof reason, "%s", why ? why : "");
  hvd__put_u32(&w, (uint32_t)lost_rank);
  hvd__put_str(&w, reason);
  hvd__frame_encode(&(hvd_frame){.type = HVD_FRAME_ABORT, .len = w.len}, out);
  return HVD_FRAME_HDR_LEN + w.len;
}

/* Completes a frame that an error cut short with zero bytes, so that the
 * peer reads the ABORT behind it instead of a closed connection.  Bounded
 * by the deadline; plain send() and poll() so the caller's error message
 * stays as it is. */
static int pad_cut_frame(tcp_conn *c, uint64_t deadline) {
  static const char zeros[4096];
  if (c->unsent == SIZE_MAX) return -1;
  while (c->unsent > 0) {
    size_t n = c->unsent < sizeof zeros ? c->unsent : sizeof zeros;
    ssize_t k = send(c->fd, zeros, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      c->unsent -= (size_t)k;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    if (poll(&p, 1, hvd__ms_left(deadline)) <= 0) return -1;
  }
  return 0;
}

/* Sends every peer an ABORT naming lost_rank, once: the connected ones
 * now, and through the links (tcp_links.h) those that first connect
 * later, so that they hear why instead of a hang-up they would blame on
 * this rank. */
static void announce(struct tcp_transport *t, int lost_rank, const char *why) {
  uint8_t frame[HVD_FRAME_HDR_LEN + ABORT_PAYLOAD_MAX];
  size_t len = 0;
  if (!t->announced) {
    len = encode_abort(frame, sizeof frame, lost_rank, why);
    hvd__links_abort(t->links, frame, len); /* first: none is handed over after */
  }
  claim_handed(t);
  if (t->announced) return;
  t->announced = 1;
  uint64_t pad_deadline = hvd__deadline_in(ABORT_PAD_MS);
  for (int r = 0; r < t->base.size; r++) {
    tcp_conn *c = &t->conns[r];
    /* Plain send(), not hvd__net_*: an abort must not overwrite the
     * error message the caller is about to report.  A socket with no room
     * right now is skipped: abort never blocks for long. */
    if (c->fd >= 0 && pad_cut_frame(c, pad_deadline) == 0)
      (void)send(c->fd, frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

static void tcp_abort(hvd_transport *base, int lost_rank, const char *why) {
  struct tcp_transport *t = (struct tcp_transport *)base;
  if (lost_rank < 0 && t->broken) lost_rank = t->lost; /* what our own failure found */
  if (lost_rank < 0 && hvd__alarm_raised(&t->alarm)) lost_rank = t->alarm.lost; /* a watchdog's */
  announce(t, lost_rank, why);
  if (!t->broken) {
    t->broken = 1;
    snprintf(t->why, sizeof t->why, "aborted: %s", why ? why : "");
  }
  /* The links stay until tcp_destroy(): a rank that first connects from
   * now on reads the ABORT (announce()), as the connected ones did. */
  for (int r = 0; r < t->base.size; r++) close_conn(&t->conns[r]);
  /* Nothing more to watch for: the peers heard why, and stop watching us */
  hvd__watch_stop(t->watch);
  t->watch = NULL;
}

static void tcp_destroy(hvd_transport *base) {
  struct tcp_transport *t = (struct tcp_transport *)base;
  if (!t) return;
  hvd__watch_stop(t->watch);
  hvd__links_stop(t->links);
  for (int r = 0; r < t->base.size; r++) close_conn(&t->conns[r]);
  for (int i = 0; i < t->nwatch; i++) hvd__net_close(&t->watch_fd[i]);
  hvd__alarm_close(&t->alarm);
  free(t->conns);
  free(t->peers);
  free(t);
}

/* ================================================================== */
/* Finding the rank that is stuck                                      */
/* ================================================================== */

/*
 * Collectives run in lockstep, so a rank that freezes (stopped, swapping,
 * a network cable pulled) stalls its neighbour, which stalls the next, and
 * all of them reach the no-progress deadline at about the same moment,
 * each seeing only the silent rank beside it.  timed_out() therefore
 * announces whom this rank waited on (an ABORT naming it) and blame_stall()
 * listens to every peer for a short grace period for the same report from
 * them.  Following "this rank waited on A, A on B, B on C" leads to the
 * rank that reported nothing: the one that is really stuck.
 */

/* One peer's byte stream while we wait for its report: whatever frame it
 * was in the middle of is skipped, data frames are skipped, an ABORT is
 * read and decoded. */
typedef struct {
  int fd;
  size_t skip;      /* payload bytes of a frame we do not care about */
  size_t got;       /* bytes of the header, or of the ABORT payload */
  size_t abort_len; /* nonzero while reading an ABORT payload */
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  uint8_t buf[ABORT_PAYLOAD_MAX];
  int report;                 /* REPORT_* or the rank this peer waited on */
  char why[ABORT_REASON_MAX]; /* the reason of an ABORT */
} listener;

/* A complete header: an ABORT to read, or a frame to skip. */
static int listener_header(listener *l) {
  hvd_frame f;
  l->got = 0;
  if (hvd__frame_decode(l->hdr, &f) < 0) return -1;
  if (f.type != HVD_FRAME_ABORT) {
    l->skip = f.len > SIZE_MAX ? SIZE_MAX : (size_t)f.len;
    return 0;
  }
  if (f.len == 0 || f.len > sizeof l->buf) return -1;
  l->abort_len = (size_t)f.len;
  return 0;
}

/* The ABORT payload is complete: i32 lost rank, str reason. */
static void listener_report(listener *l, int size) {
  hvd_reader r = {.buf = l->buf, .len = l->abort_len};
  int32_t lost = (int32_t)hvd__get_u32(&r);
  hvd__get_str(&r, l->why, sizeof l->why);
  if (!hvd__reader_done(&r) || lost < -1 || lost >= size)
    l->report = REPORT_GONE;
  else
    l->report = lost >= 0 ? lost : REPORT_ABORTED;
  for (char *c = l->why; *c; c++) /* it goes into our messages verbatim */
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
}

/* Reads what the socket holds now, until a report or end of stream. */
static void listener_step(listener *l, int size) {
  uint8_t sink[4096];
  while (l->report == REPORT_NONE) {
    uint8_t *dst;
    size_t want;
    if (l->skip)
      dst = sink, want = l->skip < sizeof sink ? l->skip : sizeof sink;
    else if (l->abort_len)
      dst = l->buf + l->got, want = l->abort_len - l->got;
    else
      dst = l->hdr + l->got, want = HVD_FRAME_HDR_LEN - l->got;
    ssize_t n = recv(l->fd, dst, want, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
      l->report = REPORT_GONE;
      return;
    }
    if (l->skip) {
      l->skip -= (size_t)n;
    } else if ((l->got += (size_t)n) == (l->abort_len ? l->abort_len : HVD_FRAME_HDR_LEN)) {
      if (l->abort_len)
        listener_report(l, size);
      else if (listener_header(l) < 0)
        l->report = REPORT_GONE;
    }
  }
}

/* Listeners for every peer; the stream of the sendrecv's receiving half
 * (if any) is mid-frame where sendrecv left it. */
static listener *listeners_open(struct tcp_transport *t) {
  const half *r = t->cur_r;
  listener *ls = calloc((size_t)t->base.size, sizeof *ls);
  if (!ls) return NULL;
  for (int p = 0; p < t->base.size; p++) {
    ls[p].fd = t->conns[p].fd;
    ls[p].report = ls[p].fd < 0 ? REPORT_GONE : REPORT_NONE;
  }
  if (r && r->peer >= 0 && !half_done(r) && r->done > 0) {
    listener *l = &ls[r->peer];
    if (r->done < HVD_FRAME_HDR_LEN) {
      memcpy(l->hdr, r->hdr, r->done);
      l->got = r->done;
    } else if (r->abort) {
      memcpy(l->buf, r->abort_buf, r->done - HVD_FRAME_HDR_LEN);
      l->abort_len = r->len;
      l->got = r->done - HVD_FRAME_HDR_LEN;
    } else {
      l->skip = HVD_FRAME_HDR_LEN + r->len - r->done;
    }
  }
  return ls;
}

/* Follows the reports from `start` to a rank that reported nothing (or
 * back to one already seen), writing the path "3 -> 1 -> 7" to `chain` if
 * given. */
static int follow(const listener *ls, int me, int start, int size, char *chain, size_t cap) {
  size_t len = chain ? (size_t)snprintf(chain, cap, "%d", start) : 0;
  int x = start;
  for (int hops = 0; hops < size && ls[x].report >= 0 && ls[x].report != me; hops++) {
    x = ls[x].report;
    if (chain && len < cap) len += (size_t)snprintf(chain + len, cap - len, " -> %d", x);
  }
  return x;
}

/* Waits up to the grace period for the peers' reports, or until the chain
 * ends at a rank that has said all it will: it closed its connection, or
 * it aborted for a reason of its own. */
static void listeners_wait(struct tcp_transport *t, listener *ls, struct pollfd *p, int start) {
  int n = t->base.size, grace = t->timeout_ms / 4;
  uint64_t deadline = hvd__deadline_in(grace < 200 ? 200 : grace > 2000 ? 2000 : grace);
  for (;;) {
    int np = 0;
    for (int i = 0; i < n; i++)
      if (ls[i].report == REPORT_NONE) p[np++] = (struct pollfd){.fd = ls[i].fd, .events = POLLIN};
    int end = follow(ls, t->base.rank, start, n, NULL, 0);
    if (np == 0 || ls[end].report == REPORT_GONE || ls[end].report == REPORT_ABORTED ||
        hvd__ms_left(deadline) == 0)
      return;
    if (poll(p, (nfds_t)np, hvd__ms_left(deadline)) < 0 && errno != EINTR) return;
    for (int i = 0; i < n; i++)
      if (ls[i].report == REPORT_NONE) listener_step(&ls[i], n);
  }
}

/* Listens to every peer's reports, starting from what we know of `start`
 * (REPORT_NONE, or the rank it reported), and concludes which rank is at
 * the end of the chain of waits.  Without memory for the listeners it
 * blames start's report (or start): less precise, never wrong. */
static void blame(struct tcp_transport *t, int start, int start_report, verdict *v) {
  claim_handed(t);
  listener *ls = listeners_open(t);
  struct pollfd *p = calloc((size_t)t->base.size, sizeof *p);
  v->rank = start_report >= 0 ? start_report : start;
  v->aborted = 0;
  snprintf(v->chain, sizeof v->chain, "%d -> %d", start, v->rank);
  if (ls && p) {
    if (start_report >= 0) ls[start].report = start_report;
    listeners_wait(t, ls, p, start);
    v->rank = follow(ls, t->base.rank, start, t->base.size, v->chain, sizeof v->chain);
    v->aborted = ls[v->rank].report == REPORT_ABORTED;
    snprintf(v->why, sizeof v->why, "%s", ls[v->rank].why);
  }
  free(p);
  free(ls);
}
