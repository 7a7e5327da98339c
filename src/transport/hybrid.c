/*
 * hybrid.c -- shared memory within a host, TCP between hosts (hybrid.h).
 *
 * sendrecv looks up the way to each peer.  When both halves go the same
 * way, that transport does the exchange.  When they go different ways (a
 * ring step between hosts: send over TCP to the next host while
 * receiving from a neighbour on this one) neither transport can progress
 * both halves at once, so the message is cut into pieces and the halves
 * alternate: send piece k, then receive piece k.
 *
 * Why that cannot deadlock: a piece is never larger than what its way
 * lets a send leave for the receiver to read later (in_flight).  Take the
 * lowest piece number k at which some rank is stuck.  A rank stuck
 * sending piece k has a receiver that has not read piece k - 1 of it yet,
 * so that receiver is at a lower piece and not stuck: it will read.  A
 * rank stuck receiving piece k has a sender that has not sent it: that
 * sender is at piece k at most, and sending piece k fits, since we read
 * everything before it.  Either way someone moves.
 *
 * Both ends of a pair must cut a message alike, so every message through
 * here is cut by the rule of its way, whatever the other half of the
 * step does: pieces of `piece_bytes(way)`, the last one shorter, one empty
 * piece for an empty message.  Pure steps exchange piece k both ways at
 * once.  Tags are the collective's: pieces of two collectives can still
 * never be confused.
 *
 * Failures: whichever transport fails, abort() tells the peers of both,
 * so a lost rank on another host is news on this host too.
 */
#include "hybrid.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Largest piece: big enough that a piece costs a lot more than the call. */
#define PIECE_MAX (256u * 1024u)

/* A rank of this host: its number in the job and on the host. */
typedef struct {
  int job, host;
} local_rank;

typedef struct {
  hvd_transport base;
  hvd_transport *tcp;  /* every rank, the job's numbers */
  hvd_transport *host; /* this host's ranks, its own numbers; NULL: none */
  int *members;        /* host's rank -> the job's rank */
  local_rank *by_job;  /* the host's ranks by their job numbers: memory for this host's
                          ranks, not the job's (a table of the job's held 4 bytes a rank) */
  int nlocal;
} hybrid;

/* One half of a step: which transport, the peer's number there, the bytes. */
typedef struct {
  hvd_transport *way;
  int peer; /* in way's numbering; -1: no half */
  unsigned char *buf;
  size_t len, piece;
} half;

static int hybrid_sendrecv(hvd_transport *base, int to, const void *sbuf, size_t slen,
                           int from, void *rbuf, size_t rlen, uint32_t tag);
static void hybrid_abort(hvd_transport *base, int lost_rank, const char *why);
static void hybrid_destroy(hvd_transport *base);
static hvd_transport *hybrid_host(hvd_transport *base, const int **members);

static const hvd_transport_ops hybrid_ops = {.name = "shm+tcp",
                                             .sendrecv = hybrid_sendrecv,
                                             .abort = hybrid_abort,
                                             .destroy = hybrid_destroy,
                                             .caps = {.host = hybrid_host}};

static size_t piece_bytes(const hvd_transport *way) {
  return way->in_flight < PIECE_MAX ? way->in_flight : PIECE_MAX;
}

/* The host's number of the job's rank `job`, or -1 when it is not on this host. */
static int local_of(const hybrid *h, int job) {
  int lo = 0, hi = h->nlocal;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (h->by_job[mid].job < job)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < h->nlocal && h->by_job[lo].job == job ? h->by_job[lo].host : -1;
}

static half route(hybrid *h, int peer, const void *buf, size_t len) {
  half x = {h->tcp, peer, (unsigned char *)buf, len, 0};
  int local = peer >= 0 && h->host ? local_of(h, peer) : -1;
  if (local >= 0) x.way = h->host, x.peer = local;
  x.piece = piece_bytes(x.way);
  return x;
}

static size_t pieces(const half *x) {
  return x->peer < 0 ? 0 : x->len == 0 ? 1 : (x->len + x->piece - 1) / x->piece;
}

/* Piece k of x: where it starts and how long it is (-1 peer past the end). */
static int piece(const half *x, size_t k, unsigned char **at, size_t *len) {
  if (k >= pieces(x)) return -1;
  size_t off = k * x->piece;
  *at = x->buf ? x->buf + off : NULL;
  *len = x->len - off < x->piece ? x->len - off : x->piece;
  return x->peer;
}

