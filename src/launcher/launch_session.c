/*
 * launch_session.c -- the machinery of the backends that run a host's
 * ranks through a remote session (launch_session.h): ssh (launch_ssh.c)
 * and srun (launch_srun.c) start `hvdrun --agent` on the host, one
 * session per host, started at once for every host, whose stdin carries
 * hvdrun's frames to the agent there (agent.h) and whose stdout carries
 * the agent's back (agent_proto.h).  The job's secret and every other
 * variable travel inside the JOB frame, never on a command line.
 *
 * A session's life:
 *
 *   CONNECTING  the session started; the JOB waits in its stdin.  What
 *               it prints on stderr is kept for the report should it fail,
 *               or should no HELLO come within the start timeout
 *   UP          HELLO came: frames update the ranks; the session's stderr
 *               goes out as "hvdrun: host H: ..." lines; PINGs both ways,
 *               and 4 s without a word from the agent means the host is lost
 *   CLOSING     the ranks are done (or the job is over): stdin closed, the
 *               session gets SESSION_EXIT_MS to leave before SIGKILL
 *   GONE        the session's process reaped
 *
 * The session runs in its own process group (a terminal's Ctrl-C goes to
 * hvdrun alone, which then stops the job in order) and dies with hvdrun:
 * it closes, the agent sees the end of its stdin and stops the ranks.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_proto.h"
#include "rdzv/rdzv.h"
#include "common.h"
#include "launch.h"
#include "launch_session.h"
#include "rank_env.h"

#define PING_MS 1000
#define SILENCE_MS 4000
#define SESSION_EXIT_MS 2000 /* after the ranks are done: the session's time to leave */
#define SAID_MAX 2048        /* the last words of the session's stderr, for reports */

extern char **environ;

typedef enum { S_CONNECTING, S_UP, S_CLOSING, S_GONE } session_state;

typedef struct {
  const session_kind *kind;
  proc child; /* the session's process: ssh, srun */
  session_state state;
  int failed; /* the host was reported failed: what still comes is ignored */
  agent_reader rd;
  bytes q;
  uint64_t answer_by, heard_at, ping_at, kill_at;
  char said[SAID_MAX];
  size_t said_len;
  output_stream err; /* the session's stderr once the agent is up */
  int in_polled;     /* prepare() put stdin first */
  size_t polled;     /* and then this many of proc_poll_add()'s */
} session;

static const char *name_of(const launch_host *h) { return h->spec->name; }

/* ---- the job ---- */

/* The host's ranks as the JOB lists them: each with copies of its
 * per-rank variables (rank_env_for() rewrites one set). */
static agent_rank *job_ranks(const launch_host *h, rank_env *env) {
  int n = h->spec->nranks;
  agent_rank *ranks = calloc((size_t)n, sizeof *ranks);
  for (int i = 0; ranks && i < n; i++) {
    const launch_rank *r = &h->ranks[i];
    rank_env_rank where = {r->rank, &h->ctx->places[r->rank], name_of(h), h->rdzv_addr,
                           h->rdzv_port};
    char **vars = rank_env_for(env, &where) + env->common;
    ranks[i].rank = (uint32_t)r->rank;
    ranks[i].vars = calloc(RANK_ENV_PER_RANK, sizeof *ranks[i].vars);
    for (int k = 0; ranks[i].vars && k < RANK_ENV_PER_RANK; k++, ranks[i].nvars++)
      if (!(ranks[i].vars[k] = strdup(vars[k]))) break;
    if (ranks[i].nvars < RANK_ENV_PER_RANK) break;
  }
  return ranks;
}

static void free_ranks(agent_rank *ranks, int n) {
  for (int i = 0; ranks && i < n; i++) {
    for (size_t k = 0; k < ranks[i].nvars; k++) free(ranks[i].vars[k]);
    free(ranks[i].vars);
  }
  free(ranks);
}

/* The JOB frame for the host's ranks into q.  0, or -1 when out of
 * memory or too large. */
