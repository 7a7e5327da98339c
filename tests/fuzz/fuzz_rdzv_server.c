/*
 * fuzz_rdzv_server.c -- hvdrun's rendezvous server (rdzv/rdzv_server.h)
 * reading a connection: a stranger's bytes, or a rank's after a real
 * handshake.
 *
 * Each input starts a server for a job of 1..4 ranks on 127.0.0.1,
 * connects to it and drives its loop (prepare, poll, dispatch, expire)
 * from this thread.  Input: a flags byte (bit 0: authenticate first; bits
 * 1-2: job size - 1; bit 3: an elastic job's server, whose workers JOIN),
 * the rank (worker id) the handshake claims, then the bytes sent (after
 * the handshake, or from the start), after which the client ends its
 * stream.  Properties:
 *   - the server closes the connection within a bounded number of loop
 *     turns whatever it was sent (it never waits on a client; a worker
 *     that joined an elastic job waits for its owner, which here refuses
 *     it at once);
 *   - what it sends back after the handshake is nothing, or one TABLE or
 *     ERROR frame that the rank's own decoders accept;
 *   - it frees everything (ASan's leak check).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>

#include "rdzv/rdzv.h"
#include "fuzz.h"
#include "rdzv/rdzv_server.h"

#define TURNS_MAX 1000 /* loop turns: a connection needs a handful */
#define TURN_MS 1000
#define REPLY_MAX (HVD_FRAME_HDR_LEN + 4 + 4 * HVD_RDZV_BODY_MAX + 1)

static hvd_secret key;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < sizeof key.bytes; i++) key.bytes[i] = (uint8_t)(i * 91 + 5);
  return 0;
}

/* The server's words (refusals, with verbose every drop) are built as
 * they would be for hvdrun's terminal, then dropped. */
static void log_line(void *arg, const char *line) { (void)arg, (void)line; }

typedef struct {
  int joined; /* an elastic worker joined: its owner's turn */
  uint32_t worker;
} owner;

static void on_joined(void *arg, uint32_t worker) {
  owner *o = arg;
  o->joined = 1;
  o->worker = worker;
}

static void on_left(void *arg, uint32_t worker) { (void)arg, (void)worker; }

typedef struct {
  hvd_rdzv_server *s;
  struct pollfd *fds;
  int fd;          /* the client's end */
  uint8_t *got;    /* what the server sent */
  size_t got_len;
  int closed;      /* the server closed the connection */
} rig;

/* One turn of hvdrun's loop, its poll() also watching the client's
 * socket: it returns as soon as the server or the client has something
 * to do (TURN_MS only bounds a server that would wait on nothing). */
static void turn(rig *g) {
  size_t n = hvd__rdzv_server_prepare(g->s, g->fds, hvd__now_ms());
  g->fds[n] = (struct pollfd){g->closed ? -1 : g->fd, POLLIN, 0};
  poll(g->fds, n + 1, TURN_MS);
  hvd__rdzv_server_dispatch(g->s, g->fds, n);
  hvd__rdzv_server_expire(g->s, hvd__now_ms());
}

/* Takes what the server sent; notes the end of its stream. */
static void drain(rig *g) {
  while (!g->closed && g->got_len < REPLY_MAX) {
    ssize_t n = recv(g->fd, g->got + g->got_len, REPLY_MAX - g->got_len, MSG_DONTWAIT);
    if (n > 0) g->got_len += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) g->closed = 1;
    else break;
  }
}

/* Turns the loop until `want` bytes arrived or the server closed. */
static int wait_for(rig *g, size_t want) {
  for (int i = 0; i < TURNS_MAX && g->got_len < want && !g->closed; i++) {
    turn(g);
    drain(g);
  }
  return g->got_len >= want;
}

