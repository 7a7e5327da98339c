/*
 * tcp_links.c -- the thread that accepts the TCP transport's connections
 * and the table through which it hands them over (tcp_links.h).
 *
 * Accepting is an event loop over the listening socket, a stop eventfd
 * and every handshake in flight, so a stranger that stays silent, sends
 * garbage or fails the HMAC only loses its own connection while the real
 * peers authenticate beside it.  A thread of its own rather than the
 * watchdog's (watch.c): the watchdog's loop beats on a period and judges
 * a fixed set of peers; this one sleeps until a connection comes, and
 * sharing one poll() would tie the watchdog's timing to handshakes.
 *
 * The table (one state per peer) is shared with the transport's thread
 * under `mu`; everything else here is the thread's alone.
 */
#include "tcp_links.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "watch.h"
#include "wire/net.h"

/* How long an accepted connection may take to authenticate.  A real peer
 * answers in microseconds; this only bounds what a silent stranger holds. */
#define HANDSHAKE_MS 10000
/* Handshakes in flight at once; more connections wait in the backlog. */
#define HANDSHAKES_MAX 64
#define WATCH_MAX 2
/* After a failed accept (no descriptors left, say), the pause before the
 * next: the listener stays readable, and the loop must not spin on it. */
#define ACCEPT_RETRY_MS 50

/* A peer's connection, as the table knows it. */
enum {
  L_NONE,       /* none, nobody connecting */
  L_CONNECTING, /* the transport's thread is connecting to it */
  L_WAITING,    /* that connect was refused: the peer's is on its way */
  L_PENDING,    /* accepted from it, the proof and ACCEPT still being sent */
  L_HANDED,     /* accepted from it, waiting in handed[] */
  L_OWNED       /* the transport's */
};

enum { SEND_CHALLENGE, RECV_RESPONSE, SEND_PROOF };

typedef struct {
  int fd;
  char addr[HVD_NET_ADDR_MAX];
  uint64_t deadline;
  int phase;
  uint32_t id;  /* the rank it proved, from SEND_PROOF on */
  int watch;    /* it proved the watch purpose (watch.h), not data */
  int accepted; /* the decision sent with the proof */
  size_t told;  /* bytes of the links' abort_frame that follow buf (0: none) */
  hvd_auth_state st;
  uint8_t buf[HVD_AUTH_RESPONSE_LEN]; /* the message in flight; the largest fits */
  size_t len, done;                   /* len: told included */
} handshake;

struct hvd_links {
  pthread_t thread;
  int started;
  int stop_fd, event_fd, listen_fd;
  _Atomic int stop;
  int rank, size;
  hvd_secret key;
  int nwatch, watch_peer[WATCH_MAX];
  pthread_mutex_t mu;   /* guards what follows */
  unsigned char *state; /* [size] L_* */
  int *handed;          /* [size] the connection in L_HANDED */
  unsigned char watch_state[WATCH_MAX];
  int watch_fd[WATCH_MAX];
  uint8_t abort_frame[HVD_LINKS_ABORT_MAX]; /* once the transport aborted */
  size_t abort_len;                         /* 0: it has not */
  int *told;                                /* [size] connections told, kept */
  /* the thread's own */
  handshake hs[HANDSHAKES_MAX];
  int n;
};

_Static_assert(HVD_AUTH_PROOF_LEN + 1 <= HVD_AUTH_RESPONSE_LEN, "proof and decision fit buf");

static void signal_event(hvd_links *l) { hvd__net_wake(l->event_fd); }

static int watch_index(const hvd_links *l, uint32_t id) {
  for (int i = 0; i < l->nwatch; i++)
    if ((uint32_t)l->watch_peer[i] == id) return i;
  return -1;
}

/* ---- deciding, under the lock ---- */

/* Whether a data connection from `id` is ACCEPTed (and then pending). */
static int decide_data(hvd_links *l, uint32_t id) {
  int s = l->state[id];
  int accept = s == L_NONE || s == L_WAITING || (s == L_CONNECTING && (int)id < l->rank);
  if (accept) l->state[id] = L_PENDING;
  return accept;
}

