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
 *
 * A relayed session (the launch tree, launch_tree.h: h->via set) is
 * started by the agent on another host: hvdrun asks that agent to SPAWN
 * it, and its bytes travel inside the TO and FROM frames of the session
 * of h->via (agent_proto.h), one level for each agent on the way.  Its
 * life is the same as above; only its process is the relaying agent's:
 * that agent reports its end (ENDED) instead of hvdrun reaping it, and a
 * relayed session ends with the session it runs through.
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
#define SESSION_EXIT_MS 2000 /* after the ranks are done: the session's time to leave */
#define SAID_MAX 2048        /* the last words of the session's stderr, for reports */
/* hvdrun's loop turns at least every PING_MS: a longer gap means the
 * machine did not run hvdrun (hundreds of ranks on a few cores), and the
 * agents' pings wait unread meanwhile: not their silence. */
#define STALLED_MS (2 * PING_MS)

extern char **environ;

typedef enum { S_CONNECTING, S_UP, S_CLOSING, S_GONE } session_state;

typedef struct {
  const session_kind *kind;
  proc child;         /* the session's process: ssh, srun (not for a relayed one) */
  uint32_t id;        /* in the frames of the agent that relays it: its host's first rank */
  int in_open;        /* its stdin is open */
  proc_exit end;      /* a relayed session's end, once ENDED came */
  launch_host **kids; /* the hosts whose sessions this host's agent started */
  int nkids, cap_kids;
  session_state state;
  int failed; /* the host was reported failed: what still comes is ignored */
  agent_reader rd;
  bytes q;
  uint64_t answer_by, heard_at, ping_at, kill_at;
  uint64_t seen_at; /* when the timers were last looked at (STALLED_MS) */
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
  agent_job j = {AGENT_PROTO_VERSION, (char *)cwd, o->argv,  argc, env.vars,
                 env.common,          ranks,       (size_t)n};
  if (ranks && ranks[n - 1].nvars == RANK_ENV_PER_RANK) rc = agent_put_job(q, &j);
  free_ranks(ranks, n);
  rank_env_free(&env);
  return rc;
}

/* Queues the JOB frame.  0; or -1 after saying why. */
static int queue_job(launch_host *h, session *s) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) {
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0,
                       "host '%s': cannot start its ranks: hvdrun's "
                       "working directory: %s",
                       name_of(h), strerror(errno));
    return -1;
  }
  if (put_job(h, cwd, &s->q) == 0) return 0;
  launch_host_failed(h, HVDRUN_EXIT_HOST, 0,
                     "host '%s': cannot start its ranks: out of memory, "
                     "or its environment and arguments exceed %u bytes",
                     name_of(h), HVD_FRAME_CONTROL_MAX);
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

/* ---- the way to the agent: a pipe, or the frames of the relaying agent ---- */

static void put(launch_host *h, agent_msg m);

/* A relayed session's waiting bytes go down now, inside TO frames of the
 * session it runs through (which passes them on in turn when it is
 * relayed too); gone when that one's stdin is closed. */
static void pass_down(launch_host *h) {
  session *s = h->impl, *via = h->via ? h->via->impl : NULL;
  while (bytes_pending(&s->q) > 0) {
    size_t n = bytes_pending(&s->q);
    if (n > AGENT_OUTPUT_MAX) n = AGENT_OUTPUT_MAX;
    agent_msg m = {.type = AGENT_TO, .id = s->id, .data = (uint8_t *)s->q.buf + s->q.off, .len = n};
    if (!via || !via->in_open || agent_put_msg(&via->q, &m) < 0) n = bytes_pending(&s->q);
    bytes_consume(&s->q, n);
  }
  if (via && h->via->via) pass_down(h->via);
}

/* What was appended to h's queue goes on its way: a pipe's when poll()
 * says it takes more, a relayed session's now. */
static void sent(launch_host *h) {
  if (h->via) pass_down(h);
}

static void close_stdin(launch_host *h) {
  session *s = h->impl;
  if (!s->in_open) return;
  if (h->via) {
    sent(h);
    put(h->via, (agent_msg){.type = AGENT_CLOSE, .id = s->id});
  } else {
    bytes_write(&s->q, s->child.in_fd); /* the last frames, if they fit */
    close(s->child.in_fd);
    s->child.in_fd = -1;
  }
  s->in_open = 0;
}

/* The host failed: nothing more is taken from this session. */
static void kill_session(launch_host *h) {
  session *s = h->impl;
  s->failed = 1;
  close_stdin(h);
  if (h->via)
    put(h->via, (agent_msg){.type = AGENT_KILL, .id = s->id, .num = SIGKILL});
  else if (s->child.pid > 0 && !s->child.reaped)
    kill(-s->child.pid, SIGKILL);
  if (s->state != S_GONE) s->state = S_CLOSING;
}

