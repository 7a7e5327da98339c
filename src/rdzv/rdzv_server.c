/*
 * rdzv_server.c -- the rendezvous service, as a state machine per
 * connection (see rdzv_server.h and rdzv/rdzv.h for the protocol).
 *
 *   AUTH      challenge sent; waiting for the connector's RESPONSE
 *   HEADER    proof sent; waiting for the REGISTER frame's header
 *   BODY      waiting for the REGISTER payload
 *   WAITING   registered; waiting for the other ranks (EOF = rank gone)
 *   REPLY     sending the TABLE or an ERROR, then closing
 *   JOINED    elastic: a worker joined; waiting to be placed (EOF = gone)
 *   CONTROL   elastic: placed; kept open for NOTICEs (EOF = it left)
 *
 * The elastic states are rdzv_server_elastic.c's, a layer over this file:
 * it replaces how a newcomer is admitted (s->admit: the frame expected,
 * what to do with it, a joined worker gone).
 * A connection is strictly half duplex: while it has bytes to send it is
 * polled for POLLOUT only, otherwise for POLLIN, and it reads exactly the
 * bytes of the message it waits for.  Nothing is trusted before the HMAC
 * handshake succeeds; a stranger is only ever dropped, never answered.
 * An authenticated rank whose registration is wrong (bad size, duplicate)
 * gets an ERROR frame saying why.
 *
 * Dropping a connection only marks it DEAD; sweep() frees the dead ones at
 * the end of a dispatch, so no pointer taken by prepare() dangles.
 */
#include "rdzv_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "rdzv_server_int.h"

#define ACCEPT_PAUSE_MS 100 /* after running out of descriptors */
#define STRANGERS_MAX 64   /* pending connections beyond the ranks' own */

void hvd__rdzv_say(const hvd_rdzv_server *s, const char *fmt, ...) {
  if (!s->verbose) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  s->log(s->log_arg, msg);
}

/* ---- blobs ---- */

blob *hvd__rdzv_blob_new(size_t len) {
  blob *b = malloc(sizeof *b + len);
  if (!b) return NULL;
  b->refs = 1;
  b->len = len;
  return b;
}

void hvd__rdzv_blob_unref(blob *b) {
  if (b && --b->refs == 0) free(b);
}

/* A frame with room for `len` payload bytes after the header. */
blob *hvd__rdzv_frame_new(uint8_t type, size_t len) {
  blob *b = hvd__rdzv_blob_new(HVD_FRAME_HDR_LEN + len);
  if (!b) return NULL;
  hvd_frame f = {type, 0, len};
  hvd__frame_encode(&f, b->data);
  return b;
}

/* ---- connection life ---- */

void hvd__rdzv_conn_send(conn *c, blob *b) {
  c->out = b;
  c->out_off = 0;
}

/* Waits for a new message of `need` bytes. */
static void conn_expect(conn *c, conn_state state, size_t need) {
  c->state = state;
  c->in_len = 0;
  c->in_need = need;
}

static void unregister(hvd_rdzv_server *s, conn *c) {
  if (c->state != C_WAITING || s->waiting[c->rank] != c) return;
  s->waiting[c->rank] = NULL;
  s->nwaiting--;
}

/* Closes c for `why` (printed under --verbose). */
void hvd__rdzv_conn_drop(hvd_rdzv_server *s, conn *c, const char *why) {
  if (c->state == C_DEAD) return;
  if (why) hvd__rdzv_say(s, "dropped %s: %s", c->peer, why);
  unregister(s, c);
  if (s->admit->dropped) s->admit->dropped(s, c);
  hvd__rdzv_blob_unref(c->next);
  c->next = NULL;
  hvd__rdzv_blob_unref(c->out);
  c->out = NULL;
  hvd__net_close(&c->fd);
  c->state = C_DEAD;
}

/* Answers an authenticated rank with an ERROR frame, then closes.  Always
 * printed: the job is misconfigured, and this says how. */