/* The response proves the data purpose, or else the watch purpose. */
static int verify_purpose(hvd_links *l, handshake *h, uint8_t *proof) {
  uint32_t rank = (uint32_t)l->rank;
  h->watch = 0;
  int rc = hvd__auth_verify_response(&l->key, HVD_LINK_PURPOSE, rank, h->buf, &h->st, proof);
  if (rc != HVD_E_AUTH) return rc;
  h->watch = 1;
  return hvd__auth_verify_response(&l->key, HVD_WATCH_PURPOSE, rank, h->buf, &h->st, proof);
}

/* A watch connection from id: only from a rank that watches this one,
 * once. */
static int decide_watch(hvd_links *l, uint32_t id) {
  int i = watch_index(l, id);
  if (i < 0)
    return hvd__err(HVD_E_PROTOCOL, "it proved rank %u, which does not connect to watch rank %d",
                    id, l->rank);
  if (l->watch_state[i] != L_NONE)
    return hvd__err(HVD_E_PROTOCOL, "it proved rank %u, which is already connected to watch", id);
  l->watch_state[i] = L_PENDING;
  return 1;
}

/* The response is complete: check it and the rank it proves, decide, and
 * put the proof and the decision in flight. */
static int check_response(hvd_links *l, handshake *h) {
  uint8_t proof[HVD_AUTH_PROOF_LEN];
  HVD__CHECK(verify_purpose(l, h, proof));
  uint32_t id = h->st.id_c;
  if (id == (uint32_t)l->rank || id >= (uint32_t)l->size)
    return hvd__err(HVD_E_PROTOCOL, "it proved rank %u, which cannot connect to rank %d (size %d)",
                    id, l->rank, l->size);
  pthread_mutex_lock(&l->mu);
  int rc = h->watch ? decide_watch(l, id) : decide_data(l, id);
  /* the rule holds after an abort too; the frame, once set, never changes */
  h->told = !h->watch && rc == 1 ? l->abort_len : 0;
  pthread_mutex_unlock(&l->mu);
  if (rc < 0) return rc;
  h->id = id;
  h->accepted = rc;
  h->phase = SEND_PROOF;
  memcpy(h->buf, proof, sizeof proof);
  h->buf[sizeof proof] = rc ? HVD_LINK_ACCEPT : HVD_LINK_REFUSE;
  h->len = sizeof proof + 1 + h->told;
  h->done = 0;
  return 0;
}

/* ---- handshakes ---- */

/* What h has left to send: the rest of buf, then of the abort frame. */
static int unsent(const hvd_links *l, handshake *h, struct iovec *iov) {
  size_t own = h->len - h->told, off = h->done > own ? h->done - own : 0;
  int cnt = 0;
  if (h->done < own)
    iov[cnt++] = (struct iovec){.iov_base = h->buf + h->done, .iov_len = own - h->done};
  if (h->told)
    iov[cnt++] = (struct iovec){.iov_base = (void *)(l->abort_frame + off),
                                .iov_len = h->told - off};
  return cnt;
}

/* Moves the handshake on as far as its socket allows.  1: done, the peer
 * is authenticated and told; 0: waiting for the socket; <0: drop it. */
static int handshake_step(hvd_links *l, handshake *h) {
  for (;;) {
    long n;
    if (h->phase == RECV_RESPONSE) {
      n = hvd__net_read_some(h->fd, h->buf + h->done, h->len - h->done);
    } else {
      struct iovec iov[2];
      n = hvd__net_writev_some(h->fd, iov, unsent(l, h, iov));
    }
    if (n <= 0) return (int)n;
    h->done += (size_t)n;
    if (h->done < h->len) continue;
    if (h->phase == SEND_PROOF) return 1;
    if (h->phase == RECV_RESPONSE) {
      HVD__CHECK(check_response(l, h));
    } else {
      h->phase = RECV_RESPONSE;
      h->len = HVD_AUTH_RESPONSE_LEN;
      h->done = 0;
    }
  }
}

/* Removes handshake i: the last one takes its place. */
static void handshake_remove(hvd_links *l, int i) { l->hs[i] = l->hs[--l->n]; }

/* A handshake that ACCEPTed and then failed gives its place back: the
 * peer's connect fails, and a rank waiting for it claims again. */