/* The host's ranks are done, and the sessions its agent started are over. */
static int ranks_done(const launch_host *h) {
  const session *s = h->impl;
  for (int i = 0; i < h->spec->nranks; i++) {
    const launch_rank *r = &h->ranks[i];
    if (r->state != RANK_DONE || r->out.open || r->err.open) return 0;
  }
  for (int k = 0; k < s->nkids; k++) {
    const session *ks = s->kids[k]->impl;
    if (ks && ks->state != S_GONE) return 0;
  }
  return 1;
}

/* For a relayed session's failure to start: where its ssh ran. */
static void relay_hint(const launch_host *h, char *buf, size_t cap) {
  buf[0] = '\0';
  if (h->via)
    snprintf(buf, cap,
             " (its session started on %s, through hvdrun's agent there: beyond "
             "--launch-fanout hosts, the hosts start each other's sessions; --launch-fanout 0 "
             "starts every session from here)",
             name_of(h->via));
}

/* The session ended: what that means depends on how far it got. */
static void judge_end(launch_host *h, session *s) {
  char how[160], text[SAID_MAX], hint[HVD_HOSTNAME_MAX + 200];
  proc_exit e = h->via ? s->end : proc_exit_of(&s->child);
  relay_hint(h, hint, sizeof hint);
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
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0,
                       "hvdrun's agent could not start on %s: %s; "
                       "hvdrun must be installed at the same path on every host",
                       name_of(h), text[0] ? text : how);
  else if (s->state == S_CONNECTING)
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0, "host '%s': cannot start its ranks: %s%s%s%s",
                       name_of(h), how, text[0] ? ": " : "", text, hint);
  else if (!ranks_done(h))
    launch_host_failed(h, HVDRUN_EXIT_HOST, 1,
                       "host %s: lost contact with hvdrun's agent "
                       "(the %s session ended: %s)",
                       name_of(h), s->kind->name, text[0] ? text : how);
  else if (!proc_exit_ok(e))
    launch_say(h, 0, "host %s: %s", name_of(h), how);
}

/* ---- frames from the agent ---- */

static void protocol_error(launch_host *h) {
  launch_host_failed(h, HVDRUN_EXIT_HOST, 1, "protocol error from hvdrun's agent on %s: %s",
                     name_of(h), hvd_last_error());
  kill_session(h);
}