void hvd__rdzv_conn_refuse(hvd_rdzv_server *s, conn *c, const char *reason) {
  char line[1024];
  snprintf(line, sizeof line, "refused %s %u (%s): %s", s->admit->member, c->rank, c->peer,
           reason);
  s->log(s->log_arg, line);
  unregister(s, c); /* the owner refuses it: no need to tell it the worker left */
  char text[400]; /* the client takes reasons up to 511 bytes */
  uint8_t payload[2 + sizeof text];
  snprintf(text, sizeof text, "%s", reason);
  int len = hvd__rdzv_encode_error(text, payload, sizeof payload);
  blob *b = len < 0 ? NULL : hvd__rdzv_frame_new(HVD_FRAME_RDZV_ERROR, (size_t)len);
  if (!b) {
    hvd__rdzv_conn_drop(s, c, "out of memory for the ERROR frame");
    return;
  }
  memcpy(b->data + HVD_FRAME_HDR_LEN, payload, (size_t)len);
  hvd__rdzv_conn_send(c, b);
  c->state = C_REPLY;
  c->deadline = hvd__deadline_in(REPLY_MS);
}

static void sweep(hvd_rdzv_server *s) {
  size_t kept = 0;
  for (size_t i = 0; i < s->nconns; i++) {
    if (s->conns[i]->state == C_DEAD)
      free(s->conns[i]);
    else
      s->conns[kept++] = s->conns[i];
  }
  s->nconns = kept;
  s->npolled = 0; /* the snapshot may hold freed connections now */
}

/* ---- the round: everyone registered ---- */

static blob *table_frame(hvd_rdzv_server *s) {
  size_t cap = 4 + (size_t)s->size * HVD_RDZV_BODY_MAX;
  if (cap > HVD_FRAME_CONTROL_MAX) cap = HVD_FRAME_CONTROL_MAX;
  blob *b = hvd__rdzv_frame_new(HVD_FRAME_RDZV_TABLE, cap);
  if (!b) return NULL;
  int len = hvd__rdzv_encode_table(s->entries, s->size, b->data + HVD_FRAME_HDR_LEN, cap);
  if (len < 0) {
    hvd__rdzv_blob_unref(b);
    return NULL;
  }
  hvd_frame f = {HVD_FRAME_RDZV_TABLE, 0, (uint64_t)len};
  hvd__frame_encode(&f, b->data);
  b->len = HVD_FRAME_HDR_LEN + (size_t)len;
  return b;
}

static void complete_round(hvd_rdzv_server *s) {
  blob *table = table_frame(s);
  char reason[512];
  if (!table) snprintf(reason, sizeof reason, "cannot build the table: %s", hvd_last_error());
  for (uint32_t r = 0; r < s->size; r++) {
    conn *c = s->waiting[r];
    if (!table) {
      hvd__rdzv_conn_refuse(s, c, reason);
      continue;
    }
    table->refs++;
    hvd__rdzv_conn_send(c, table);
    c->state = C_REPLY;
    c->deadline = hvd__deadline_in(REPLY_MS);
    s->waiting[r] = NULL;
  }
  s->nwaiting = 0;
  s->rounds++;
  hvd__rdzv_blob_unref(table);
  if (table) hvd__rdzv_say(s, "all %u ranks registered; sent them the table", s->size);
}

/* ---- messages ---- */

static void on_response(hvd_rdzv_server *s, conn *c) {
  blob *proof = hvd__rdzv_blob_new(HVD_AUTH_PROOF_LEN);
  if (!proof) {
    hvd__rdzv_conn_drop(s, c, "out of memory");
    return;
  }
  int rc = hvd__auth_verify_response(&s->key, HVD_RDZV_PURPOSE, HVD_RDZV_SERVER_ID, c->in,
                                     &c->auth, proof->data);
  if (rc < 0) {
    hvd__rdzv_blob_unref(proof);
    hvd__rdzv_conn_drop(s, c, hvd_last_error());
    return;
  }
  c->rank = c->auth.id_c;
  hvd__rdzv_conn_send(c, proof);
  conn_expect(c, C_HEADER, HVD_FRAME_HDR_LEN);
}