static void handshake_drop(hvd_links *l, int i, const char *why) {
  handshake *h = &l->hs[i];
  hvd__log(HVD_LOG_WARNING, "rank %d: dropped a connection from %s: %s", l->rank, h->addr, why);
  if (h->phase == SEND_PROOF && h->accepted && !h->told) { /* told: the table untouched */
    pthread_mutex_lock(&l->mu);
    if (h->watch)
      l->watch_state[watch_index(l, h->id)] = L_NONE;
    else
      l->state[h->id] = L_NONE;
    pthread_mutex_unlock(&l->mu);
    signal_event(l);
  }
  hvd__net_close(&h->fd);
  handshake_remove(l, i);
}

/* After the transport's abort, an accepted data connection is told why
 * (unless its handshake already sent the frame) and kept, never handed:
 * under the lock, so that it cannot be claimed meanwhile. */
static int keep_told(hvd_links *l, handshake *h) {
  if (h->watch || !h->accepted || l->abort_len == 0) return 0;
  if (!h->told) /* accepted before the abort: the frame follows alone */
    (void)!send(h->fd, l->abort_frame, l->abort_len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (l->told[h->id] >= 0) close(l->told[h->id]);
  l->told[h->id] = h->fd;
  if (l->state[h->id] == L_PENDING) l->state[h->id] = L_NONE;
  h->fd = -1;
  return 1;
}

/* The handshake is complete: hand an accepted connection over. */
static void handshake_finish(hvd_links *l, int i) {
  handshake *h = &l->hs[i];
  hvd__log(HVD_LOG_DEBUG, "rank %d: rank %u connected from %s%s%s", l->rank, h->id, h->addr,
           h->watch ? " (watch)" : "", h->accepted ? "" : ", refused: ours wins");
  pthread_mutex_lock(&l->mu);
  int kept = keep_told(l, h);
  pthread_mutex_unlock(&l->mu);
  if (kept) {
    handshake_remove(l, i);
    return;
  }
  if (h->accepted) {
    pthread_mutex_lock(&l->mu);
    if (h->watch) {
      int w = watch_index(l, h->id);
      l->watch_fd[w] = h->fd, l->watch_state[w] = L_HANDED;
    } else {
      l->handed[h->id] = h->fd, l->state[h->id] = L_HANDED;
    }
    pthread_mutex_unlock(&l->mu);
    signal_event(l);
    h->fd = -1;
  }
  hvd__net_close(&h->fd); /* refused: it has read all we send, so no reset */
  handshake_remove(l, i);
}

static void handshake_advance(hvd_links *l, int i) {
  int rc = handshake_step(l, &l->hs[i]);
  if (rc < 0)
    handshake_drop(l, i, hvd_last_error());
  else if (rc == 1)
    handshake_finish(l, i);
}

/* Accepts what the backlog holds (room permitting) and sends each a
 * challenge. */
static void accept_new(hvd_links *l) {
  while (l->n < HANDSHAKES_MAX) {
    handshake *h = &l->hs[l->n];
    int rc = hvd__net_accept(l->listen_fd, hvd__now_ms(), &h->fd, h->addr);
    if (rc == HVD_E_TIMEOUT) return; /* nothing more waiting */
    if (rc == 0) rc = hvd__auth_challenge(&h->st, h->buf);
    if (rc < 0) { /* out of descriptors, say: the next wake tries again, not at once */
      hvd__log(HVD_LOG_WARNING, "rank %d: accepting a connection: %s", l->rank, hvd_last_error());
      hvd__net_close(&h->fd);
      struct timespec ts = {0, ACCEPT_RETRY_MS * 1000 * 1000};
      nanosleep(&ts, NULL);
      return;
    }
    h->deadline = hvd__deadline_in(HANDSHAKE_MS);
    h->phase = SEND_CHALLENGE;
    h->len = HVD_AUTH_CHALLENGE_LEN;
    h->done = 0;
    h->accepted = 0;
    h->told = 0;
    l->n++;
    handshake_advance(l, l->n - 1);
  }
}

/* ---- the thread ---- */

/* Waits for the next event: the stop, the listening socket (if there is
 * room for another handshake) and every handshake's socket, until the
 * earliest handshake's deadline.  1 when stopping. */
static int links_wait(hvd_links *l, struct pollfd *pfd, int *base) {
  uint64_t wake = hvd__deadline_in(1000);
  int np = 0;
  pfd[np++] = (struct pollfd){.fd = l->stop_fd, .events = POLLIN};
  if (l->n < HANDSHAKES_MAX) pfd[np++] = (struct pollfd){.fd = l->listen_fd, .events = POLLIN};
  *base = np;
  for (int i = 0; i < l->n; i++) {
    const handshake *h = &l->hs[i];
    pfd[np++] = (struct pollfd){.fd = h->fd,
                                .events = h->phase == RECV_RESPONSE ? POLLIN : POLLOUT};
    if (h->deadline < wake) wake = h->deadline;
  }
  int n = poll(pfd, (nfds_t)np, hvd__ms_left(wake));
  if (n < 0 && errno != EINTR) {
    struct timespec ts = {0, 10 * 1000 * 1000}; /* never spin on a failing poll */
    nanosleep(&ts, NULL);
  }
  return atomic_load(&l->stop) || (n > 0 && (pfd[0].revents & POLLIN));
}

static void *links_main(void *arg) {
  hvd_links *l = arg;
  struct pollfd pfd[HANDSHAKES_MAX + 2];
  int base;
  hvd__log_set_rank(l->rank);
  while (!links_wait(l, pfd, &base)) {
    uint64_t now = hvd__now_ms();
    /* Backwards: removing i moves the last handshake, already visited,
     * into slot i, so pfd[base + i] still belongs to the one not yet
     * visited. */
    for (int i = l->n - 1; i >= 0; i--) {
      if (l->hs[i].deadline <= now)
        handshake_drop(l, i, "it did not authenticate in time");
      else if (pfd[base + i].revents)
        handshake_advance(l, i);
    }
    if (base == 2 && (pfd[1].revents & POLLIN)) accept_new(l);
  }
  while (l->n > 0) handshake_drop(l, l->n - 1, "this rank is closing its transport");
  return NULL;
}

/* ---- start and stop ---- */

static void free_links(hvd_links *l) {
  hvd__net_close(&l->listen_fd);
  for (int r = 0; l->state && l->handed && r < l->size; r++)
    if (l->state[r] == L_HANDED) close(l->handed[r]);
  for (int i = 0; i < l->nwatch; i++) hvd__net_close(&l->watch_fd[i]);
  for (int r = 0; l->told && r < l->size; r++) hvd__net_close(&l->told[r]);
  if (l->stop_fd >= 0) close(l->stop_fd);
  if (l->event_fd >= 0) close(l->event_fd);
  pthread_mutex_destroy(&l->mu);
  free(l->state);
  free(l->handed);
  free(l->told);
  free(l);
}

static int alloc_links(const hvd_links_config *cfg, hvd_links **out) {
  hvd_links *l = calloc(1, sizeof *l);
  if (!l) return hvd__err(HVD_E_NOMEM, "allocating the connection table of %d ranks", cfg->size);
  *l = (hvd_links){.listen_fd = cfg->listen_fd,
                   .rank = cfg->rank,
                   .size = cfg->size,
                   .key = cfg->key,
                   .nwatch = cfg->nwatch,
                   .stop_fd = -1,
                   .event_fd = -1};
  pthread_mutex_init(&l->mu, NULL);
  for (int i = 0; i < cfg->nwatch && i < WATCH_MAX; i++) {
    l->watch_peer[i] = cfg->watch_peer[i];
    l->watch_fd[i] = -1;
  }
  l->state = calloc((size_t)cfg->size, 1);
  l->handed = calloc((size_t)cfg->size, sizeof *l->handed);
  l->told = malloc((size_t)cfg->size * sizeof *l->told);
  for (int r = 0; l->told && r < cfg->size; r++) l->told[r] = -1;
  l->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  l->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  *out = l;
  if (!l->state || !l->handed || !l->told)
    return hvd__err(HVD_E_NOMEM, "allocating the connection table of %d ranks", cfg->size);
  if (l->stop_fd < 0 || l->event_fd < 0)
    return hvd__err_sys(HVD_E_SYSTEM, errno, "eventfd for the connection thread");
  return 0;
}

int hvd__links_start(const hvd_links_config *cfg, hvd_links **out) {
  hvd_links *l = NULL;
  *out = NULL;
  int listen_fd = cfg->listen_fd;
  if (cfg->nwatch > WATCH_MAX) {
    hvd__net_close(&listen_fd);
    return hvd__err(HVD_E_INVALID, "%d watch connections, at most %d", cfg->nwatch, WATCH_MAX);
  }
  int rc = alloc_links(cfg, &l);
  if (rc < 0) goto fail;
  sigset_t all, old; /* its signals are the application's threads' to take */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&l->thread, NULL, links_main, l);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0) {
    rc = hvd__err_sys(HVD_E_SYSTEM, err, "starting the thread that accepts connections");
    goto fail;
  }
  pthread_setname_np(l->thread, "hvd accept");
  l->started = 1;
  *out = l;
  return 0;