static int put_job(const launch_host *h, const char *cwd, bytes *q) {
  const hvdrun_options *o = h->ctx->opt;
  rank_env env;
  rank_env_job job = {o, h->ctx->secret};
  int n = h->spec->nranks, rc = -1;
  if (rank_env_init(&env, &job, 1) < 0) return -1;
  agent_rank *ranks = job_ranks(h, &env);
  size_t argc = 0;
  while (o->argv[argc]) argc++;
  agent_job j = {AGENT_PROTO_VERSION, (char *)cwd, o->argv, argc, env.vars, env.common, ranks,
                 (size_t)n};
  if (ranks && ranks[n - 1].nvars == RANK_ENV_PER_RANK) rc = agent_put_job(q, &j);
  free_ranks(ranks, n);
  rank_env_free(&env);
  return rc;
}

/* Queues the JOB frame.  0; or -1 after saying why. */
static int queue_job(launch_host *h, session *s) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) {
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': cannot start its ranks: hvdrun's "
                       "working directory: %s", name_of(h), strerror(errno));
    return -1;
  }
  if (put_job(h, cwd, &s->q) == 0) return 0;
  launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': cannot start its ranks: out of memory, "
                     "or its environment and arguments exceed %u bytes", name_of(h),
                     HVD_FRAME_CONTROL_MAX);
  return -1;
}

/* ---- ending ---- */

/* What the session said last, on one line: "a; b". */
static void said_text(const session *s, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < s->said_len && n + 3 < cap; i++) {
    char c = s->said[i];
    if (c == '\n' || c == '\r') {
      if (n > 0 && out[n - 1] != ' ') {
        memcpy(out + n, "; ", 2);
        n += 2;
      }
      continue;
    }
    out[n++] = (unsigned char)c < 0x20 || c == 0x7f ? '?' : c;
  }
  while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == ';')) n--;
  out[n] = '\0';
}

static void keep_said(session *s, const char *data, size_t n) {
  if (n == 0) return;
  if (n >= sizeof s->said) {
    data += n - (sizeof s->said - 1);
    n = sizeof s->said - 1;
  }
  if (s->said_len + n >= sizeof s->said) { /* keep the tail */
    size_t drop = s->said_len + n - (sizeof s->said - 1);
    memmove(s->said, s->said + drop, s->said_len - drop);
    s->said_len -= drop;
  }
  memcpy(s->said + s->said_len, data, n);
  s->said_len += n;
}

static void close_stdin(session *s) {
  if (s->child.in_fd < 0) return;
  bytes_write(&s->q, s->child.in_fd); /* the last frames, if they fit */
  close(s->child.in_fd);
  s->child.in_fd = -1;
}

/* The host failed: nothing more is taken from this session. */
static void kill_session(session *s) {
  s->failed = 1;
  close_stdin(s);
  if (s->child.pid > 0 && !s->child.reaped) kill(-s->child.pid, SIGKILL);
  if (s->state != S_GONE) s->state = S_CLOSING;
}

static int ranks_done(const launch_host *h) {
  for (int i = 0; i < h->spec->nranks; i++) {
    const launch_rank *r = &h->ranks[i];
    if (r->state != RANK_DONE || r->out.open || r->err.open) return 0;
  }
  return 1;
}

/* The session ended: what that means depends on how far it got. */
static void judge_end(launch_host *h, session *s) {
  char how[160], text[SAID_MAX];
  proc_exit e = proc_exit_of(&s->child);
  said_text(s, text, sizeof text);
  const char *prog = s->kind->program(h);
  if (e.how == PROC_NO_EXEC || e.how == PROC_NO_SETUP) {
    snprintf(how, sizeof how, "cannot run '%.*s': %s", (int)strcspn(prog, " \t"), prog,
             strerror(e.value));
  } else {
    char desc[128];
    proc_exit_describe(e, desc, sizeof desc);
    snprintf(how, sizeof how, "%s %s", s->kind->name, desc);
  }
  if (s->state == S_CONNECTING && e.how == PROC_EXITED && (e.value == 126 || e.value == 127))
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "hvdrun's agent could not start on %s: %s; "
                       "hvdrun must be installed at the same path on every host",
                       name_of(h), text[0] ? text : how);
  else if (s->state == S_CONNECTING)
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': cannot start its ranks: %s%s%s",
                       name_of(h), how, text[0] ? ": " : "", text);
  else if (!ranks_done(h))
    launch_host_failed(h, HVDRUN_EXIT_HOST, 1, "host %s: lost contact with hvdrun's agent "
                       "(the %s session ended: %s)", name_of(h), s->kind->name,
                       text[0] ? text : how);
  else if (!proc_exit_ok(e))
    launch_say(h, 0, "host %s: %s", name_of(h), how);
}