static int exchange(half *s, half *r, uint32_t tag) {
  size_t n = pieces(s) > pieces(r) ? pieces(s) : pieces(r);
  int same = s->peer < 0 || r->peer < 0 || s->way == r->way;
  for (size_t k = 0; k < n; k++) {
    unsigned char *sp = NULL, *rp = NULL;
    size_t sl = 0, rl = 0;
    int to = piece(s, k, &sp, &sl), from = piece(r, k, &rp, &rl);
    if (same) {
      hvd_transport *way = to >= 0 ? s->way : r->way;
      HVD__CHECK(hvd__sendrecv(way, to, sp, sl, from, rp, rl, tag));
      continue;
    }
    if (to >= 0) HVD__CHECK(hvd__send(s->way, to, sp, sl, tag));
    if (from >= 0) HVD__CHECK(hvd__recv(r->way, from, rp, rl, tag));
  }
  return 0;
}

static int hybrid_sendrecv(hvd_transport *base, int to, const void *sbuf, size_t slen,
                           int from, void *rbuf, size_t rlen, uint32_t tag) {
  hybrid *h = (hybrid *)base;
  HVD__CHECK(hvd__check_peer(base, to, sbuf, slen, "destination"));
  HVD__CHECK(hvd__check_peer(base, from, rbuf, rlen, "source"));
  half s = route(h, to, sbuf, slen), r = route(h, from, rbuf, rlen);
  return exchange(&s, &r, tag);
}

/* Each transport hears of the loss in its own numbers; a rank off this
 * host means nothing to the host's transport, which then only learns why. */
static void hybrid_abort(hvd_transport *base, int lost_rank, const char *why) {
  hybrid *h = (hybrid *)base;
  if (h->host)
    h->host->ops->abort(h->host, lost_rank >= 0 ? local_of(h, lost_rank) : -1, why);
  h->tcp->ops->abort(h->tcp, lost_rank, why);
}

static void hybrid_destroy(hvd_transport *base) {
  hybrid *h = (hybrid *)base;
  if (!h) return;
  if (h->host) h->host->ops->destroy(h->host);
  if (h->tcp) h->tcp->ops->destroy(h->tcp);
  free(h->by_job);
  free(h->members);
  free(h);
}

static hvd_transport *hybrid_host(hvd_transport *base, const int **members) {
  hybrid *h = (hybrid *)base;
  *members = h->members;
  return h->host;
}

static int by_job(const void *a, const void *b) {
  int x = ((const local_rank *)a)->job, y = ((const local_rank *)b)->job;
  return (x > y) - (x < y);
}

int hvd__hybrid_new(hvd_transport *tcp, hvd_transport *host, const int *members,
                    hvd_transport **out) {
  int n = host ? host->size : 0;
  hybrid *h = calloc(1, sizeof *h);
  if (h) {
    h->tcp = tcp;
    h->host = host;
    h->by_job = malloc((size_t)(n ? n : 1) * sizeof *h->by_job);
    h->members = malloc((size_t)(n ? n : 1) * sizeof *h->members);
  }
  if (!h || !h->by_job || !h->members) {
    if (h) hybrid_destroy(&h->base);
    else if (host) host->ops->destroy(host), tcp->ops->destroy(tcp);
    else tcp->ops->destroy(tcp);
    return hvd__err(HVD_E_NOMEM, "hybrid transport: out of memory for %d ranks", n);
  }
  for (int i = 0; i < n; i++) {
    if (members[i] < 0 || members[i] >= tcp->size) {
      hybrid_destroy(&h->base);
      return hvd__err(HVD_E_INVALID, "hybrid transport: member %d is rank %d of %d", i,
                      members[i], tcp->size);
    }
    h->members[i] = members[i];
    h->by_job[i] = (local_rank){members[i], i};
  }
  qsort(h->by_job, (size_t)n, sizeof *h->by_job, by_job);
  h->nlocal = n;
  for (int i = 1; i < n; i++)
    if (h->by_job[i].job == h->by_job[i - 1].job) {
      hybrid_destroy(&h->base);
      return hvd__err(HVD_E_INVALID, "hybrid transport: rank %d is a member twice",
                      h->by_job[i].job);
    }
  h->base = (hvd_transport){.ops = &hybrid_ops, .rank = tcp->rank, .size = tcp->size,
                            .in_flight = tcp->in_flight};
  *out = &h->base;
  return 0;
}
