/*
 * agent.c -- hvdrun --agent: a host's ranks for the hvdrun at the other
 * end of the ssh session (agent.h).
 *
 * One poll() loop, like job.c's: the self-pipe of signals, stdin (frames
 * from hvdrun), stdout while frames wait to go, and every rank's pipes.
 * A rank's pipes are read only while little waits for hvdrun
 * (QUEUE_HIGH): a slow link holds the ranks back through their pipes
 * instead of growing the agent's memory.  The same holds for the
 * sessions to other hosts that hvdrun asks this agent to start and relay
 * (agent_relay.h: the launch tree).
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent_proto.h"
#include "agent_relay.h"
#include "common.h"
#include "env.h"
#include "procs.h"
#include "rank_env.h"
#include "signals.h"
#include "wire/auth.h"
#include "wire/shm_name.h"

#define PING_MS 1000
#define SILENCE_MS 4000    /* until the job says (HOROVOD_AGENT_TIMEOUT_SECONDS) */
#define KILL_AFTER_MS 2000 /* SIGTERM to SIGKILL */
#define GIVE_UP_MS 1000    /* after SIGKILL: the ranks' last reports, then go */
#define QUEUE_HIGH (1024 * 1024)
/* The loop turns at least every PING_MS: a longer gap means the machine
 * did not run this agent, and hvdrun's pings wait unread: not its silence. */
#define STALLED_MS (2 * PING_MS)

extern char **environ;

typedef struct agent agent;

typedef struct {
  agent *a;
  uint32_t rank;
  proc p;
  int reported; /* its EXITED is queued */
  size_t polled;
} agent_proc;

struct agent {
  agent_job job;
  int have_job;
  agent_proc *procs; /* job.nranks */
  relay relay;       /* the sessions it started for hvdrun */
  agent_reader rd;
  bytes q;
  int sig_fd;
  int in_open, out_ok;
  uint64_t heard_at, ping_at, kill_at, give_up_at;
  uint64_t silence_ms; /* hvdrun may say nothing this long */
  uint64_t seen_at;    /* when on_time() last ran (STALLED_MS) */
  int stopping;
  int exit_code;
  char host[256];
  struct pollfd *fds;
  size_t fds_cap;
  size_t nfds, in_slot, out_slot; /* slot numbers; 0 when not polled */
  size_t relay_first, relay_count;
};

static void queue(agent *a, agent_msg m);

/* ---- stopping ---- */

static void signal_all(agent *a, int sig) {
  for (size_t i = 0; a->procs && i < a->job.nranks; i++) proc_signal_group(&a->procs[i].p, sig);
}

/* Stops the ranks (SIGTERM now, SIGKILL later) and the agent after them. */
static void stop_ranks(agent *a) {
  if (a->stopping) return;
  a->stopping = 1;
  a->exit_code = 1;
  signal_all(a, SIGTERM);
  signal_all(a, SIGCONT);
  relay_close_all(&a->relay); /* their agents stop their ranks in turn */
  a->kill_at = hvd__deadline_in(KILL_AFTER_MS);
  a->give_up_at = a->kill_at + GIVE_UP_MS;
}

/* stop_ranks(), saying why on stderr (which ssh takes to hvdrun, if it
 * is still there to read it). */
static void stop(agent *a, const char *fmt, ...) HVD__PRINTF(2, 3);
static void stop(agent *a, const char *fmt, ...) {
  va_list ap;
  if (a->stopping) return;
  va_start(ap, fmt);
  fprintf(stderr, "hvdrun --agent on %s: ", a->host);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, ": stopping the ranks\n");
  va_end(ap);
  stop_ranks(a);
}

/* The agent cannot go on: hvdrun hears why in an ERROR frame. */
static void fail(agent *a, const char *fmt, ...) HVD__PRINTF(2, 3);
static void fail(agent *a, const char *fmt, ...) {
  agent_msg m = {.type = AGENT_ERROR};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m.text, sizeof m.text, fmt, ap);
  va_end(ap);
  queue(a, m);
  stop_ranks(a);
}

static void queue(agent *a, agent_msg m) {
  if (a->out_ok && agent_put_msg(&a->q, &m) < 0 && m.type != AGENT_ERROR)
    fail(a, "out of memory for the frames to hvdrun");
}

/* The relay's frames to hvdrun. */
static void queue_up(void *arg, agent_msg m) { queue(arg, m); }

/* ---- the ranks ---- */

/* proc_output_fn: a rank's bytes, or the end of one of its pipes. */
static void on_rank_output(void *ctx, int stream, const char *data, size_t n) {
  agent_proc *ap = ctx;
  queue(ap->a, (agent_msg){.type = n ? AGENT_OUTPUT : AGENT_CLOSED,
                           .rank = ap->rank,
                           .stream = (uint8_t)stream,
                           .data = (const uint8_t *)data,
                           .len = n});
}