/* ---- frames from the agent ---- */

static void protocol_error(launch_host *h) {
  launch_host_failed(h, HVDRUN_EXIT_HOST, 1, "protocol error from hvdrun's agent on %s: %s",
                     name_of(h), hvd_last_error());
  kill_session(h->impl);
}

static void on_hello(launch_host *h, session *s, const agent_msg *m) {
  if (m->num != AGENT_PROTO_VERSION) {
    hvd__err(HVD_E_PROTOCOL, "it speaks version %u, this hvdrun %u: install the same hvd on "
             "every host", m->num, AGENT_PROTO_VERSION);
    protocol_error(h);
    return;
  }
  s->state = S_UP;
  launch_say(h, 0, "host %s: hvdrun's agent is up (its host calls itself %s)", name_of(h),
             m->text);
  /* What the session said while connecting was kept for a failure; now
   * it is news. */
  if (h->ctx->opt->verbose) output_stream_feed(&s->err, s->said, s->said_len);
  s->said_len = 0;
}

/* STARTED, OUTPUT, CLOSED, EXITED: the rank must be the host's, and the
 * message must fit what is known of it.  NULL, or what is wrong. */
static const char *on_rank_msg(launch_host *h, const agent_msg *m) {
  launch_rank *r = launch_rank_of(h, m->rank);
  if (!r) return "a rank of another host";
  switch (m->type) {
    case AGENT_STARTED:
      if (r->state != RANK_WAITING) return "a rank already started";
      launch_started(r, m->num);
      return NULL;
    case AGENT_OUTPUT:
    case AGENT_CLOSED: { /* CLOSED has no bytes: the end of the stream */
      output_stream *st = launch_stream(r, m->stream);
      if (!st->open) return "a stream already closed";
      output_stream_feed(st, (const char *)m->data, m->len);
      return NULL;
    }
    case AGENT_EXITED:
      if (r->state == RANK_DONE) return "a rank already exited";
      launch_exited(r, m->exit);
      return NULL;
    default: return "a message the agent does not send";
  }
}

static void on_frame(launch_host *h, session *s) {
  agent_msg m;
  s->heard_at = hvd__now_ms();
  if (s->rd.type == AGENT_PING) return;
  if (agent_msg_decode(s->rd.type, s->rd.payload, s->rd.len, &m) < 0) {
    protocol_error(h);
    return;
  }
  const char *why = NULL;
  if ((m.type == AGENT_HELLO) != (s->state == S_CONNECTING))
    why = m.type == AGENT_HELLO ? "a second HELLO" : "a message before HELLO";
  else if (m.type == AGENT_HELLO)
    on_hello(h, s, &m);
  else if (m.type == AGENT_ERROR) {
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': %s", name_of(h), m.text);
    kill_session(s);
  } else
    why = on_rank_msg(h, &m);
  if (why) {
    hvd__err(HVD_E_PROTOCOL, "%s (frame type %u, rank %u)", why, m.type, m.rank);
    protocol_error(h);
  }
}

static void on_frames(launch_host *h, session *s, const char *data, size_t n) {
  while (n > 0 && !s->failed) {
    size_t used;
    int rc = agent_reader_feed(&s->rd, (const uint8_t *)data, n, &used);
    data += used;
    n -= used;
    if (rc < 0) protocol_error(h);
    if (rc <= 0) return;
    on_frame(h, s);
  }
}