static void on_header(hvd_rdzv_server *s, conn *c) {
  hvd_frame f;
  char reason[256];
  int want = s->admit->frame;
  size_t max = s->admit->max;
  const char *name = s->admit->name;
  if (hvd__frame_decode(c->in, &f) < 0) {
    hvd__rdzv_conn_refuse(s, c, hvd_last_error());
  } else if (f.type != want || f.tag != 0) {
    snprintf(reason, sizeof reason, "expected a %s frame with tag 0, got type %u tag %u", name,
             f.type, f.tag);
    hvd__rdzv_conn_refuse(s, c, reason);
  } else if (f.len == 0 || f.len > max) {
    snprintf(reason, sizeof reason, "%s payload of %llu bytes (at most %zu)", name,
             (unsigned long long)f.len, max);
    hvd__rdzv_conn_refuse(s, c, reason);
  } else { /* the payload follows the header in c->in */
    c->state = C_BODY;
    c->in_need = HVD_FRAME_HDR_LEN + (size_t)f.len;
  }
}

/* Why entry e from connection c cannot join this round, or NULL. */
static const char *registration_error(hvd_rdzv_server *s, const conn *c, const hvd_rdzv_entry *e,
                                      char *buf, size_t cap) {
  if (e->rank != c->rank)
    snprintf(buf, cap, "registered as rank %u but authenticated as rank %u", e->rank, c->rank);
  else if (e->size != s->size)
    snprintf(buf, cap, "rank %u says the job has %u ranks; %s expects %u", e->rank, e->size,
             s->who, s->size);
  else if (s->waiting[e->rank])
    snprintf(buf, cap, "rank %u is already registered (from %s)", e->rank,
             s->waiting[e->rank]->peer);
  else
    return NULL;
  return buf;
}

static void on_register(hvd_rdzv_server *s, conn *c) {
  hvd_rdzv_entry e;
  char buf[256];
  const char *why = NULL;
  if (hvd__rdzv_decode_register(c->in + HVD_FRAME_HDR_LEN, c->in_need - HVD_FRAME_HDR_LEN,
                                &e) < 0)
    why = hvd_last_error();
  else
    why = registration_error(s, c, &e, buf, sizeof buf);
  if (why) {
    hvd__rdzv_conn_refuse(s, c, why);
    return;
  }
  s->entries[e.rank] = e;
  s->waiting[e.rank] = c;
  s->nwaiting++;
  c->state = C_WAITING;
  c->deadline = HVD__NEVER; /* the rank's own start timeout bounds the wait */
  hvd__rdzv_say(s, "rank %u registered (host %s, listens on %s:%d via %s); %u of %u", e.rank, e.hostname,
      e.listen.addr, e.listen.port, e.iface[0] ? e.iface : "?", s->nwaiting, s->size);
  if (s->nwaiting == s->size) complete_round(s);
}

static const hvd_rdzv_admission registration = {
    HVD_FRAME_RDZV_REGISTER, HVD_RDZV_REGISTER_MAX, "REGISTER", "rank", on_register, NULL};

static void on_message(hvd_rdzv_server *s, conn *c) {
  switch (c->state) {
    case C_AUTH: on_response(s, c); break;
    case C_HEADER: on_header(s, c); break;
    case C_BODY: s->admit->arrived(s, c); break;
    default: hvd__rdzv_conn_drop(s, c, "unexpected state"); break;
  }
}

/* ---- I/O ---- */

static void on_writable(hvd_rdzv_server *s, conn *c) {
  struct iovec iov = {c->out->data + c->out_off, c->out->len - c->out_off};
  long n = hvd__net_writev_some(c->fd, &iov, 1);
  if (n < 0) {
    hvd__rdzv_conn_drop(s, c, hvd_last_error());
    return;
  }
  c->out_off += (size_t)n;
  if (c->out_off < c->out->len) return;
  hvd__rdzv_blob_unref(c->out);
  c->out = NULL;
  if (c->state == C_REPLY) hvd__rdzv_conn_drop(s, c, NULL); /* the reply was the last word */
  if (c->next) { /* a NOTICE queued behind the last message */
    hvd__rdzv_conn_send(c, c->next);
    c->next = NULL;
  }
}

