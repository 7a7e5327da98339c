/*
 * fuzz_tcp.c -- the TCP transport (transport/tcp.c) reading a peer's
 * frames: DATA headers checked against what the receiver expects (tag,
 * length), ABORT frames and their reasons, streams cut anywhere.
 *
 * Each input builds a real job of 2 ranks over loopback: this thread is
 * rank 1, whose hvd__tcp_create makes its watch connection to rank 0 and
 * whose first sendrecv its data connection (tcp_links.h); a second
 * thread plays rank 0, completes both handshakes and ACCEPTs both (the
 * watch connection it then leaves alone), then sends the input's bytes
 * on the data connection and ends its stream.  Rank 1 sends 16 bytes to rank 0 while
 * it receives 64 (tag 1), then receives 8 (tag 2).  Properties:
 *   - each sendrecv ends at once (the stream ends after the input) with
 *     success or an error that says why;
 *   - a receive that succeeds delivered exactly the payload of a frame
 *     of the expected tag and length: the input's bytes 24..88 for the
 *     first (and those of the next frame for the second).
 */
#include <pthread.h>
#include <signal.h>

#include "fuzz.h"
#include "wire/frame.h"
#include "transport/tcp_links.h"
#include "transport/transport.h"
#include "transport/watch.h"

#define FIRST 64
#define SECOND 8

static hvd_secret key;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < sizeof key.bytes; i++) key.bytes[i] = (uint8_t)(i * 53 + 1);
  return 0;
}

typedef struct {
  int listen_fd;
  const uint8_t *p;
  size_t n;
} peer;

/* Accepts one connection for `purpose` as rank 0 would: the handshake,
 * then ACCEPT. */
static int accept_as_rank0(int listen_fd, const char *purpose, uint64_t deadline, int *fd) {
  char addr[HVD_NET_ADDR_MAX];
  uint32_t id;
  uint8_t accept = HVD_LINK_ACCEPT;
  if (hvd__net_accept(listen_fd, deadline, fd, addr) < 0) return -1;
  if (hvd__auth_accept(*fd, &key, purpose, 0, deadline, &id) < 0) return -1;
  return hvd__net_write_all(*fd, &accept, 1, deadline);
}

/* Rank 0: the handshakes, the input, the end of its stream; then it reads
 * whatever rank 1 says until rank 1 closes. */
static void *rank0(void *arg) {
  peer *pr = arg;
  uint64_t deadline = hvd__deadline_in(5000);
  int fd = -1, watch = -1;
  if (accept_as_rank0(pr->listen_fd, HVD_WATCH_PURPOSE, deadline, &watch) == 0 &&
      accept_as_rank0(pr->listen_fd, HVD_LINK_PURPOSE, deadline, &fd) == 0) {
    (void)hvd__net_write_all(fd, pr->p, pr->n < FUZZ_PEER_MAX ? pr->n : FUZZ_PEER_MAX, deadline);
    shutdown(fd, SHUT_WR);
    uint8_t sink[4096];
    while (hvd__net_read_all(fd, sink, sizeof sink, deadline) == 0) {
    }
  }
  hvd__net_close(&fd);
  hvd__net_close(&watch);
  return NULL;
}

/* The payload of the frame at `off` in the input, if it is there. */
static const uint8_t *payload_at(const uint8_t *data, size_t size, size_t off, size_t len) {
  return off + HVD_FRAME_HDR_LEN + len <= size ? data + off + HVD_FRAME_HDR_LEN : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hvd_peer_addr peers[2] = {{"127.0.0.1", 0}, {"127.0.0.1", 1}};
  peer pr = {-1, data, size};
  int listen1 = -1; /* rank 1's: nobody connects to it here */
  FUZZ_CHECK(hvd__net_listen("127.0.0.1", 0, &pr.listen_fd, &peers[0].port) == 0);
  FUZZ_CHECK(hvd__net_listen("127.0.0.1", 0, &listen1, &peers[1].port) == 0);
  pthread_t th;
  FUZZ_CHECK(pthread_create(&th, NULL, rank0, &pr) == 0);

  hvd_tcp_config cfg = {.rank = 1,
                        .size = 2,
                        .key = key,
                        .listen_fd = listen1,
                        .peers = peers,
                        .connect_deadline = hvd__deadline_in(5000),
                        .timeout_ms = 5000};
  hvd_transport *t = NULL;
  FUZZ_CHECK(hvd__tcp_create(&cfg, &t) == 0);
  uint8_t out[16] = {7}, first[FIRST], second[SECOND];
  int rc = hvd__sendrecv(t, 0, out, sizeof out, 0, first, sizeof first, 1);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
  } else {
    const uint8_t *want = payload_at(data, size, 0, FIRST);
    FUZZ_CHECK(want && memcmp(first, want, FIRST) == 0);
    rc = hvd__recv(t, 0, second, sizeof second, 2);
    if (rc < 0) FUZZ_CHECK_ERROR(rc);
    want = payload_at(data, size, HVD_FRAME_HDR_LEN + FIRST, SECOND);
    if (rc == 0) FUZZ_CHECK(want && memcmp(second, want, SECOND) == 0);
  }
  t->ops->destroy(t);
  pthread_join(th, NULL);
  hvd__net_close(&pr.listen_fd);
  return 0;
}
