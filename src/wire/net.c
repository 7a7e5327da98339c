/*
 * net.c -- TCP sockets with deadlines (net.h).
 *
 * Every socket hvd makes is non-blocking, and every wait is a poll() for
 * the time left before the caller's deadline, so nothing here can hang.
 * Sends use MSG_NOSIGNAL so that a peer that went away becomes an error
 * (HVD_E_PEER_LOST), never a SIGPIPE that kills the user's process.  The
 * single-step calls also pass MSG_DONTWAIT, which makes them safe on a
 * blocking socket too (a socketpair() in a test, say).
 */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* Socket buffers we ask for: a ring step keeps a few MiB in flight per
 * connection.  The kernel caps this at net.core.{r,w}mem_max. */
#define NET_BUF_BYTES (4 << 20)

/* Back-off between connection attempts to a peer that is not listening
 * yet: short at first (it is usually a few milliseconds late), then capped
 * so a late peer is still noticed quickly. */
#define CONNECT_BACKOFF_MIN_MS 5
#define CONNECT_BACKOFF_MAX_MS 200

/* "host:port", or "[v6addr]:port", or "fd N" for a socket without an
 * address (a socketpair): the "where" of error messages. */
#define ENDPOINT_MAX 300

static double secs_since(uint64_t start_ms) { return (double)(hvd__now_ms() - start_ms) / 1000.0; }

static void endpoint(char *out, size_t cap, const char *host, int port) {
  if (strchr(host, ':'))
    snprintf(out, cap, "[%s]:%d", host, port);
  else
    snprintf(out, cap, "%s:%d", host, port);
}

/* Numeric address and port of sa.  Returns 0, or -1 for a family without
 * one (AF_UNIX). */
static int sockaddr_to_text(const struct sockaddr *sa, socklen_t len, char addr[HVD_NET_ADDR_MAX],
                            int *port) {
  char serv[NI_MAXSERV];
  if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) return -1;
  if (getnameinfo(sa, len, addr, HVD_NET_ADDR_MAX, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return -1;
  if (port) *port = atoi(serv);
  return 0;
}

/* Where fd leads, for error messages. */
static void describe_peer(int fd, char *out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char addr[HVD_NET_ADDR_MAX];
  int port = 0;
  if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0 &&
      sockaddr_to_text((struct sockaddr *)&ss, len, addr, &port) == 0)
    endpoint(out, cap, addr, port);
  else
    snprintf(out, cap, "fd %d", fd);
}

/* Waits until fd is ready for `events` or the deadline passes.  1: ready
 * (or in error: the next I/O call will say which), 0: deadline, <0 error. */
static int wait_fd(int fd, short events, uint64_t deadline) {
  struct pollfd p = {.fd = fd, .events = events};
  for (;;) {
    int n = poll(&p, 1, hvd__ms_left(deadline));
    if (n > 0) return 1;
    if (n == 0) {
      if (hvd__ms_left(deadline) == 0) return 0;
      continue; /* poll rounds to milliseconds: it may return early */
    }
    if (errno != EINTR) return hvd__err_sys(HVD_E_SYSTEM, errno, "poll");
  }
}

/* An I/O errno after which the connection is gone for good. */
static int errno_is_peer_loss(int e) {
  return e == EPIPE || e == ECONNRESET || e == ECONNABORTED || e == ETIMEDOUT ||
         e == EHOSTUNREACH || e == ENETUNREACH || e == ENETDOWN || e == ENOTCONN;
}

static long io_error(int e, const char *what) {
  if (e == EPIPE) /* "Broken pipe" means nothing to a user */
    return hvd__err(HVD_E_PEER_LOST, "connection closed by peer");
  if (errno_is_peer_loss(e)) return hvd__err(HVD_E_PEER_LOST, "%s", strerror(e));
  return hvd__err_sys(HVD_E_SYSTEM, e, "%s", what);
}

/* Large buffers, best effort: a smaller cap only costs bandwidth.  Set
 * before connect()/listen() so the TCP window scale is chosen for them. */
