/*
 * net.h -- the few socket operations hvd needs, each with a deadline.
 *
 * Sockets are kept non-blocking and every wait goes through poll() with
 * the time left, so no call here can block past its deadline: that is how
 * hvd keeps its "never hang silently" rule at the lowest layer.  Failures
 * set the thread's error message (common.h) and return HVD_E_*:
 * HVD_E_TIMEOUT when the deadline passed, HVD_E_PEER_LOST when the peer
 * closed or reset the connection, HVD_E_SYSTEM for anything else.
 */
#ifndef HVD_NET_H
#define HVD_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define HVD_NET_ADDR_MAX 64 /* fits any numeric IPv4/IPv6 address string */

/* Where a peer listens. */
typedef struct {
  char addr[HVD_NET_ADDR_MAX];
  int port;
} hvd_peer_addr;

/* Opens a TCP listening socket on `addr` ("0.0.0.0", "127.0.0.1", ...;
 * NULL means any) and `port` (0: the kernel picks).  On success *fd is the
 * non-blocking socket and *port_out its port. */
int hvd__net_listen(const char *addr, int port, int *fd, int *port_out);

/* Connects to host:port (a numeric address or a name), retrying while the
 * peer is not listening yet, until the deadline.  *fd is non-blocking,
 * TCP_NODELAY, with large buffers. */
int hvd__net_connect(const char *host, int port, uint64_t deadline, int *fd);

/* The same, to a peer known to have listened there (a rank whose address
 * came from the rendezvous): a refusal means it has gone, and fails at
 * once with HVD_E_PEER_LOST instead of being retried. */
int hvd__net_connect_listening(const char *host, int port, uint64_t deadline, int *fd);

/* Accepts one connection before the deadline; *fd as for connect.  When
 * peer_addr is not NULL it receives the peer's numeric address. */
int hvd__net_accept(int listen_fd, uint64_t deadline, int *fd, char peer_addr[HVD_NET_ADDR_MAX]);

/* Writes/reads exactly len bytes before the deadline. */
int hvd__net_write_all(int fd, const void *buf, size_t len, uint64_t deadline);
int hvd__net_read_all(int fd, void *buf, size_t len, uint64_t deadline);

/* Non-blocking single steps for event loops: write or read as much as the
 * socket takes now.  Return the byte count (>= 0; 0 when it would block),
 * or HVD_E_PEER_LOST / HVD_E_SYSTEM.  A read that sees end-of-stream
 * returns HVD_E_PEER_LOST. */
long hvd__net_writev_some(int fd, const struct iovec *iov, int iovcnt);
long hvd__net_read_some(int fd, void *buf, size_t len);
long hvd__net_readv_some(int fd, struct iovec *iov, int iovcnt);

/* The numeric address of this end of a connected socket (the local
 * interface that reaches the peer). */
int hvd__net_local_addr(int fd, char addr[HVD_NET_ADDR_MAX]);

/* Sets O_NONBLOCK, TCP_NODELAY and large send/receive buffers. */
int hvd__net_tune(int fd);

/* Closes fd if >= 0 and sets it to -1. */
void hvd__net_close(int *fd);

/* Adds one to an eventfd (if fd >= 0), again when a signal interrupted
 * the write: a wake that is lost leaves a thread in poll() until its
 * next timeout, which a peer can take for a rank that stopped. */
void hvd__net_wake(int fd);

#endif /* HVD_NET_H */