/* Starts one rank with the agent's environment, the job's over it, and
 * the rank's own over both. */
static void start_rank(agent *a, agent_proc *ap, const agent_rank *k) {
  size_t n = a->job.nenv + k->nvars;
  char **over = calloc(n + 1, sizeof *over), **envp = NULL;
  ap->a = a;
  ap->rank = k->rank;
  ap->p.in_fd = ap->p.exec_fd = ap->p.out_fd[PROC_STDOUT] = ap->p.out_fd[PROC_STDERR] = -1;
  if (over) {
    memcpy(over, a->job.env, a->job.nenv * sizeof *over);
    memcpy(over + a->job.nenv, k->vars, k->nvars * sizeof *over);
    envp = rank_env_merge(environ, over, n, 0);
  }
  errno = ENOMEM;
  if (envp && proc_spawn(&ap->p, a->job.argv, envp, 0) == 0) {
    queue(a, (agent_msg){.type = AGENT_STARTED, .rank = k->rank, .num = (uint32_t)ap->p.pid});
  } else {
    queue(a, (agent_msg){.type = AGENT_EXITED,
                         .rank = k->rank,
                         .exit = {PROC_NO_SETUP, errno ? errno : EIO}});
    ap->reported = 1;
  }
  free(envp);
  free(over);
}

/* hvdrun's HOROVOD_AGENT_TIMEOUT_SECONDS, which the job's environment
 * carries (hvdrun checked it; a value out of range keeps the default). */
static void take_silence(agent *a) {
  const hvd_param *p = &hvd__params[HVD_P_AGENT_TIMEOUT_SECONDS];
  size_t n = strlen(p->name);
  long v;
  for (size_t i = 0; i < a->job.nenv; i++) {
    const char *e = a->job.env[i];
    if (strncmp(e, p->name, n) == 0 && e[n] == '=' &&
        options_parse_int(e + n + 1, p->min, p->max, &v) == 0)
      a->silence_ms = (uint64_t)v * 1000;
  }
}

static void on_job(agent *a, const uint8_t *payload, size_t len) {
  if (agent_job_decode(payload, len, &a->job) < 0) {
    fail(a, "protocol error from hvdrun: %s", hvd_last_error());
    return;
  }
  a->have_job = 1;
  take_silence(a);
  if (a->job.version != AGENT_PROTO_VERSION) {
    fail(a, "hvdrun speaks version %u, its agent %u: install the same hvd on every host",
         a->job.version, AGENT_PROTO_VERSION);
    return;
  }
  if (chdir(a->job.cwd) != 0) {
    fail(a, "cannot change to directory '%s': %s", a->job.cwd, strerror(errno));
    return;
  }
  a->procs = calloc(a->job.nranks, sizeof *a->procs);
  if (!a->procs) {
    fail(a, "out of memory for %zu ranks", a->job.nranks);
    return;
  }
  for (size_t i = 0; i < a->job.nranks; i++) start_rank(a, &a->procs[i], &a->job.ranks[i]);
}

static void reap(agent *a) {
  int status;
  pid_t pid;
  while ((pid = procs_reap_one(&status)) > 0) {
    if (relay_reaped(&a->relay, pid, status)) continue;
    for (size_t i = 0; a->procs && i < a->job.nranks; i++) {
      agent_proc *ap = &a->procs[i];
      if (ap->p.pid != pid || ap->p.reaped) continue;
      proc_reaped(&ap->p, status);
      proc_drain(&ap->p, PROC_BOTH, on_rank_output, ap); /* its last words first */
      queue(a, (agent_msg){.type = AGENT_EXITED, .rank = ap->rank, .exit = proc_exit_of(&ap->p)});
      ap->reported = 1;
    }
  }
}

/* Every rank reported its exit and closed its pipes (or never ran). */
static int ranks_finished(const agent *a) {
  for (size_t i = 0; a->procs && i < a->job.nranks; i++) {
    const proc *p = &a->procs[i].p;
    if (!a->procs[i].reported || p->out_fd[PROC_STDOUT] >= 0 || p->out_fd[PROC_STDERR] >= 0)
      return 0;
  }
  return 1;
}

/* ---- hvdrun's frames ---- */

static int relayed_type(uint8_t type) {
  return type == AGENT_SPAWN || type == AGENT_TO || type == AGENT_CLOSE || type == AGENT_KILL;
}