static void on_readable(hvd_rdzv_server *s, conn *c) {
  if (c->state >= C_WAITING) { /* a registered peer says nothing more: EOF or garbage */
    uint8_t byte;
    long n = hvd__net_read_some(c->fd, &byte, 1);
    if (n == 0) return; /* EAGAIN */
    hvd__rdzv_conn_drop(s, c, n > 0 ? "data after its registration"
                              : c->state == C_CONTROL ? NULL /* it left the job: normal */
                                                      : "left before its reply");
    return;
  }
  long n = hvd__net_read_some(c->fd, c->in + c->in_len, c->in_need - c->in_len);
  if (n < 0) {
    hvd__rdzv_conn_drop(s, c, hvd_last_error());
    return;
  }
  c->in_len += (size_t)n;
  if (c->in_len == c->in_need) on_message(s, c);
}

/* ---- accepting ---- */

/* Frees a slot for a new connection by dropping the oldest one that has
 * not registered.  Registered and replying connections number at most
 * 2*size, so with 2*size + STRANGERS_MAX slots there is always one. */
static int make_room(hvd_rdzv_server *s) {
  conn *oldest = NULL;
  if (s->nconns < s->max_conns) return 0;
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->state <= C_BODY && (!oldest || c->serial < oldest->serial)) oldest = c;
  }
  if (!oldest) return -1;
  hvd__rdzv_conn_drop(s, oldest, "too many pending connections; this one is the oldest");
  sweep(s);
  return 0;
}

static void peer_name(int fd, char *out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char addr[HVD_NET_ADDR_MAX] = "?";
  int port = 0;
  if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      struct sockaddr_in *in = (struct sockaddr_in *)&ss;
      inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
      port = ntohs(in->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
      inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
      port = ntohs(in6->sin6_port);
    }
  }
  snprintf(out, cap, "%s:%d", addr, port);
}

static void add_conn(hvd_rdzv_server *s, int fd) {
  const char *why = "out of memory";
  conn *c = calloc(1, sizeof *c);
  blob *challenge = hvd__rdzv_blob_new(HVD_AUTH_CHALLENGE_LEN);
  if (!c || !challenge) goto refuse;
  why = "no free slot";
  if (make_room(s) < 0) goto refuse;
  if (hvd__auth_challenge(&c->auth, challenge->data) < 0) {
    why = hvd_last_error();
    goto refuse;
  }
  c->fd = fd;
  c->serial = s->serial++;
  c->deadline = hvd__deadline_in(HANDSHAKE_MS);
  peer_name(fd, c->peer, sizeof c->peer);
  hvd__rdzv_conn_send(c, challenge);
  conn_expect(c, C_AUTH, HVD_AUTH_RESPONSE_LEN);
  s->conns[s->nconns++] = c;
  return;
refuse:
  hvd__rdzv_say(s, "refused a connection: %s", why);
  free(c);
  hvd__rdzv_blob_unref(challenge);
  close(fd);
}

static void accept_all(hvd_rdzv_server *s, int listen_fd) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      add_conn(s, fd);
      continue;
    }
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      hvd__rdzv_say(s, "cannot accept: %s; pausing", strerror(errno));
      s->accept_resume = hvd__deadline_in(ACCEPT_PAUSE_MS);
    }
    return; /* EAGAIN, or a connection that died while queued */
  }
}

/* ---- the loop interface ---- */

size_t hvd__rdzv_server_poll_max(const hvd_rdzv_server *s) { return s->nlisten + s->max_conns; }

size_t hvd__rdzv_server_prepare(hvd_rdzv_server *s, struct pollfd *fds, uint64_t now) {
  size_t n = 0;
  if (s->accept_resume && now >= s->accept_resume) s->accept_resume = 0;
  s->listen_polled = s->accept_resume ? 0 : s->nlisten;
  for (; n < s->listen_polled; n++) fds[n] = (struct pollfd){s->listen_fd[n], POLLIN, 0};
  s->npolled = 0;
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    fds[n++] = (struct pollfd){c->fd, (short)(c->out ? POLLOUT : POLLIN), 0};
    s->polled[s->npolled++] = c;
  }
  return n;
}