fail:
  if (l)
    free_links(l);
  else
    hvd__net_close(&listen_fd);
  return rc;
}

void hvd__links_stop(hvd_links *l) {
  if (!l) return;
  atomic_store(&l->stop, 1);
  hvd__net_wake(l->stop_fd);
  if (l->started) pthread_join(l->thread, NULL);
  free_links(l);
}

void hvd__links_abort(hvd_links *l, const void *frame, size_t len) {
  if (!l || len == 0 || len > sizeof l->abort_frame) return;
  pthread_mutex_lock(&l->mu);
  if (l->abort_len == 0) {
    memcpy(l->abort_frame, frame, len);
    l->abort_len = len;
  }
  pthread_mutex_unlock(&l->mu);
}

/* ---- the transport's side ---- */

int hvd__links_event_fd(const hvd_links *l) { return l->event_fd; }

void hvd__links_event_clear(hvd_links *l) {
  uint64_t v;
  (void)!read(l->event_fd, &v, sizeof v);
}

int hvd__links_claim(hvd_links *l, int peer, int *fd) {
  int how;
  pthread_mutex_lock(&l->mu);
  int s = l->state[peer];
  if (s == L_HANDED) {
    *fd = l->handed[peer];
    l->state[peer] = L_OWNED;
    how = HVD_LINK_TAKEN;
  } else if (s == L_NONE) {
    l->state[peer] = L_CONNECTING;
    how = HVD_LINK_CONNECT;
  } else { /* L_WAITING, L_PENDING; L_CONNECTING, L_OWNED never come here */
    how = HVD_LINK_WAIT;
  }
  pthread_mutex_unlock(&l->mu);
  return how;
}