/* The rank's side of the handshake, claiming id `rank`. */
static int handshake(rig *g, uint32_t rank) {
  hvd_auth_state st;
  uint8_t resp[HVD_AUTH_RESPONSE_LEN];
  uint32_t server_id = 0;
  FUZZ_CHECK(wait_for(g, HVD_AUTH_CHALLENGE_LEN));
  FUZZ_CHECK(hvd__auth_respond(&key, HVD_RDZV_PURPOSE, rank, g->got, &st, resp) == 0);
  FUZZ_CHECK(send(g->fd, resp, sizeof resp, MSG_NOSIGNAL) == (ssize_t)sizeof resp);
  FUZZ_CHECK(wait_for(g, HVD_AUTH_CHALLENGE_LEN + HVD_AUTH_PROOF_LEN));
  FUZZ_CHECK(hvd__auth_verify_proof(&key, HVD_RDZV_PURPOSE, g->got + HVD_AUTH_CHALLENGE_LEN,
                                    &st, &server_id) == 0);
  FUZZ_CHECK(server_id == HVD_RDZV_SERVER_ID);
  g->got_len = 0; /* from here on: the reply */
  return 0;
}

/* Sends all of p (turning the loop while the socket is full), then ends
 * the stream.  Stops early if the server hung up. */
static void say(rig *g, const uint8_t *p, size_t n) {
  for (int i = 0; n > 0 && i < TURNS_MAX; i++) {
    ssize_t w = send(g->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      break;
    } else {
      turn(g);
    }
  }
  shutdown(g->fd, SHUT_WR);
}

/* What a rank would make of the server's reply. */
static void check_reply(const rig *g, uint32_t size) {
  hvd_frame f;
  if (g->got_len == 0) return;
  FUZZ_CHECK(g->got_len >= HVD_FRAME_HDR_LEN);
  FUZZ_CHECK(hvd__frame_decode(g->got, &f) == 0);
  FUZZ_CHECK(f.tag == 0 && f.len == g->got_len - HVD_FRAME_HDR_LEN);
  const uint8_t *payload = g->got + HVD_FRAME_HDR_LEN;
  if (f.type == HVD_FRAME_RDZV_ERROR) {
    char reason[512];
    FUZZ_CHECK(hvd__rdzv_decode_error(payload, f.len, reason, sizeof reason) == 0);
  } else {
    hvd_rdzv_entry t[4];
    FUZZ_CHECK(f.type == HVD_FRAME_RDZV_TABLE);
    FUZZ_CHECK(hvd__rdzv_decode_table(payload, f.len, size, t) == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, size};
  uint8_t flags = fuzz_take_u8(&in);
  uint32_t rank = fuzz_take_u8(&in), job = 1 + ((flags >> 1) & 3);
  const char *addr = "127.0.0.1";
  int port = 0;
  rig g = {0};
  g.fd = -1;
  hvd_rdzv_server_config cfg = {.size = job, .key = &key, .addrs = &addr, .naddrs = 1,
                                .who = "hvdrun", .log = log_line, .verbose = 1};
  owner own = {0, 0};
  hvd_rdzv_elastic_hooks hooks = {&own, on_joined, on_left};
  FUZZ_CHECK((flags & 8 ? hvd__rdzv_server_start_elastic(&cfg, &hooks, &port, &g.s)
                        : hvd__rdzv_server_start(&cfg, &port, &g.s)) == 0);
  g.fds = calloc(hvd__rdzv_server_poll_max(g.s) + 1, sizeof *g.fds);
  g.got = malloc(REPLY_MAX);
  FUZZ_CHECK(g.fds && g.got);
  FUZZ_CHECK(hvd__net_connect(addr, port, hvd__deadline_in(5000), &g.fd) == 0);

  if (flags & 1) handshake(&g, rank);
  say(&g, in.p, in.n);
  for (int i = 0; i < TURNS_MAX && !g.closed; i++) {
    if (own.joined == 1) {
      hvd__rdzv_server_refuse(g.s, own.worker, "not wanted in this job");
      own.joined = 2;
    }
    turn(&g);
    drain(&g);
  }
  FUZZ_CHECK(g.closed); /* the server let go of the connection */
  if (flags & 1) check_reply(&g, job);

  hvd__net_close(&g.fd);
  hvd__rdzv_server_free(g.s);
  free(g.fds);
  free(g.got);
  return 0;
}