/* proc_output_fn for the session's stdout (frames) and stderr (its words). */
static void on_session_output(void *ctx, int stream, const char *data, size_t n) {
  launch_host *h = ctx;
  session *s = h->impl;
  if (stream == PROC_STDOUT) {
    if (n > 0) on_frames(h, s, data, n);
    return;
  }
  keep_said(s, data, n);
  if (n == 0 || (s->state != S_CONNECTING && !s->failed)) output_stream_feed(&s->err, data, n);
}

/* ---- the backend ---- */

int session_self(char path[PATH_MAX]) {
  ssize_t len = readlink("/proc/self/exe", path, PATH_MAX - 1);
  if (len <= 0) return -1;
  path[len] = '\0';
  return 0;
}

int session_words(session_cmd *c, const char *command, size_t more) {
  char *save = NULL;
  c->words = strdup(command);
  size_t words_max = strlen(command) / 2 + 1;
  c->argv = c->words ? calloc(words_max + more + 1, sizeof *c->argv) : NULL;
  if (!c->argv) return -1;
  int n = 0;
  for (char *w = strtok_r(c->words, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
    c->argv[n++] = w;
  return n;
}

size_t session_poll_max(int n) {
  (void)n;
  return 4; /* stdin, stdout, stderr, exec status */
}

int session_start(launch_host *h, const session_kind *kind) {
  char prefix[HVD_HOSTNAME_MAX + 16];
  session_cmd cmd;
  session *s = calloc(1, sizeof *s);
  if (!s) return -1;
  h->impl = s;
  s->kind = kind;
  s->child.in_fd = s->child.exec_fd = s->child.out_fd[PROC_STDOUT] = s->child.out_fd[PROC_STDERR] = -1;
  s->state = S_GONE;
  agent_reader_init(&s->rd, AGENT_FROM_AGENT);
  snprintf(prefix, sizeof prefix, "hvdrun: host %s: ", name_of(h));
  output_stream_init(&s->err, prefix, h->ctx->err);
  if (queue_job(h, s) < 0) return 0;
  memset(&cmd, 0, sizeof cmd);
  if (session_self(cmd.self) < 0 || kind->build(h, &cmd) < 0 ||
      proc_spawn(&s->child, cmd.argv, environ, 1) < 0) {
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': cannot start its ranks: cannot "
                       "start '%s': %s", name_of(h), kind->program(h), strerror(errno));
  } else {
    uint64_t now = hvd__now_ms();
    s->state = S_CONNECTING;
    s->answer_by = now + (uint64_t)h->ctx->opt->start_timeout * 1000;
    s->ping_at = now + PING_MS;
    launch_say(h, 0, "host %s: %s (pid %d) starts hvdrun's agent: %s", name_of(h), kind->name,
               (int)s->child.pid, cmd.what);
  }
  free(cmd.words);
  free(cmd.argv);
  return 0;
}

static void queue_msg(session *s, agent_msg m) {
  if (s->child.in_fd >= 0 && agent_put_msg(&s->q, &m) < 0) kill_session(s); /* out of memory */
}

void session_signal(launch_host *h, int sig) {
  session *s = h->impl;
  if (s) queue_msg(s, (agent_msg){.type = AGENT_SIGNAL, .num = (uint32_t)sig});
}

size_t session_prepare(launch_host *h, struct pollfd *fds, uint64_t now) {
  session *s = h->impl;
  size_t n = 0;
  int streams = 1 << PROC_STDERR;
  if (!s) return 0;
  s->in_polled = s->child.in_fd >= 0 && bytes_pending(&s->q) > 0;
  if (s->in_polled) fds[n++] = (struct pollfd){s->child.in_fd, POLLOUT, 0};
  if (launch_output_full(h))
    s->heard_at = now; /* not listening: the silence is ours */
  else
    streams |= 1 << PROC_STDOUT;
  s->polled = proc_poll_add(&s->child, streams, fds + n);
  return n + s->polled;
}

void session_dispatch(launch_host *h, const struct pollfd *fds, size_t n) {
  session *s = h->impl;
  size_t at = 0;
  if (!s) return;
  if (s->in_polled && n > 0) {
    /* A failed write: the session is going; its end will say why. */
    if (fds[0].revents && bytes_write(&s->q, s->child.in_fd) < 0) close_stdin(s);
    at = 1;
  }
  proc_poll_dispatch(&s->child, fds + at, n - at, on_session_output, h);
}

uint64_t session_deadline(const launch_host *h) {
  const session *s = h->impl;
  uint64_t d = HVD__NEVER;
  if (!s || s->state == S_GONE) return d;
  if (s->state == S_CONNECTING && !s->failed) d = s->answer_by;
  uint64_t silence = s->heard_at + SILENCE_MS;
  if (s->state == S_UP && !s->failed && silence < d) d = silence;
  if (s->child.in_fd >= 0 && s->ping_at < d) d = s->ping_at;
  if (s->kill_at && s->kill_at < d) d = s->kill_at;
  return d;
}

void session_expire(launch_host *h, uint64_t now) {
  char text[SAID_MAX];
  session *s = h->impl;
  if (!s || s->state == S_GONE) return;
  if (s->state == S_CONNECTING && !s->failed && now >= s->answer_by) {
    said_text(s, text, sizeof text);
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': cannot start its ranks: no answer "
                       "within %d s%s%s", name_of(h), h->ctx->opt->start_timeout,
                       text[0] ? ": " : "", text);
    kill_session(s);
  }
  if (s->state == S_UP && !s->failed && now >= s->heard_at + SILENCE_MS) {
    launch_host_failed(h, HVDRUN_EXIT_HOST, 1, "host %s: lost contact with hvdrun's agent "
                       "(no word for %d s)", name_of(h), SILENCE_MS / 1000);
    kill_session(s);
  }
  if (s->child.in_fd >= 0 && now >= s->ping_at) {
    queue_msg(s, (agent_msg){.type = AGENT_PING});
    s->ping_at = now + PING_MS;
  }
  if (s->state == S_UP && ranks_done(h)) { /* the agent leaves by itself now */
    close_stdin(s);
    s->state = S_CLOSING;
    s->kill_at = now + SESSION_EXIT_MS;
  }
  if (s->kill_at && now >= s->kill_at) {
    kill_session(s);
    s->kill_at = 0;
  }
}