static void on_hello(launch_host *h, session *s, const agent_msg *m) {
  if (m->num != AGENT_PROTO_VERSION) {
    hvd__err(HVD_E_PROTOCOL,
             "it speaks version %u, this hvdrun %u: install the same hvd on "
             "every host",
             m->num, AGENT_PROTO_VERSION);
    protocol_error(h);
    return;
  }
  s->state = S_UP;
  launch_say(h, 0, "host %s: hvdrun's agent is up (its host calls itself %s)", name_of(h), m->text);
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

static void on_session_output(void *ctx, int stream, const char *data, size_t n);
static void relayed_end(launch_host *h, proc_exit e);

/* FROM, ENDED: news of a session this host's agent started. */
static const char *on_relayed(launch_host *h, session *s, const agent_msg *m) {
  launch_host *kid = NULL;
  for (int k = 0; k < s->nkids && !kid; k++)
    if (((session *)s->kids[k]->impl)->id == m->id) kid = s->kids[k];
  (void)h;
  if (!kid || ((session *)kid->impl)->state == S_GONE)
    return "news of a session its agent did not start, or that ended";
  if (m->type == AGENT_FROM)
    on_session_output(kid, m->stream, (const char *)m->data, m->len);
  else
    relayed_end(kid, m->exit);
  return NULL;
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
    kill_session(h);
  } else if (m.type == AGENT_FROM || m.type == AGENT_ENDED)
    why = on_relayed(h, s, &m);
  else
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

/* ---- the end of a session ---- */

/* The session is over; the sessions its agent started ended with it. */
static void gone(launch_host *h) {
  session *s = h->impl;
  s->state = S_GONE;
  s->in_open = 0;
  for (int k = 0; k < s->nkids; k++) {
    launch_host *kid = s->kids[k];
    session *ks = kid->impl;
    if (!ks || ks->state == S_GONE) continue;
    if (!ks->failed)
      launch_host_failed(kid, HVDRUN_EXIT_HOST, 1,
                         "host %s: lost contact with hvdrun's agent "
                         "(its session ran through the agent on %s, which is gone)",
                         name_of(kid), name_of(h));
    ks->failed = 1;
    gone(kid);
  }
}

/* ENDED: the relaying agent reaped the session's process (after passing
 * on the last of its bytes). */
static void relayed_end(launch_host *h, proc_exit e) {
  session *s = h->impl;
  s->end = e;
  if (!s->failed) judge_end(h, s);
  on_session_output(h, PROC_STDOUT, NULL, 0);
  on_session_output(h, PROC_STDERR, NULL, 0);
  gone(h);
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

/* Asks the agent on h->via to start h's session with cmd's command
 * line.  0, or -1 with errno. */
static int spawn_via(launch_host *h, session *s, const session_cmd *cmd) {
  launch_host *via = h->via;
  session *vs = via->impl;
  size_t argc = 0;
  if (!vs || vs->failed || !vs->in_open) {
    errno = ECONNABORTED; /* its agent was lost before it could start this one */
    return -1;
  }
  if (vs->nkids == vs->cap_kids) {
    int cap = vs->cap_kids ? 2 * vs->cap_kids : 8;
    launch_host **kids = realloc(vs->kids, (size_t)cap * sizeof *kids);
    if (!kids) return -1;
    vs->kids = kids;
    vs->cap_kids = cap;
  }
  while (cmd->argv[argc]) argc++;
  agent_spawn sp = {s->id, cmd->argv, argc};
  if (agent_put_spawn(&vs->q, &sp) < 0) {
    errno = E2BIG;
    return -1;
  }
  vs->kids[vs->nkids++] = h;
  sent(via);
  sent(h); /* the JOB, after the SPAWN */
  return 0;
}

/* Starts the session's process, here or through the agent on h->via. */
static int spawn(launch_host *h, session *s, session_cmd *cmd) {
  if (session_self(cmd->self) < 0 || s->kind->build(h, cmd) < 0) return -1;
  if (h->via) return spawn_via(h, s, cmd);
  if (proc_spawn(&s->child, cmd->argv, environ, 1) < 0) return -1;
  s->in_open = 1;
  return 0;
}

int session_start(launch_host *h, const session_kind *kind) {
  char prefix[HVD_HOSTNAME_MAX + 16], by[HVD_HOSTNAME_MAX + 64] = "";
  session_cmd cmd;
  session *s = calloc(1, sizeof *s);
  if (!s) return -1;
  h->impl = s;
  s->kind = kind;
  s->id = (uint32_t)h->spec->first;
  s->child.in_fd = s->child.exec_fd = s->child.out_fd[PROC_STDOUT] = s->child.out_fd[PROC_STDERR] =
      -1;
  s->state = S_GONE;
  agent_reader_init(&s->rd, AGENT_FROM_AGENT);
  snprintf(prefix, sizeof prefix, "hvdrun: host %s: ", name_of(h));
  output_stream_init(&s->err, prefix, h->ctx->err);
  if (queue_job(h, s) < 0) return 0;
  memset(&cmd, 0, sizeof cmd);
  s->in_open = h->via != NULL; /* the JOB goes down with the SPAWN */
  if (spawn(h, s, &cmd) < 0) {
    s->in_open = 0;
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0,
                       "host '%s': cannot start its ranks: cannot "
                       "start '%s'%s%s: %s",
                       name_of(h), kind->program(h), h->via ? " on " : "",
                       h->via ? name_of(h->via) : "", strerror(errno));
  } else {
    uint64_t now = hvd__now_ms();
    s->state = S_CONNECTING;
    s->answer_by = now + (uint64_t)h->ctx->opt->start_timeout * 1000;
    s->ping_at = now + PING_MS;
    if (h->via)
      snprintf(by, sizeof by, " on %s, through hvdrun's agent there,", name_of(h->via));
    else
      snprintf(by, sizeof by, " (pid %d)", (int)s->child.pid);
    launch_say(h, 0, "host %s: %s%s starts hvdrun's agent: %s", name_of(h), kind->name, by,
               cmd.what);
  }
  free(cmd.words);
  free(cmd.argv);
  return 0;
}

static void put(launch_host *h, agent_msg m) {
  session *s = h->impl;
  if (!s || !s->in_open) return;
  if (agent_put_msg(&s->q, &m) < 0)
    kill_session(h); /* out of memory */
  else
    sent(h);
}

void session_signal(launch_host *h, int sig) {
  put(h, (agent_msg){.type = AGENT_SIGNAL, .num = (uint32_t)sig});
}

size_t session_prepare(launch_host *h, struct pollfd *fds, uint64_t now) {
  session *s = h->impl;
  size_t n = 0;
  int streams = 1 << PROC_STDERR;
  if (!s) return 0;
  if (launch_output_full(h))
    s->heard_at = now; /* not listening: the silence is ours */
  else
    streams |= 1 << PROC_STDOUT;
  s->in_polled = s->polled = 0;
  if (h->via) return 0; /* its bytes come and go through the session of h->via */
  s->in_polled = s->in_open && bytes_pending(&s->q) > 0;
  if (s->in_polled) fds[n++] = (struct pollfd){s->child.in_fd, POLLOUT, 0};
  s->polled = proc_poll_add(&s->child, streams, fds + n);
  return n + s->polled;
}

void session_dispatch(launch_host *h, const struct pollfd *fds, size_t n) {
  session *s = h->impl;
  size_t at = 0;
  if (!s || h->via) return;
  if (s->in_polled && n > 0) {
    /* A failed write: the session is going; its end will say why. */
    if (fds[0].revents && bytes_write(&s->q, s->child.in_fd) < 0) close_stdin(h);
    at = 1;
  }
  proc_poll_dispatch(&s->child, fds + at, n - at, on_session_output, h);
}

/* How long the agent may say nothing (HOROVOD_AGENT_TIMEOUT_SECONDS); the
 * agent reads the same from the job's environment. */
static uint64_t silence_ms(const launch_host *h) {
  return (uint64_t)h->ctx->opt->agent_timeout * 1000;
}

uint64_t session_deadline(const launch_host *h) {
  const session *s = h->impl;
  uint64_t d = HVD__NEVER;
  if (!s || s->state == S_GONE) return d;
  if (s->state == S_CONNECTING && !s->failed) d = s->answer_by;
  uint64_t silence = s->heard_at + silence_ms(h);
  if (s->state == S_UP && !s->failed && silence < d) d = silence;
  if (s->in_open && s->ping_at < d) d = s->ping_at;
  if (s->kill_at && s->kill_at < d) d = s->kill_at;
  return d;
}

void session_expire(launch_host *h, uint64_t now) {
  char text[SAID_MAX];
  session *s = h->impl;
  if (!s || s->state == S_GONE) return;
  if (s->seen_at && now > s->seen_at + STALLED_MS) s->heard_at += now - s->seen_at;
  s->seen_at = now;
  if (s->state == S_CONNECTING && !s->failed && now >= s->answer_by) {
    said_text(s, text, sizeof text);
    launch_host_failed(h, HVDRUN_EXIT_HOST, 0,
                       "host '%s': cannot start its ranks: no answer "
                       "within %d s%s%s",
                       name_of(h), h->ctx->opt->start_timeout, text[0] ? ": " : "", text);
    kill_session(h);
  }
  if (s->state == S_UP && !s->failed && now >= s->heard_at + silence_ms(h)) {
    launch_host_failed(h, HVDRUN_EXIT_HOST, 1,
                       "host %s: lost contact with hvdrun's agent "
                       "(no word for %d s)",
                       name_of(h), h->ctx->opt->agent_timeout);
    kill_session(h);
  }
  if (s->in_open && now >= s->ping_at) {
    put(h, (agent_msg){.type = AGENT_PING});
    s->ping_at = now + PING_MS;
  }
  if (s->state == S_UP && ranks_done(h)) { /* the agent leaves by itself now */
    close_stdin(h);
    s->state = S_CLOSING;
    s->kill_at = now + SESSION_EXIT_MS;
  }
  if (s->kill_at && now >= s->kill_at) {
    kill_session(h);
    s->kill_at = 0;
  }
}

int session_reaped(launch_host *h, pid_t pid, int status) {
  session *s = h->impl;
  if (!s || h->via || s->child.pid != pid || s->child.reaped) return 0;
  proc_reaped(&s->child, status);
  proc_drain(&s->child, PROC_BOTH, on_session_output, h); /* its last frames and words */
  if (!s->failed) judge_end(h, s);
  proc_close(&s->child, on_session_output, h);
  gone(h);
  return 1;
}

int session_busy(const launch_host *h) {
  const session *s = h->impl;
  return s && s->state != S_GONE;
}

void session_close(launch_host *h) {
  session *s = h->impl;
  if (!s) return;
  close_stdin(h);
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
  if (!h->via && s->child.pid > 0 && !s->child.reaped) {
    kill_session(h);
    reap_killed(s);
  }
  s->failed = 1;
  proc_close(&s->child, on_session_output, h);
  output_stream_end(&s->err);
  agent_reader_free(&s->rd);
  bytes_free(&s->q);
  free(s->kids);
  free(s);
  h->impl = NULL;
}