static void set_buffers(int fd) {
  int size = NET_BUF_BYTES;
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

int hvd__net_tune(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return hvd__err_sys(HVD_E_SYSTEM, errno, "fcntl(O_NONBLOCK) on fd %d", fd);
  /* Small frames (headers, control messages) must not wait for Nagle. */
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 && errno != EOPNOTSUPP &&
      errno != ENOPROTOOPT) /* not TCP: nothing to tune */
    return hvd__err_sys(HVD_E_SYSTEM, errno, "setsockopt(TCP_NODELAY) on fd %d", fd);
  set_buffers(fd);
  return 0;
}

void hvd__net_close(int *fd) {
  if (*fd >= 0) close(*fd); /* no retry on EINTR: Linux frees the fd anyway */
  *fd = -1;
}

void hvd__net_wake(int fd) {
  uint64_t one = 1;
  if (fd < 0) return;
  while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

/* ---- listen ---- */

static int listen_on(const struct addrinfo *ai, int *fd) {
  int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (s < 0) return -1;
  int one = 1, zero = 0;
  (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ai->ai_family == AF_INET6) /* "::" takes IPv4 peers too */
    (void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  set_buffers(s); /* accepted sockets inherit them */
  if (bind(s, ai->ai_addr, ai->ai_addrlen) < 0 || listen(s, SOMAXCONN) < 0) {
    int e = errno;
    close(s);
    errno = e;
    return -1;
  }
  *fd = s;
  return 0;
}

/* Tries every address `addr` resolves to in `family`.  0 or errno. */
static int listen_family(const char *addr, const char *service, int family, int *fd,
                         const char **gai_error) {
  struct addrinfo hints = {.ai_family = family,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res;
  int rc = getaddrinfo(addr, service, &hints, &res);
  if (rc != 0) {
    *gai_error = gai_strerror(rc);
    return EADDRNOTAVAIL;
  }
  int err = EADDRNOTAVAIL;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    if (listen_on(ai, fd) == 0) {
      err = 0;
      break;
    }
    err = errno;
  }
  freeaddrinfo(res);
  return err;
}

int hvd__net_listen(const char *addr, int port, int *fd, int *port_out) {
  char where[ENDPOINT_MAX], service[16];
  const char *gai_error = NULL;
  *fd = -1;
  endpoint(where, sizeof where, addr ? addr : "*", port);
  if (port < 0 || port > 65535)
    return hvd__err(HVD_E_INVALID, "listen on %s: port out of range", where);
  snprintf(service, sizeof service, "%d", port);

  /* Any address: prefer the dual-stack "::", fall back to 0.0.0.0 where
   * IPv6 is off. */
  int err = addr ? listen_family(addr, service, AF_UNSPEC, fd, &gai_error)
                 : listen_family(NULL, service, AF_INET6, fd, &gai_error);
  if (err && !addr) err = listen_family(NULL, service, AF_INET, fd, &gai_error);
  if (err && gai_error) return hvd__err(HVD_E_SYSTEM, "listen on %s: %s", where, gai_error);
  if (err) return hvd__err_sys(HVD_E_SYSTEM, err, "listen on %s", where);

  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char local[HVD_NET_ADDR_MAX];
  if (getsockname(*fd, (struct sockaddr *)&ss, &len) < 0 ||
      sockaddr_to_text((struct sockaddr *)&ss, len, local, port_out) < 0) {
    hvd__net_close(fd);
    return hvd__err(HVD_E_SYSTEM, "listen on %s: cannot read back the bound port", where);
  }
  return 0;
}

/* ---- connect ---- */

/* Errors worth another try: the peer is not listening yet, or the network
 * is not quite up yet.  Anything else will not get better. */
static int connect_retryable(int e) {
  return e == ECONNREFUSED || e == ECONNRESET || e == ETIMEDOUT || e == EHOSTUNREACH ||
         e == ENETUNREACH || e == EAGAIN || e == EADDRNOTAVAIL;
}

/* One attempt at one address.  0 with *fd set, or an errno (ETIMEDOUT
 * when the deadline passed first). */
static int connect_once(const struct addrinfo *ai, uint64_t deadline, int *fd) {
  int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (s < 0) return errno;
  int err = 0;
  set_buffers(s);
  if (connect(s, ai->ai_addr, ai->ai_addrlen) < 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) { /* EINTR: it goes on anyway */
      socklen_t len = sizeof err;
      int ready = wait_fd(s, POLLOUT, deadline);
      if (ready == 0)
        err = ETIMEDOUT;
      else if (ready < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno ? errno : EIO;
    }
  }
  if (err) {
    close(s);
    return err;
  }
  *fd = s;
  return 0;
}

/* refused_final: a refused connection is an answer (HVD_E_PEER_LOST), not
 * a peer that has yet to listen. */
static int connect_loop(const char *host, int port, uint64_t deadline, int refused_final, int *fd) {
  char where[ENDPOINT_MAX], service[16];
  *fd = -1;
  endpoint(where, sizeof where, host, port);
  if (port <= 0 || port > 65535)
    return hvd__err(HVD_E_INVALID, "connect to %s: port out of range", where);
  snprintf(service, sizeof service, "%d", port);

  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0)
    return hvd__err(HVD_E_SYSTEM, "connect to %s: cannot resolve: %s", where,
                    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));

  /* Every address gets a try each round: "localhost" may name ::1 where
   * nobody listens and 127.0.0.1 where the peer does. */
  uint64_t start = hvd__now_ms();
  int backoff = CONNECT_BACKOFF_MIN_MS, err = 0;
  for (;;) {
    int retry_err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      err = connect_once(ai, deadline, fd);
      if (err == 0) {
        rc = hvd__net_tune(*fd);
        if (rc < 0) hvd__net_close(fd);
        goto free_res;
      }
      if (connect_retryable(err) && !(refused_final && err == ECONNREFUSED)) retry_err = err;
    }
    if (!retry_err && refused_final && err == ECONNREFUSED) {
      rc = hvd__err(HVD_E_PEER_LOST, "connect to %s: refused (nothing listens there any more)",
                    where);
      goto free_res;
    }
    if (!retry_err) { /* nothing that waiting would fix */
      rc = hvd__err_sys(HVD_E_SYSTEM, err, "connect to %s", where);
      goto free_res;
    }
    err = retry_err;
    int left = hvd__ms_left(deadline);
    if (left == 0) break;
    poll(NULL, 0, backoff < left ? backoff : left);
    backoff = backoff * 2 < CONNECT_BACKOFF_MAX_MS ? backoff * 2 : CONNECT_BACKOFF_MAX_MS;
  }
  rc = hvd__err(HVD_E_TIMEOUT, "connect to %s: %s (retried for %.1f s)", where,
                err == ETIMEDOUT ? "timed out" : strerror(err), secs_since(start));