int session_reaped(launch_host *h, pid_t pid, int status) {
  session *s = h->impl;
  if (!s || s->child.pid != pid || s->child.reaped) return 0;
  proc_reaped(&s->child, status);
  proc_drain(&s->child, PROC_BOTH, on_session_output, h); /* its last frames and words */
  if (!s->failed) judge_end(h, s);
  proc_close(&s->child, on_session_output, h);
  s->state = S_GONE;
  return 1;
}

int session_busy(const launch_host *h) {
  const session *s = h->impl;
  return s && s->state != S_GONE;
}

void session_close(launch_host *h) {
  session *s = h->impl;
  if (!s) return;
  close_stdin(s);
  if (s->state == S_UP) s->state = S_CLOSING;
}

/* Waits up to a second for the killed session. */
static void reap_killed(session *s) {
  for (int i = 0; i < 100 && !s->child.reaped; i++) {
    int status;
    pid_t p = waitpid(s->child.pid, &status, WNOHANG);
    if (p == s->child.pid) proc_reaped(&s->child, status);
    if (p < 0 && errno != EINTR) break;
    if (p == 0) usleep(10000);
  }
}

void session_stop(launch_host *h) {
  session *s = h->impl;
  if (!s) return;
  if (s->child.pid > 0 && !s->child.reaped) {
    kill_session(s);
    reap_killed(s);
  }
  s->failed = 1;
  proc_close(&s->child, on_session_output, h);
  output_stream_end(&s->err);
  agent_reader_free(&s->rd);
  bytes_free(&s->q);
  free(s);
  h->impl = NULL;
}