int hvd__links_connected(hvd_links *l, int peer, int outcome) {
  int rc = 0;
  pthread_mutex_lock(&l->mu);
  /* Accepting the peer's connection meanwhile moved the state on (this
   * rank is the higher): then ours was refused, and the state stays.
   * Both accepted would break the rule: say so rather than keep two. */
  if (l->state[peer] == L_CONNECTING)
    l->state[peer] = outcome > 0 ? L_OWNED : outcome == 0 ? L_WAITING : L_NONE;
  else if (outcome > 0)
    rc = -1;
  pthread_mutex_unlock(&l->mu);
  return rc;
}

void hvd__links_claim_all(hvd_links *l, void (*put)(void *arg, int peer, int fd), void *arg) {
  pthread_mutex_lock(&l->mu);
  for (int r = 0; r < l->size; r++)
    if (l->state[r] == L_HANDED) {
      put(arg, r, l->handed[r]);
      l->state[r] = L_OWNED;
    }
  pthread_mutex_unlock(&l->mu);
}

int hvd__links_claim_watch(hvd_links *l, int i, int *fd) {
  int got = 0;
  pthread_mutex_lock(&l->mu);
  if (l->watch_state[i] == L_HANDED) {
    *fd = l->watch_fd[i];
    l->watch_fd[i] = -1;
    l->watch_state[i] = L_OWNED;
    got = 1;
  }
  pthread_mutex_unlock(&l->mu);
  return got;
}