static void on_frame(agent *a) {
  agent_msg m;
  a->heard_at = hvd__now_ms();
  if (a->rd.type == AGENT_PING) return;
  if (relayed_type(a->rd.type)) {
    if (relay_on_frame(&a->relay, a->rd.type, a->rd.payload, a->rd.len) < 0)
      fail(a, "protocol error from hvdrun: %s", hvd_last_error());
    return;
  }
  if (a->rd.type == AGENT_JOB && !a->have_job) {
    on_job(a, a->rd.payload, a->rd.len);
    return;
  }
  if (a->rd.type == AGENT_JOB)
    hvd__err(HVD_E_PROTOCOL, "a second JOB");
  else if (agent_msg_decode(a->rd.type, a->rd.payload, a->rd.len, &m) == 0) {
    signal_all(a, (int)m.num); /* SIGNAL, the one message left */
    return;
  }
  fail(a, "protocol error from hvdrun: %s", hvd_last_error());
}

static void read_stdin(agent *a) {
  static uint8_t buf[64 * 1024];
  ssize_t n = read(0, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    a->in_open = 0;
    if (!a->have_job || !ranks_finished(a) || !relay_done(&a->relay))
      stop(a, "its input from hvdrun ended (hvdrun stopped, or is gone)");
    return;
  }
  for (size_t at = 0; at < (size_t)n && !a->stopping;) {
    size_t used;
    int rc = agent_reader_feed(&a->rd, buf + at, (size_t)n - at, &used);
    at += used;
    if (rc < 0) fail(a, "protocol error from hvdrun: %s", hvd_last_error());
    if (rc <= 0) return;
    on_frame(a);
  }
}

static void write_stdout(agent *a) {
  if (bytes_write(&a->q, 1) == 0) return;
  a->out_ok = 0;
  stop(a, "hvdrun is gone (cannot write to it: %s)", strerror(errno));
}

/* ---- the loop ---- */

/* Room in fds for everything prepare() may add.  0, or -1. */
static int fds_room(agent *a) {
  size_t need = 3 + 3 * (a->procs ? a->job.nranks : 0) + relay_poll_max(&a->relay);
  if (need <= a->fds_cap) return 0;
  struct pollfd *fds = realloc(a->fds, need * sizeof *fds);
  if (!fds) return -1;
  a->fds = fds;
  a->fds_cap = need;
  return 0;
}

static void prepare(agent *a) {
  int read = bytes_pending(&a->q) < QUEUE_HIGH;
  int streams = read ? PROC_BOTH : 0;
  size_t n = 0;
  if (fds_room(a) < 0) { /* nothing can be watched: go, leaving nothing behind */
    fprintf(stderr, "hvdrun --agent on %s: out of memory for the poll set\n", a->host);
    a->exit_code = 1;
    a->give_up_at = hvd__now_ms();
    a->nfds = a->relay_count = 0;
    return;
  }
  a->fds[n++] = (struct pollfd){a->sig_fd, POLLIN, 0};
  a->in_slot = a->in_open ? n : 0; /* 0: not polled (slot 0 is the signals') */
  if (a->in_open) a->fds[n++] = (struct pollfd){0, POLLIN, 0};
  a->out_slot = a->out_ok && bytes_pending(&a->q) ? n : 0;
  if (a->out_slot) a->fds[n++] = (struct pollfd){1, POLLOUT, 0};
  for (size_t i = 0; a->procs && i < a->job.nranks; i++) {
    a->procs[i].polled = proc_poll_add(&a->procs[i].p, streams, a->fds + n);
    n += a->procs[i].polled;
  }
  a->relay_first = n;
  a->relay_count = relay_prepare(&a->relay, read, a->fds + n);
  a->nfds = n + a->relay_count;
}

static void dispatch(agent *a) {
  signals_seen seen = {0, 0, 0};
  struct pollfd *fds = a->fds;
  size_t at = 1 + (a->in_slot != 0) + (a->out_slot != 0);
  if (a->out_slot && fds[a->out_slot].revents) write_stdout(a);
  for (size_t i = 0; a->procs && i < a->job.nranks; i++) {
    proc_poll_dispatch(&a->procs[i].p, fds + at, a->procs[i].polled, on_rank_output, &a->procs[i]);
    at += a->procs[i].polled;
  }
  relay_dispatch(&a->relay, fds + a->relay_first, a->relay_count);
  /* Last: the JOB may start the ranks, SPAWN a session. */
  int stdin_ready = a->in_slot && fds[a->in_slot].revents, signals = fds[0].revents != 0;
  if (signals) signals_drain(a->sig_fd, &seen);
  if (seen.child) reap(a);
  if (seen.stop_count) stop(a, "got signal %d (%s)", seen.stop_sig, strsignal(seen.stop_sig));
  if (stdin_ready) read_stdin(a);
}

static uint64_t next_wake(const agent *a) {
  uint64_t wake = a->out_ok ? a->ping_at : HVD__NEVER;
  uint64_t silence = a->heard_at + a->silence_ms;
  if (a->in_open && !a->stopping && silence < wake) wake = silence;
  if (a->kill_at && a->kill_at < wake) wake = a->kill_at;
  if (a->give_up_at && a->give_up_at < wake) wake = a->give_up_at;
  return wake;
}