free_res:
  freeaddrinfo(res);
  return rc;
}

int hvd__net_connect(const char *host, int port, uint64_t deadline, int *fd) {
  return connect_loop(host, port, deadline, 0, fd);
}

int hvd__net_connect_listening(const char *host, int port, uint64_t deadline, int *fd) {
  return connect_loop(host, port, deadline, 1, fd);
}

/* ---- accept ---- */

int hvd__net_accept(int listen_fd, uint64_t deadline, int *fd, char peer_addr[HVD_NET_ADDR_MAX]) {
  uint64_t start = hvd__now_ms();
  *fd = -1;
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int s = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0) {
      int rc = hvd__net_tune(s);
      if (rc < 0) {
        close(s);
        return rc;
      }
      if (peer_addr && sockaddr_to_text((struct sockaddr *)&ss, len, peer_addr, NULL) < 0)
        snprintf(peer_addr, HVD_NET_ADDR_MAX, "?");
      *fd = s;
      return 0;
    }
    int e = errno;
    /* A connection that died in the queue, or (Linux) a network error
     * pending on it: the listening socket itself is fine. */
    if (e == EINTR || e == ECONNABORTED || e == EPROTO || errno_is_peer_loss(e) ||
        e == ENOPROTOOPT || e == EHOSTDOWN || e == ENONET || e == EOPNOTSUPP)
      continue;
    if (e != EAGAIN && e != EWOULDBLOCK)
      return hvd__err_sys(HVD_E_SYSTEM, e, "accept on fd %d", listen_fd);
    int ready = wait_fd(listen_fd, POLLIN, deadline);
    if (ready < 0) return ready;
    if (ready == 0)
      return hvd__err(HVD_E_TIMEOUT, "accept on fd %d: nobody connected within %.1f s", listen_fd,
                      secs_since(start));
  }
}

