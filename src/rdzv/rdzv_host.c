/*
 * rdzv_host.c -- the rendezvous server on a thread of rank 0 (rdzv_host.h).
 *
 * The thread runs the server's poll loop; a pipe wakes it when
 * hvd__rdzv_host_stop() asks it to finish.  It finishes once a round is
 * complete and every reply has gone (no connection left), or when told to
 * stop with a deadline that has passed.
 */
#include "rdzv_host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "rdzv_server.h"

struct hvd_rdzv_host {
  hvd_rdzv_server *server;
  pthread_t thread;
  int wake[2];         /* stop() writes a byte */
  atomic_ullong until; /* stop by then; HVD__NEVER until stop() says */
  struct pollfd *fds;
};

static void host_log(void *arg, const char *line) {
  (void)arg;
  hvd__log(HVD_LOG_WARNING, "rank 0's rendezvous: %s", line);
}

static int finished(const hvd_rdzv_host *h, uint64_t now) {
  if (hvd__rdzv_server_rounds(h->server) > 0 && !hvd__rdzv_server_busy(h->server)) return 1;
  return now >= atomic_load(&h->until);
}

static void *serve(void *arg) {
  hvd_rdzv_host *h = arg;
  for (uint64_t now = hvd__now_ms(); !finished(h, now); now = hvd__now_ms()) {
    h->fds[0] = (struct pollfd){h->wake[0], POLLIN, 0};
    size_t n = 1 + hvd__rdzv_server_prepare(h->server, h->fds + 1, now);
    uint64_t wake = hvd__rdzv_server_deadline(h->server), until = atomic_load(&h->until);
    if (until < wake) wake = until;
    int got = poll(h->fds, n, hvd__ms_left(wake));
    if (got < 0 && errno != EINTR) break;
    if (got > 0) {
      if (h->fds[0].revents) {
        char b;
        (void)!read(h->wake[0], &b, 1);
      }
      hvd__rdzv_server_dispatch(h->server, h->fds + 1, n - 1);
    }
    hvd__rdzv_server_expire(h->server, hvd__now_ms());
  }
  return NULL;
}

static void host_free(hvd_rdzv_host *h) {
  hvd__rdzv_server_free(h->server);
  if (h->wake[0] >= 0) close(h->wake[0]);
  if (h->wake[1] >= 0) close(h->wake[1]);
  free(h->fds);
  free(h);
}

int hvd__rdzv_host_start(const char *addr, int port, uint32_t size, const hvd_secret *key,
                         hvd_rdzv_host **out) {
  hvd_rdzv_host *h = calloc(1, sizeof *h);
  if (!h) return hvd__err(HVD_E_NOMEM, "allocating rank 0's rendezvous");
  h->wake[0] = h->wake[1] = -1;
  atomic_store(&h->until, HVD__NEVER);
  const char *addrs[1] = {addr};
  int ports[1] = {port};
  hvd_rdzv_server_config cfg = {size, key, addrs, 1, "rank 0", host_log, NULL, 0};
  int rc = hvd__rdzv_server_start(&cfg, ports, &h->server);
  if (rc < 0) {
    host_free(h);
    return hvd__err_prefix(rc, "rank 0 cannot host the rendezvous (is port %d taken? "
                           "HOROVOD_GLOO_RENDEZVOUS_PORT chooses another)", port);
  }
  h->fds = calloc(1 + hvd__rdzv_server_poll_max(h->server), sizeof *h->fds);
  if (!h->fds || pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    rc = h->fds ? hvd__err_sys(HVD_E_SYSTEM, errno, "pipe") : hvd__err(HVD_E_NOMEM, "poll set");
  } else if ((rc = pthread_create(&h->thread, NULL, serve, h)) != 0) {
    rc = hvd__err_sys(HVD_E_SYSTEM, rc, "starting rank 0's rendezvous thread");
  }
  if (rc < 0) {
    host_free(h);
    return rc;
  }
  *out = h;
  return 0;
}

void hvd__rdzv_host_stop(hvd_rdzv_host *h, uint64_t deadline) {
  if (!h) return;
  atomic_store(&h->until, deadline);
  (void)!write(h->wake[1], "", 1);
  pthread_join(h->thread, NULL);
  host_free(h);
}
