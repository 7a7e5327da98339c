/*
 * rdzv_server_int.h -- what rdzv_server.c and rdzv_server_elastic.c share
 * of the rendezvous server: its connections and their states, how a
 * newcomer is admitted, and the helpers that send, refuse and drop.  Not
 * for anyone else.  The elastic server is a layer over the plain one: it
 * starts a plain server and gives it its own admission.
 */
#ifndef HVD_RDZV_SERVER_INT_H
#define HVD_RDZV_SERVER_INT_H

#include "rdzv_elastic.h"
#include "rdzv_server.h"

#define HANDSHAKE_MS 10000 /* accept to complete REGISTER or JOIN */
#define REPLY_MS 10000     /* to hand over the TABLE, PLACE or ERROR */

/* An outgoing message; the TABLE is shared by every rank's connection. */
typedef struct {
  int refs;
  size_t len;
  uint8_t data[];
} blob;

/* The order matters: up to BODY a connection has not registered (it may
 * be evicted for a newcomer); from WAITING on it says nothing more. */
typedef enum {
  C_AUTH, C_HEADER, C_BODY, C_WAITING, C_JOINED, C_CONTROL, C_REPLY, C_DEAD
} conn_state;

typedef struct {
  int fd;
  conn_state state;
  uint64_t deadline;
  uint64_t serial; /* accept order: the oldest stranger is evicted first */
  hvd_auth_state auth;
  uint32_t rank;   /* proven by the handshake, from HEADER on: a rank, or a worker id */
  uint8_t in[HVD_FRAME_HDR_LEN + HVD_RDZV_REGISTER_MAX];
  size_t in_len, in_need;
  blob *out;
  size_t out_off;
  blob *next;            /* a NOTICE to send once out is done */
  hvd_rdzv_entry entry;  /* elastic: what the worker joined with */
  char peer[HVD_NET_ADDR_MAX + 8];
} conn;

/* How a newcomer is admitted: a rank's REGISTER (the plain server's), or
 * an elastic worker's JOIN (rdzv_server_elastic.c's). */
typedef struct {
  uint8_t frame;      /* the frame a newcomer sends after the handshake */
  size_t max;         /* its largest payload */
  const char *name;   /* the frame's name in refusals: "REGISTER" */
  const char *member; /* what a newcomer is in refusals: "rank", "worker" */
  /* Its payload arrived in c->in. */
  void (*arrived)(hvd_rdzv_server *s, conn *c);
  /* c is being dropped (any state but DEAD); NULL: nothing to do. */
  void (*dropped)(hvd_rdzv_server *s, conn *c);
} hvd_rdzv_admission;

struct hvd_rdzv_server {
  int listen_fd[HVD_RDZV_LISTEN_MAX];
  size_t nlisten;
  uint32_t size;
  hvd_secret key;
  const char *who;
  hvd_rdzv_log_fn log;
  void *log_arg;
  int verbose;
  const hvd_rdzv_admission *admit;
  const hvd_rdzv_elastic_hooks *elastic; /* the elastic layer's owner; NULL when plain */
  uint64_t rounds;
  uint64_t accept_resume; /* 0, or when to accept again after EMFILE */
  uint64_t serial;
  conn **conns; /* nconns live or dead connections, max_conns slots */
  size_t nconns, max_conns;
  conn **polled; /* what prepare() put in the poll set, in order */
  size_t npolled;
  size_t listen_polled; /* the listening sockets prepare() put first */
  conn **waiting;          /* size slots: the rank's connection while it waits */
  hvd_rdzv_entry *entries; /* size slots: what each waiting rank registered */
  uint32_t nwaiting;
};

/* Under verbose: one line to the server's log. */
void hvd__rdzv_say(const hvd_rdzv_server *s, const char *fmt, ...) HVD__PRINTF(2, 3);

blob *hvd__rdzv_blob_new(size_t len);
void hvd__rdzv_blob_unref(blob *b);
/* A frame with room for `len` payload bytes after the header. */
blob *hvd__rdzv_frame_new(uint8_t type, size_t len);

/* Starts sending b (the connection takes the reference). */
void hvd__rdzv_conn_send(conn *c, blob *b);
/* Closes c for `why` (printed under verbose; NULL: quietly). */
void hvd__rdzv_conn_drop(hvd_rdzv_server *s, conn *c, const char *why);
/* Answers with an ERROR saying why, always logged, then closes. */
void hvd__rdzv_conn_refuse(hvd_rdzv_server *s, conn *c, const char *reason);

#endif /* HVD_RDZV_SERVER_INT_H */
