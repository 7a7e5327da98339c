/*
 * watch.c -- the TCP transport's watchdog (watch.h).
 *
 * One thread, one poll() over the watch connections and a stop eventfd.
 * Every period (a fifth of the window, 50 ms to 1 s) it sends this rank's
 * counter to every peer, then reads what arrived and judges each peer:
 * silent for the window, or alive with a counter that has not moved for
 * the window while it should, is a verdict.  Everything here is
 * non-blocking: a peer that does not read only fills its own socket
 * buffer (a beat is 32 bytes).
 *
 * Nothing here may end a job by mistake: an error of the watchdog's own
 * (a failed poll, an unreadable frame) stops watching that peer, or all,
 * with a warning; only silence and a frozen counter are verdicts.
 */
#include "watch.h"

#include <errno.h>
#include <stdatomic.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "wire/frame.h"
#include "wire/net.h"

#define BEAT_LEN (HVD_FRAME_HDR_LEN + 8)

typedef struct {
  int fd;
  int rank;
  char host[256];       /* for messages */
  int gone;             /* closed, said goodbye, or unreadable: not watched */
  uint64_t heard_ms;    /* last frame from it */
  uint64_t value;       /* its last counter */
  uint64_t moved_ms;    /* when its counter last moved (or it rested) */
  uint8_t in[BEAT_LEN]; /* the frame being read */
  size_t got;
  uint8_t out[BEAT_LEN]; /* the beat being written */
  size_t out_len, sent;
} peer;

struct hvd_watch {
  pthread_t thread;
  int stop_fd;
  _Atomic int stop;  /* also seen without the eventfd, within a period */
  struct pollfd *pf; /* [n + 1] */
  int rank, n, window_ms, period_ms;
  hvd_alarm *alarm;
  int judged; /* a verdict was given: watching ended, beating goes on */
  peer *peers;
};

/* ---- sending ---- */