/* ---- single steps ---- */

long hvd__net_writev_some(int fd, const struct iovec *iov, int iovcnt) {
  /* sendmsg() only reads the iovecs; msghdr just lacks the const. */
  struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
  for (;;) {
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return (long)n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return io_error(errno, "send");
  }
}

/* recv() for one buffer (the kernel's single-buffer path, as before
 * recvmsg came in), recvmsg() for an iovec. */
static long read_some(int fd, void *buf, size_t len, struct msghdr *m) {
  if (len == 0) return 0; /* recv() would return 0, which reads as end-of-stream */
  for (;;) {
    ssize_t n = m ? recvmsg(fd, m, MSG_DONTWAIT) : recv(fd, buf, len, MSG_DONTWAIT);
    if (n > 0) return (long)n;
    if (n == 0) return hvd__err(HVD_E_PEER_LOST, "connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return io_error(errno, "recv");
  }
}

long hvd__net_readv_some(int fd, struct iovec *iov, int iovcnt) {
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
  size_t want = 0;
  for (int i = 0; i < iovcnt; i++) want += iov[i].iov_len;
  return read_some(fd, NULL, want, &m);
}

long hvd__net_read_some(int fd, void *buf, size_t len) { return read_some(fd, buf, len, NULL); }

/* ---- whole buffers ---- */

/* write_all and read_all: one loop, `out` picks the direction. */
static int move_all(int fd, uint8_t *buf, size_t len, uint64_t deadline, int out) {
  uint64_t start = hvd__now_ms();
  size_t done = 0;
  char where[ENDPOINT_MAX];
  while (done < len) {
    struct iovec iov = {.iov_base = buf + done, .iov_len = len - done};
    long n = out ? hvd__net_writev_some(fd, &iov, 1)
                 : hvd__net_read_some(fd, buf + done, len - done);
    if (n < 0) {
      describe_peer(fd, where, sizeof where);
      return hvd__err_prefix((int)n, "%s %s", out ? "write to" : "read from", where);
    }
    done += (size_t)n;
    if (n > 0) continue;
    int ready = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
    if (ready < 0) return ready;
    if (ready == 0) {
      describe_peer(fd, where, sizeof where);
      return hvd__err(HVD_E_TIMEOUT, "%s %s: timed out after %.1f s (%zu of %zu bytes %s)",
                      out ? "write to" : "read from", where, secs_since(start), done, len,
                      out ? "sent" : "received");
    }
  }
  return 0;
}

int hvd__net_write_all(int fd, const void *buf, size_t len, uint64_t deadline) {
  return move_all(fd, (uint8_t *)buf, len, deadline, 1); /* only read from */
}

int hvd__net_read_all(int fd, void *buf, size_t len, uint64_t deadline) {
  return move_all(fd, buf, len, deadline, 0);
}

int hvd__net_local_addr(int fd, char addr[HVD_NET_ADDR_MAX]) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
    return hvd__err_sys(HVD_E_SYSTEM, errno, "getsockname on fd %d", fd);
  if (sockaddr_to_text((struct sockaddr *)&ss, len, addr, NULL) < 0)
    return hvd__err(HVD_E_SYSTEM, "fd %d is not an IPv4/IPv6 socket", fd);
  return 0;
}