static void on_time(agent *a, uint64_t now) {
  if (a->seen_at && now > a->seen_at + STALLED_MS) a->heard_at += now - a->seen_at;
  a->seen_at = now;
  if (a->out_ok && now >= a->ping_at) {
    queue(a, (agent_msg){.type = AGENT_PING});
    a->ping_at = now + PING_MS;
  }
  if (a->in_open && !a->stopping && now >= a->heard_at + a->silence_ms)
    stop(a, "no word from hvdrun for %d s", (int)(a->silence_ms / 1000));
  if (a->kill_at && now >= a->kill_at) {
    signal_all(a, SIGKILL);
    a->kill_at = 0;
  }
}

static int over(const agent *a) {
  if (a->give_up_at && hvd__now_ms() >= a->give_up_at) return 1;
  int flushed = !a->out_ok || bytes_pending(&a->q) == 0;
  return (a->have_job || a->stopping) && ranks_finished(a) && relay_done(&a->relay) && flushed;
}

static void turn(agent *a) {
  prepare(a);
  int n = poll(a->fds, a->nfds, hvd__ms_left(next_wake(a)));
  if (n < 0 && errno != EINTR) stop(a, "poll: %s", strerror(errno));
  if (n > 0) dispatch(a);
  on_time(a, hvd__now_ms());
}

/* ---- start and end ---- */

static int agent_init(agent *a) {
  memset(a, 0, sizeof *a);
  a->in_open = a->out_ok = 1;
  relay_init(&a->relay, queue_up, a);
  if (gethostname(a->host, sizeof a->host - 1) != 0) strcpy(a->host, "?");
  agent_reader_init(&a->rd, AGENT_FROM_HVDRUN);
  procs_raise_fd_limit();
  a->fds = calloc(3, sizeof *a->fds); /* the ranks' slots come with the JOB */
  a->fds_cap = 3;
  a->sig_fd = signals_install(); /* also ignores SIGPIPE: a dead ssh is EPIPE */
  int fl0 = fcntl(0, F_GETFL), fl1 = fcntl(1, F_GETFL);
  if (!a->fds || a->sig_fd < 0 || fl0 < 0 || fl1 < 0 || fcntl(0, F_SETFL, fl0 | O_NONBLOCK) < 0 ||
      fcntl(1, F_SETFL, fl1 | O_NONBLOCK) < 0) {
    fprintf(stderr, "hvdrun --agent on %s: cannot set up: %s\n", a->host, strerror(errno));
    return -1;
  }
  uint64_t now = hvd__now_ms();
  a->heard_at = now;
  a->ping_at = now + PING_MS;
  a->silence_ms = SILENCE_MS;
  agent_msg hello = {.type = AGENT_HELLO, .num = AGENT_PROTO_VERSION};
  snprintf(hello.text, sizeof hello.text, "%s", a->host);
  queue(a, hello);
  return 0;
}

/* The host's shared-memory segment, named after its first rank: its
 * ranks unlink it once all mapped it, unless the job ended before. */
static void unlink_segment(const agent *a) {
  static const char key_var[] = "_HOROVOD_SECRET_KEY=";
  hvd_secret key;
  char name[HVD_SHM_NAME_MAX];
  uint32_t first = UINT32_MAX;
  for (size_t i = 0; i < a->job.nranks; i++)
    if (a->job.ranks[i].rank < first) first = a->job.ranks[i].rank;
  for (size_t i = 0; i < a->job.nenv && first != UINT32_MAX; i++) {
    if (strncmp(a->job.env[i], key_var, sizeof key_var - 1) != 0) continue;
    if (hvd__secret_decode(a->job.env[i] + sizeof key_var - 1, &key) < 0) return;
    hvd__shm_name(&key, (int)first, name, sizeof name);
    shm_unlink(name);
  }
}

static void ignore_output(void *ctx, int stream, const char *data, size_t n) {
  (void)ctx, (void)stream, (void)data, (void)n;
}

static void agent_free(agent *a) {
  for (size_t i = 0; a->procs && i < a->job.nranks; i++) {
    agent_proc *ap = &a->procs[i];
    if (!ap->p.reaped) proc_signal_group(&ap->p, SIGKILL); /* gave up waiting: no orphans */
    proc_close(&ap->p, ignore_output, ap);
  }
  if (a->have_job) unlink_segment(a);
  relay_free(&a->relay);
  free(a->procs);
  free(a->fds);
  agent_job_free(&a->job);
  agent_reader_free(&a->rd);
  bytes_free(&a->q);
  if (a->sig_fd >= 0) close(a->sig_fd);
}

int agent_main(void) {
  agent a;
  if (agent_init(&a) < 0) return 1;
  while (!over(&a)) turn(&a);
  agent_free(&a);
  return a.exit_code;
}