/* Writes what the socket takes of p's frame in progress. */
static void send_more(peer *p) {
  while (p->sent < p->out_len) {
    ssize_t k = send(p->fd, p->out + p->sent, p->out_len - p->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p->sent += (size_t)k;
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    p->gone = 1; /* its end closed: the data connections will say why */
    return;
  }
}

static void encode(peer *p, uint32_t tag, uint64_t value, int with_value) {
  hvd__frame_encode(&(hvd_frame){.type = HVD_FRAME_DATA, .tag = tag, .len = with_value ? 8 : 0},
                    p->out);
  hvd_writer wr = {.buf = p->out + HVD_FRAME_HDR_LEN, .cap = 8};
  if (with_value) hvd__put_u64(&wr, value);
  p->out_len = HVD_FRAME_HDR_LEN + wr.len;
  p->sent = 0;
}

/* A beat to every peer that has finished reading the last one's bytes
 * into its socket (else that one is still on its way: no pile-up). */
static void send_beats(hvd_watch *w) {
  uint64_t v = hvd__live_value();
  for (int i = 0; i < w->n; i++) {
    peer *p = &w->peers[i];
    if (p->fd < 0) continue;
    if (p->sent == p->out_len) encode(p, HVD_WATCH_TAG_BEAT, v, 1);
    send_more(p);
  }
}

/* ---- reading ---- */

/* A whole frame from p arrived: 0, or -1 when it is not one of ours. */
static int take_frame(peer *p, uint64_t now) {
  hvd_frame f;
  if (hvd__frame_decode(p->in, &f) < 0 || f.type != HVD_FRAME_DATA) return -1;
  if (f.tag == HVD_WATCH_TAG_BYE && f.len == 0) {
    p->gone = 1;
    return 0;
  }
  if (f.tag != HVD_WATCH_TAG_BEAT || f.len != 8) return -1;
  hvd_reader r = {.buf = p->in + HVD_FRAME_HDR_LEN, .len = 8};
  uint64_t v = hvd__get_u64(&r);
  if (v != p->value || (v & HVD_LIVE_RESTING)) p->moved_ms = now;
  p->value = v;
  p->heard_ms = now;
  return 0;
}

/* How many bytes the frame being read still needs. */
static size_t wanted(const peer *p) {
  if (p->got < HVD_FRAME_HDR_LEN) return HVD_FRAME_HDR_LEN - p->got;
  return BEAT_LEN - p->got; /* a bye is complete at its header: see read_all */
}

/* Reads what p sent; frames are whole once complete. */
static void read_all(hvd_watch *w, peer *p, uint64_t now) {
  while (!p->gone) {
    ssize_t k = recv(p->fd, p->in + p->got, wanted(p), MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (k <= 0) {
      p->gone = 1; /* closed: it ended, and its data connections say how */
      return;
    }
    p->got += (size_t)k;
    hvd_frame f;
    int whole = p->got == BEAT_LEN ||
                (p->got == HVD_FRAME_HDR_LEN && hvd__frame_decode(p->in, &f) == 0 && f.len == 0);
    if (!whole) continue;
    p->got = 0;
    if (take_frame(p, now) < 0) {
      hvd__log(HVD_LOG_WARNING,
               "rank %d: rank %d sent a frame the watchdog cannot read; it "
               "is no longer watched",
               w->rank, p->rank);
      p->gone = 1;
    }
  }
}

/* ---- judging ---- */

static void judge(hvd_watch *w, uint64_t now) {
  char why[HVD_LIVE_WHY_MAX];
  if (w->window_ms <= 0) return; /* liveness off here: beats only */
  for (int i = 0; i < w->n && !w->judged; i++) {
    const peer *p = &w->peers[i];
    if (p->gone) continue;
    double silent = (double)(now - p->heard_ms) / 1000.0;
    double still = (double)(now - p->moved_ms) / 1000.0;
    if (now - p->heard_ms >= (uint64_t)w->window_ms)
      snprintf(why, sizeof why,
               "rank %d on host %s gave no sign of life for %.1f s (its "
               "process stopped, its host down, or the network to it cut)",
               p->rank, p->host, silent);
    else if (now - p->moved_ms >= (uint64_t)w->window_ms)
      snprintf(why, sizeof why,
               "rank %d on host %s is running but its engine has not moved "
               "for %.1f s (a thread stuck outside hvd?)",
               p->rank, p->host, still);
    else
      continue;
    hvd__log(HVD_LOG_ERROR, "rank %d: %s", w->rank, why);
    hvd__alarm_raise(w->alarm, p->rank, why);
    w->judged = 1;
  }
}

/* ---- the thread ---- */

/* Sleeps in poll() until a peer's bytes arrive, the stop, or `ms`. */
static int wait_events(hvd_watch *w, struct pollfd *pf, int ms) {
  int np = 0;
  pf[np++] = (struct pollfd){.fd = w->stop_fd, .events = POLLIN};
  for (int i = 0; i < w->n; i++)
    if (!w->peers[i].gone) pf[np++] = (struct pollfd){.fd = w->peers[i].fd, .events = POLLIN};
  int k = poll(pf, (nfds_t)np, ms);
  if (k < 0 && errno != EINTR) {
    struct timespec ts = {0, 10 * 1000 * 1000}; /* never spin on a failing poll */
    nanosleep(&ts, NULL);
  }
  return k > 0 && (pf[0].revents & POLLIN);
}

static void *watch_main(void *arg) {
  hvd_watch *w = arg;
  uint64_t next_beat = 0;
  hvd__log_set_rank(w->rank);
  while (!atomic_load(&w->stop)) {
    uint64_t now = hvd__now_ms();
    if (now >= next_beat) {
      send_beats(w);
      next_beat = now + (uint64_t)w->period_ms;
    }
    if (wait_events(w, w->pf, (int)(next_beat - now))) break;
    now = hvd__now_ms();
    for (int i = 0; i < w->n; i++) read_all(w, &w->peers[i], now);
    judge(w, now);
  }
  return NULL;
}

/* ---- start and stop ---- */

static void close_all(hvd_watch *w) {
  for (int i = 0; i < w->n; i++) hvd__net_close(&w->peers[i].fd);
}

static void free_watch(hvd_watch *w) {
  close_all(w);
  if (w->stop_fd >= 0) close(w->stop_fd);
  free(w->peers);
  free(w->pf);
  free(w);
}

static int alloc_watch(const hvd_watch_config *cfg, hvd_watch **out) {
  hvd_watch *w = calloc(1, sizeof *w);
  if (w) w->peers = calloc((size_t)cfg->n, sizeof *w->peers);
  if (w) w->pf = calloc((size_t)cfg->n + 1, sizeof *w->pf);
  if (!w || !w->peers || !w->pf) {
    if (w) {
      free(w->peers);
      free(w->pf);
    }
    free(w);
    return hvd__err(HVD_E_NOMEM, "allocating the watchdog of %d connections", cfg->n);
  }
  uint64_t now = hvd__now_ms();
  w->stop_fd = -1;
  w->rank = cfg->rank;
  w->n = cfg->n;
  w->window_ms = cfg->window_ms;
  int period = cfg->window_ms > 0 ? cfg->window_ms / 5 : 1000;
  w->period_ms = period < 50 ? 50 : period > 1000 ? 1000 : period;
  w->alarm = cfg->alarm;
  for (int i = 0; i < cfg->n; i++) {
    peer *p = &w->peers[i];
    *p = (peer){.fd = cfg->fds[i],
                .rank = cfg->peers[i],
                .heard_ms = now,
                .moved_ms = now,
                .value = HVD_LIVE_RESTING};
    snprintf(p->host, sizeof p->host, "%s",
             cfg->hosts && cfg->hosts[i] && cfg->hosts[i][0] ? cfg->hosts[i] : "?");
    cfg->fds[i] = -1;
  }
  *out = w;
  return 0;
}

int hvd__watch_start(const hvd_watch_config *cfg, hvd_watch **out) {
  hvd_watch *w = NULL;
  *out = NULL;
  if (cfg->n == 0) return 0;
  int rc = alloc_watch(cfg, &w);
  if (rc < 0) {
    for (int i = 0; i < cfg->n; i++) hvd__net_close(&cfg->fds[i]);
    return rc;
  }
  w->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->stop_fd < 0) {
    rc = hvd__err_sys(HVD_E_SYSTEM, errno, "eventfd for the watchdog");
    goto free_it;
  }
  sigset_t all, old; /* its signals are the application's threads' to take */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&w->thread, NULL, watch_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0) {
    rc = hvd__err_sys(HVD_E_SYSTEM, err, "starting the watchdog thread");
    goto free_it;
  }
  pthread_setname_np(w->thread, "hvd watch");
  *out = w;
  return 0;

free_it:
  free_watch(w);
  return rc;
}

void hvd__watch_stop(hvd_watch *w) {
  if (!w) return;
  atomic_store(&w->stop, 1);
  hvd__net_wake(w->stop_fd);
  pthread_join(w->thread, NULL);
  for (int i = 0; i < w->n; i++) { /* best effort: a peer that cannot take it sees the close */
    peer *p = &w->peers[i];
    if (p->fd < 0 || p->sent != p->out_len) continue;
    encode(p, HVD_WATCH_TAG_BYE, 0, 0);
    send_more(p);
  }
  free_watch(w);
}
