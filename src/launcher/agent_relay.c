/*
 * agent_relay.c -- the sessions an agent starts for hvdrun (agent_relay.h).
 */
#include "agent_relay.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

extern char **environ;

void relay_init(relay *r, void (*up)(void *arg, agent_msg m), void *arg) {
  memset(r, 0, sizeof *r);
  r->up = up;
  r->arg = arg;
}

static relay_session *find(relay *r, uint32_t id) {
  for (size_t i = 0; i < r->n; i++)
    if (r->s[i].id == id) return &r->s[i];
  return NULL;
}

static void close_stdin(relay_session *s) {
  if (s->p.in_fd < 0) return;
  close(s->p.in_fd);
  s->p.in_fd = -1;
}

/* SPAWN: the session's process, or an ENDED saying why it could not start. */
static int on_spawn(relay *r, const uint8_t *payload, size_t len) {
  agent_spawn sp;
  HVD__CHECK(agent_spawn_decode(payload, len, &sp));
  int rc = 0;
  if (find(r, sp.id)) {
    rc = hvd__err(HVD_E_PROTOCOL, "SPAWN of session %u, which exists", sp.id);
    goto free_spawn;
  }
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 8;
    relay_session *s = realloc(r->s, cap * sizeof *s);
    if (!s) {
      rc = hvd__err(HVD_E_NOMEM, "out of memory for %zu sessions", cap);
      goto free_spawn;
    }
    r->s = s;
    r->cap = cap;
  }
  relay_session *s = &r->s[r->n++];
  memset(s, 0, sizeof *s);
  s->r = r;
  s->id = sp.id;
  s->p.in_fd = s->p.exec_fd = s->p.out_fd[PROC_STDOUT] = s->p.out_fd[PROC_STDERR] = -1;
  if (proc_spawn(&s->p, sp.argv, environ, 1) < 0) {
    r->up(r->arg, (agent_msg){.type = AGENT_ENDED, .id = s->id,
                              .exit = {PROC_NO_SETUP, errno ? errno : EIO}});
    s->ended = 1;
  }
free_spawn:
  agent_spawn_free(&sp);
  return rc;
}

int relay_on_frame(relay *r, uint8_t type, const uint8_t *payload, size_t len) {
  agent_msg m;
  if (type == AGENT_SPAWN) return on_spawn(r, payload, len);
  HVD__CHECK(agent_msg_decode(type, payload, len, &m));
  relay_session *s = find(r, m.id);
  if (!s) return hvd__err(HVD_E_PROTOCOL, "frame type %u for session %u, never started", type,
                          m.id);
  switch (type) {
    case AGENT_TO: /* a session that ended takes nothing more */
      if (s->p.in_fd >= 0 && !s->closing) {
        if (bytes_reserve(&s->q, m.len) < 0)
          return hvd__err(HVD_E_NOMEM, "out of memory for session %u's input", m.id);
        memcpy(s->q.buf + s->q.len, m.data, m.len);
        s->q.len += m.len;
      }
      break;
    case AGENT_CLOSE:
      s->closing = 1;
      if (bytes_pending(&s->q) == 0) close_stdin(s);
      break;
    default: proc_signal_group(&s->p, (int)m.num); break; /* KILL */
  }
  return 0;
}

/* ---- the loop ---- */

size_t relay_poll_max(const relay *r) { return 4 * r->n; }

size_t relay_prepare(relay *r, int read, struct pollfd *fds) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++) {
    relay_session *s = &r->s[i];
    s->in_polled = s->p.in_fd >= 0 && bytes_pending(&s->q) > 0;
    if (s->in_polled) fds[n++] = (struct pollfd){s->p.in_fd, POLLOUT, 0};
    s->polled = proc_poll_add(&s->p, read ? PROC_BOTH : 0, fds + n);
    n += s->polled;
  }
  return n;
}

/* proc_output_fn: what the session's process wrote goes up as it came. */
static void on_output(void *ctx, int stream, const char *data, size_t n) {
  relay_session *s = ctx;
  if (n > 0)
    s->r->up(s->r->arg, (agent_msg){.type = AGENT_FROM, .id = s->id, .stream = (uint8_t)stream,
                              .data = (const uint8_t *)data, .len = n});
}

void relay_dispatch(relay *r, const struct pollfd *fds, size_t n) {
  size_t at = 0;
  for (size_t i = 0; i < r->n && at <= n; i++) {
    relay_session *s = &r->s[i];
    if (s->in_polled) {
      /* A failed write: the session is going, and ENDED will say so. */
      if (fds[at].revents && bytes_write(&s->q, s->p.in_fd) < 0) close_stdin(s);
      if (s->closing && bytes_pending(&s->q) == 0) close_stdin(s);
      at++;
    }
    proc_poll_dispatch(&s->p, fds + at, s->polled, on_output, s);
    at += s->polled;
  }
}

int relay_reaped(relay *r, pid_t pid, int status) {
  for (size_t i = 0; i < r->n; i++) {
    relay_session *s = &r->s[i];
    if (s->p.pid != pid || s->p.reaped) continue;
    proc_reaped(&s->p, status);
    proc_drain(&s->p, PROC_BOTH, on_output, s); /* its last bytes before its end */
    proc_close(&s->p, on_output, s);
    close_stdin(s);
    r->up(r->arg, (agent_msg){.type = AGENT_ENDED, .id = s->id, .exit = proc_exit_of(&s->p)});
    s->ended = 1;
    return 1;
  }
  return 0;
}

void relay_close_all(relay *r) {
  for (size_t i = 0; i < r->n; i++) {
    r->s[i].closing = 1;
    close_stdin(&r->s[i]);
  }
}

int relay_done(const relay *r) {
  for (size_t i = 0; i < r->n; i++)
    if (!r->s[i].ended) return 0;
  return 1;
}

static void ignore(void *ctx, int stream, const char *data, size_t n) {
  (void)ctx, (void)stream, (void)data, (void)n;
}

void relay_free(relay *r) {
  for (size_t i = 0; i < r->n; i++) {
    relay_session *s = &r->s[i];
    if (!s->p.reaped) proc_signal_group(&s->p, SIGKILL); /* no orphans */
    proc_close(&s->p, ignore, NULL);
    close_stdin(s);
    bytes_free(&s->q);
  }
  free(r->s);
  memset(r, 0, sizeof *r);
}