void hvd__rdzv_server_dispatch(hvd_rdzv_server *s, const struct pollfd *fds, size_t n) {
  size_t first = s->listen_polled;
  for (size_t i = first; i < n && i - first < s->npolled; i++) {
    conn *c = s->polled[i - first];
    if (c->state == C_DEAD || !fds[i].revents) continue;
    if (c->out)
      on_writable(s, c);
    else
      on_readable(s, c);
  }
  sweep(s);
  for (size_t i = 0; i < first && i < n; i++) /* after sweep: accepting may evict */
    if (fds[i].revents) accept_all(s, fds[i].fd);
}

void hvd__rdzv_server_expire(hvd_rdzv_server *s, uint64_t now) {
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->state != C_DEAD && now >= c->deadline)
      hvd__rdzv_conn_drop(s, c, c->state == C_REPLY ? "did not take its reply in time"
                                          : "no registration within the handshake deadline");
  }
  sweep(s);
}

uint64_t hvd__rdzv_server_deadline(const hvd_rdzv_server *s) {
  uint64_t d = s->accept_resume ? s->accept_resume : HVD__NEVER;
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i]->deadline < d) d = s->conns[i]->deadline;
  return d;
}

/* ---- start and stop ---- */

/* One listening socket, which the ranks must not inherit and which
 * accept_all() must find empty (EAGAIN) rather than block on. */
static int listen_on(hvd_rdzv_server *s, const char *addr, int *port) {
  int *fd = &s->listen_fd[s->nlisten];
  HVD__CHECK(hvd__net_listen(addr, *port, fd, port));
  s->nlisten++;
  int fl = fcntl(*fd, F_GETFL);
  if (fcntl(*fd, F_SETFD, FD_CLOEXEC) != 0 || fl < 0 || fcntl(*fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return hvd__err_sys(HVD_E_SYSTEM, errno, "fcntl on the rendezvous socket");
  return 0;
}

int hvd__rdzv_server_start(const hvd_rdzv_server_config *cfg, int *ports,
                           hvd_rdzv_server **out) {
  uint32_t size = cfg->size;
  hvd_rdzv_server *s = calloc(1, sizeof *s);
  if (!s) return hvd__err(HVD_E_NOMEM, "allocating the rendezvous server");
  s->size = size;
  s->key = *cfg->key;
  s->who = cfg->who;
  s->log = cfg->log;
  s->log_arg = cfg->log_arg;
  s->verbose = cfg->verbose;
  s->admit = &registration;
  s->max_conns = 2 * (size_t)size + STRANGERS_MAX;
  s->conns = calloc(s->max_conns, sizeof *s->conns);
  s->polled = calloc(s->max_conns, sizeof *s->polled);
  s->waiting = calloc(size, sizeof *s->waiting);
  s->entries = calloc(size, sizeof *s->entries);
  int rc = HVD_E_NOMEM;
  if (!s->conns || !s->polled || !s->waiting || !s->entries) {
    hvd__err(rc, "allocating the rendezvous tables for %u ranks", size);
    goto free_server;
  }
  rc = cfg->naddrs > 0 && cfg->naddrs <= HVD_RDZV_LISTEN_MAX
           ? 0
           : hvd__err(HVD_E_INVALID, "%zu addresses to listen on (1..%d)", cfg->naddrs,
                      HVD_RDZV_LISTEN_MAX);
  for (size_t i = 0; rc == 0 && i < cfg->naddrs; i++)
    rc = listen_on(s, cfg->addrs[i], &ports[i]);
  if (rc < 0) goto free_server;
  *out = s;
  return 0;
free_server:
  hvd__rdzv_server_free(s);
  return rc;
}

uint64_t hvd__rdzv_server_rounds(const hvd_rdzv_server *s) { return s->rounds; }

int hvd__rdzv_server_busy(const hvd_rdzv_server *s) { return s->nconns > 0; }

void hvd__rdzv_server_free(hvd_rdzv_server *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nconns; i++) hvd__rdzv_conn_drop(s, s->conns[i], NULL);
  sweep(s);
  for (size_t i = 0; i < s->nlisten; i++) hvd__net_close(&s->listen_fd[i]);
  free(s->conns);
  free(s->polled);
  free(s->waiting);
  free(s->entries);
  free(s);
}
