/*
 * rdzv_attack.c -- strangers at the rendezvous do not stop the job.
 *
 * Before hvd_init(), rank 0 plays three strangers against hvdrun's
 * rendezvous service (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT):
 *   (a) a connection that sends 200 bytes of garbage: hvdrun must drop
 *       it at once (we wait for the close, at most 5 s);
 *   (b) hvd_init() itself with a wrong _HOROVOD_SECRET_KEY: the real
 *       client runs the HMAC handshake with the wrong secret, and must
 *       fail (it must not be let in, and it must not hang);
 *   (c) a connection that says nothing and stays open through the job.
 * Then every rank joins for real and runs one allreduce (HVD_SUM of
 * rank+1 over 1000 int32), which must give size*(size+1)/2 everywhere.
 * Prints "rdzv_attack OK" per rank; exit 1 with the error otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hvd.h>

#define COUNT 1000

static int fail(const char *what, int rc) {
  fprintf(stderr, "rdzv_attack: %s: %s (%s)\n", what, hvd_last_error(),
          rc < 0 ? hvd_err_name(rc) : "unexpected success");
  return 1;
}

static int die(const char *what) {
  fprintf(stderr, "rdzv_attack: %s: %s\n", what, strerror(errno));
  return -1;
}

/* A plain TCP connection to the rendezvous (IPv4, as hvdrun listens). */
static int connect_rdzv(void) {
  const char *addr = getenv("HOROVOD_GLOO_RENDEZVOUS_ADDR");
  const char *port = getenv("HOROVOD_GLOO_RENDEZVOUS_PORT");
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(port ? port : "0"));
  if (!addr || inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
    fprintf(stderr, "rdzv_attack: no IPv4 rendezvous address in the environment\n");
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return die("socket");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return die("connect");
  }
  return fd;
}

/* Waits up to ms for the peer to close: 0 when it did, -1 otherwise. */
static int wait_closed(int fd, int ms) {
  char buf[256];
  struct pollfd p = {fd, POLLIN, 0};
  while (poll(&p, 1, ms) == 1) { /* ms restarts per read: fine for a bound */
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return 0;
    if (n < 0 && errno != EINTR) return die("read");
  }
  fprintf(stderr, "rdzv_attack: hvdrun kept a garbage connection open for %d ms\n", ms);
  return -1;
}

/* (a) */
static int send_garbage(void) {
  uint8_t junk[200];
  int fd = connect_rdzv();
  if (fd < 0) return -1;
  if (getrandom(junk, sizeof junk, 0) != (ssize_t)sizeof junk) junk[0] = 0x5a;
  int rc = write(fd, junk, sizeof junk) == (ssize_t)sizeof junk ? 0 : die("write");
  if (rc == 0) rc = wait_closed(fd, 5000);
  close(fd);
  return rc;
}

/* (b): hvd_init() must fail while the secret is wrong. */
static int init_with_wrong_secret(void) {
  const char *real = getenv("_HOROVOD_SECRET_KEY");
  char *saved = real ? strdup(real) : NULL;
  if (!saved) {
    fprintf(stderr, "rdzv_attack: no _HOROVOD_SECRET_KEY in the environment\n");
    return -1;
  }
  /* base64 of 32 zero bytes: well formed, and not this job's key */
  setenv("_HOROVOD_SECRET_KEY", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 1);
  int rc = hvd_init();
  setenv("_HOROVOD_SECRET_KEY", saved, 1);
  free(saved);
  if (rc == 0) {
    fprintf(stderr, "rdzv_attack: hvd_init() with a wrong secret succeeded\n");
    hvd_shutdown();
    return -1;
  }
  printf("rdzv_attack: wrong secret refused: %s\n", hvd_err_name(rc));
  return 0;
}

static int attack(int *silent_fd) {
  if (send_garbage() < 0) return -1;
  if (init_with_wrong_secret() < 0) return -1;
  *silent_fd = connect_rdzv(); /* (c): held open until the end */
  return *silent_fd < 0 ? -1 : 0;
}

static int check_allreduce(void) {
  int32_t *buf = malloc(COUNT * sizeof *buf);
  if (!buf) return fail("malloc", HVD_E_NOMEM);
  for (int i = 0; i < COUNT; i++) buf[i] = hvd_rank() + 1;
  int rc = hvd_allreduce(buf, buf, COUNT, HVD_INT32, HVD_SUM, "rdzv_attack");
  int size = hvd_size(), bad = 0;
  for (int i = 0; rc == 0 && i < COUNT; i++) bad += buf[i] != size * (size + 1) / 2;
  free(buf);
  if (rc < 0) return fail("hvd_allreduce", rc);
  if (bad) {
    fprintf(stderr, "rdzv_attack: %d wrong elements in the allreduce\n", bad);
    return 1;
  }
  return 0;
}

int main(void) {
  const char *rank = getenv("HOROVOD_RANK");
  int silent_fd = -1, rc;
  if (rank && strcmp(rank, "0") == 0 && attack(&silent_fd) < 0) return 1;
  rc = hvd_init();
  if (rc < 0) return fail("hvd_init", rc);
  rc = check_allreduce();
  if (rc == 0) printf("rdzv_attack OK\n");
  hvd_shutdown();
  if (silent_fd >= 0) close(silent_fd);
  return rc;
}
