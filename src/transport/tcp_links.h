/*
 * tcp_links.h -- the TCP transport's connections, made on first use
 * (tcp.c), and the thread that accepts them (tcp_links.c).
 *
 * A rank connects to a peer the first time a sendrecv needs it, to send
 * or to receive, and the peer's links thread accepts and authenticates
 * the connection whatever the peer's own thread is doing: so a send of
 * at most in_flight bytes completes though its receiver has not entered
 * the transport, as with a full mesh.  The accepted connection waits in
 * the links, handed over, until the peer's transport claims it.
 *
 * One connection per pair.  When both ends connect at once, the lower
 * rank's connection wins, decided without a further round trip: after its
 * proof (auth.h) the acceptor sends one byte, ACCEPT, or REFUSE when it
 * holds a connection to that peer already or is connecting to it as the
 * lower rank.  The connector that is refused closes its own and waits
 * for the other, which is already on its way: its acceptor took it, or
 * will, since it never refuses the lower rank's connection while only
 * connecting itself.  Which one survives is decided at each end under
 * the links' lock, with the same rule, so both ends agree.
 */
#ifndef HVD_TCP_LINKS_H
#define HVD_TCP_LINKS_H

#include "wire/auth.h"

#define HVD_LINK_ACCEPT 'A'
#define HVD_LINK_REFUSE 'R'
/* What a data connection's authentication proves. */
#define HVD_LINK_PURPOSE "data"

typedef struct hvd_links hvd_links;

typedef struct {
  int rank, size;
  hvd_secret key;
  int listen_fd;         /* the links' from here, even when starting fails */
  int nwatch;            /* watch connections (watch.h) this rank accepts */
  const int *watch_peer; /* [nwatch]: the rank that makes each */
} hvd_links_config;

/* Starts the thread that accepts on cfg->listen_fd. */
int hvd__links_start(const hvd_links_config *cfg, hvd_links **out);

/* Stops the thread, closes the listening socket (a rank that connects
 * from now on is refused: it learns this rank has gone) and every
 * connection not claimed.  NULL is fine. */
void hvd__links_stop(hvd_links *l);

/* The most bytes of an ABORT frame the links pass on. */
#define HVD_LINKS_ABORT_MAX 1024

/* The transport aborted with `frame` (an ABORT frame, header included,
 * len <= HVD_LINKS_ABORT_MAX): from now on the links send the frame after
 * an ACCEPT (decided by the rule above, as before), so a rank that first
 * connects after the abort reads why, as the connected ones do, rather
 * than a hang-up it would blame on this rank; one refused claims the
 * connection this rank made, which carries the ABORT already.  A
 * connection accepted before but not yet handed gets the frame too.
 * Until hvd__links_stop() no connection is handed over; those told are
 * kept open until then, so the frame is not lost to a reset. */
void hvd__links_abort(hvd_links *l, const void *frame, size_t len);

/* Readable when a connection was handed over (or one on its way was
 * dropped): the transport's thread then claims again.  Read to clear. */
int hvd__links_event_fd(const hvd_links *l);
void hvd__links_event_clear(hvd_links *l);

/* What claim() says the caller should do about a peer it has no
 * connection to. */
enum {
  HVD_LINK_TAKEN,   /* *fd is the peer's connection, the caller's from now */
  HVD_LINK_CONNECT, /* connect, then say how it went (connected()) */
  HVD_LINK_WAIT     /* the peer's connection is on its way: wait for the event */
};
int hvd__links_claim(hvd_links *l, int peer, int *fd);

/* How the caller's connect to `peer` went: 1 accepted (the caller keeps
 * it), 0 refused (the peer's connection wins), -1 failed.  -1 when an
 * accepted one meets the peer's accepted here too (never, by the rule). */
int hvd__links_connected(hvd_links *l, int peer, int outcome);

/* Hands every connection accepted but not claimed to put(arg, peer, fd):
 * before an abort, so that it reaches them too. */
void hvd__links_claim_all(hvd_links *l, void (*put)(void *arg, int peer, int fd), void *arg);

/* Watch connection i of cfg->watch_peer: 1 and *fd when it has arrived. */
int hvd__links_claim_watch(hvd_links *l, int i, int *fd);

#endif /* HVD_TCP_LINKS_H */
