/*
 * job.c -- hvdrun's event loop and the job's life (job.h).
 *
 * Everything happens in one thread around one poll(): the self-pipe of
 * signals (SIGCHLD, SIGINT, SIGTERM, SIGHUP), every rank's stdout, stderr
 * and exec-status pipes, and the rendezvous server's sockets.  Every
 * timed step has a deadline that becomes poll()'s timeout, so hvdrun
 * never waits on anything without one.
 *
 * The job moves through phases, only ever forward:
 *
 *   RUN     ranks running
 *   LINGER  every rank exited with 0, but something they started still
 *           holds their output pipes: give it LINGER_MS
 *   GRACE   a rank failed: the others get GRACE_MS to notice the lost
 *           peer and print their own errors
 *   TERM    SIGTERM sent to every rank's process group
 *   KILL    SIGKILL sent; what is left of the output is drained
 *   DONE    stop waiting
 *
 * The job is over when every rank is reaped and every pipe is at end of
 * file, or at DONE, whichever comes first.
 */
#include "job.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "rank_env.h"
#include "procs.h"
#include "rdzv_server.h"
#include "signals.h"
#include "transport/shm.h"

#define GRACE_MS 2000
#define LINGER_MS 1000
#define TERM_AFTER_FAILURE_MS 1500
#define TERM_AFTER_SIGNAL_MS 2000
#define DRAIN_MS 500

typedef enum { PHASE_RUN, PHASE_LINGER, PHASE_GRACE, PHASE_TERM, PHASE_KILL, PHASE_DONE } phase;

/* What a poll slot belongs to: a rank's pipe is rank * 3 + SLOT_OUT/ERR/EXEC;
 * hvdrun's own descriptors are negative. */
enum { SLOT_OUT, SLOT_ERR, SLOT_EXEC };
enum { SLOT_SIGNALS = -1, SLOT_STDOUT = -2, SLOT_STDERR = -3 };

typedef struct {
  const hvdrun_options *opt;
  const rank_place *places;
  proc *procs;
  int started; /* procs[0..started) were spawned */
  int running; /* spawned and not reaped yet */
  rdzv_server *rdzv;
  int sig_fd;
  output_sink out, err;
  phase phase;
  uint64_t phase_end;
  int exit_code; /* -1 until a failure or a signal decides it */
  int interrupted; /* a signal asked hvdrun to stop */
  struct pollfd *fds;
  int *slot_owner; /* for the ranks' slots: rank * 3 + SLOT_* */
  size_t fds_cap, nfds, rdzv_first, rdzv_count;
  char shm_name[HVD_SHM_NAME_MAX]; /* the ranks' segment; "" before the secret */
} job;

/* Says "hvdrun: ..." on stderr: always, or only under --verbose.  It
 * queues behind the forwarded lines, so the order is kept and no line is
 * cut. */
static void say(job *j, int always, const char *fmt, ...) HVD__PRINTF(3, 4);
static void say(job *j, int always, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  if (!always && !j->opt->verbose) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  output_sink_printf(&j->err, "hvdrun: %s", msg);
}

/* ---- phases ---- */

static void signal_all(job *j, int sig) {
  for (int r = 0; r < j->started; r++) proc_signal_group(&j->procs[r], sig);
}

static void enter(job *j, phase p, int ms) {
  j->phase = p;
  j->phase_end = ms < 0 ? HVD__NEVER : hvd__deadline_in(ms);
}

static void enter_term(job *j, int ms) {
  if (j->running > 0) say(j, 0, "sending SIGTERM to the %d ranks still running", j->running);
  signal_all(j, SIGTERM);
  signal_all(j, SIGCONT); /* a stopped rank acts on SIGTERM only once continued */
  enter(j, PHASE_TERM, ms);
}

static void enter_kill(job *j) {
  if (j->running > 0) say(j, 0, "sending SIGKILL to the %d ranks still running", j->running);
  signal_all(j, SIGKILL);
  enter(j, PHASE_KILL, DRAIN_MS);
}

/* A rank failed, or hvdrun could not start one: the first failure sets
 * the exit status and starts the countdown. */
static void fail(job *j, int code) {
  if (j->phase != PHASE_RUN) return;
  j->exit_code = code;
  enter(j, PHASE_GRACE, GRACE_MS);
}

static void on_deadline(job *j) {
  switch (j->phase) {
    case PHASE_LINGER:
    case PHASE_GRACE: enter_term(j, TERM_AFTER_FAILURE_MS); break;
    case PHASE_TERM: enter_kill(j); break;
    case PHASE_KILL: enter(j, PHASE_DONE, -1); break;
    default: break;
  }
}

static int streams_open(const job *j) {
  for (int r = 0; r < j->started; r++)
    if (j->procs[r].out.fd >= 0 || j->procs[r].err.fd >= 0) return 1;
  return 0;
}

static int job_over(const job *j) {
  return j->phase == PHASE_DONE || (j->running == 0 && !streams_open(j));
}

/* ---- ranks exiting ---- */

static void report_exit(job *j, const proc *p, int always) {
  char how[128];
  const char *prog = j->opt->argv[0];
  if (p->exec_errno && p->setup_failed)
    say(j, always, "rank %d: cannot prepare to run '%s': %s", p->rank, prog,
        strerror(p->exec_errno));
  else if (p->exec_errno)
    say(j, always, "cannot run '%s': %s", prog, strerror(p->exec_errno));
  else {
    proc_describe_exit(p, how, sizeof how);
    say(j, always, "rank %d (pid %d) %s", p->rank, (int)p->pid, how);
  }
}

/* Forwards what the rank left in its pipes, so its last words come
 * before hvdrun's report.  Bounded: a process it left behind may keep
 * writing. */
static void drain_some(output_stream *st) {
  for (int i = 0; i < 16 && st->fd >= 0 && !output_sink_full(st->sink); i++)
    if (output_stream_read(st) == 0) return;
}

static void on_rank_exit(job *j, proc *p) {
  drain_some(&p->out);
  drain_some(&p->err);
  if (proc_succeeded(p)) {
    report_exit(j, p, 0);
    return;
  }
  report_exit(j, p, j->phase == PHASE_RUN); /* the first failure is the news */
  fail(j, proc_exit_code(p));
}

static proc *find_rank(job *j, pid_t pid) {
  for (int r = 0; r < j->started; r++)
    if (j->procs[r].pid == pid && !j->procs[r].reaped) return &j->procs[r];
  return NULL;
}

static void reap(job *j) {
  int status;
  pid_t pid;
  while ((pid = procs_reap_one(&status)) > 0) {
    proc *p = find_rank(j, pid);
    if (!p) continue;
    p->reaped = 1;
    p->status = status;
    j->running--;
    proc_read_exec_status(p); /* the child wrote any report before it exited */
    on_rank_exit(j, p);
  }
  if (j->running == 0 && j->phase == PHASE_RUN && streams_open(j))
    enter(j, PHASE_LINGER, LINGER_MS);
}

/* ---- signals to hvdrun ---- */

static void on_stop_signal(job *j, int sig, int count) {
  if (j->exit_code < 0) j->exit_code = 128 + sig;
  j->interrupted = 1;
  if (j->phase < PHASE_TERM && count == 1) {
    say(j, 0, "got signal %d (%s): stopping the job", sig, strsignal(sig));
    enter_term(j, TERM_AFTER_SIGNAL_MS);
  } else if (j->phase < PHASE_KILL) { /* asked twice: no more waiting */
    enter_kill(j);
  }
}

static void on_signals(job *j) {
  signals_seen seen = {0, 0, 0};
  signals_drain(j->sig_fd, &seen);
  if (seen.child) reap(j);
  if (seen.stop_count) on_stop_signal(j, seen.stop_sig, seen.stop_count);
}

/* ---- the loop ---- */

static void add_slot(job *j, int fd, short events, int owner) {
  j->fds[j->nfds] = (struct pollfd){fd, events, 0};
  j->slot_owner[j->nfds++] = owner;
}

/* A rank's pipe is read only while its sink is not backed up. */
static void add_stream(job *j, const output_stream *st, int owner) {
  if (st->fd >= 0 && !output_sink_full(st->sink)) add_slot(j, st->fd, POLLIN, owner);
}

static void add_sink(job *j, const output_sink *s, int owner) {
  if (output_sink_wants_write(s)) add_slot(j, s->fd, POLLOUT, owner);
}

static void prepare(job *j, uint64_t now) {
  j->nfds = 0;
  add_slot(j, j->sig_fd, POLLIN, SLOT_SIGNALS);
  add_sink(j, &j->out, SLOT_STDOUT);
  add_sink(j, &j->err, SLOT_STDERR);
  for (int r = 0; r < j->started; r++) {
    proc *p = &j->procs[r];
    add_stream(j, &p->out, r * 3 + SLOT_OUT);
    add_stream(j, &p->err, r * 3 + SLOT_ERR);
    if (p->exec_fd >= 0) add_slot(j, p->exec_fd, POLLIN, r * 3 + SLOT_EXEC);
  }
  j->rdzv_first = j->nfds;
  j->rdzv_count = rdzv_server_prepare(j->rdzv, j->fds + j->nfds, now);
  j->nfds += j->rdzv_count;
}

static void dispatch_rank(job *j, int owner) {
  proc *p = &j->procs[owner / 3];
  switch (owner % 3) {
    case SLOT_OUT: output_stream_read(&p->out); break;
    case SLOT_ERR: output_stream_read(&p->err); break;
    default: proc_read_exec_status(p); break;
  }
}

static void dispatch(job *j) {
  int signals = 0;
  for (size_t i = 0; i < j->rdzv_first; i++) {
    if (!j->fds[i].revents) continue;
    switch (j->slot_owner[i]) {
      case SLOT_SIGNALS: signals = 1; break;
      case SLOT_STDOUT: output_sink_write(&j->out); break;
      case SLOT_STDERR: output_sink_write(&j->err); break;
      default: dispatch_rank(j, j->slot_owner[i]); break;
    }
  }
  rdzv_server_dispatch(j->rdzv, j->fds + j->rdzv_first, j->rdzv_count);
  if (signals) on_signals(j); /* last: reaping reads the exec pipes */
}

static void turn(job *j) {
  uint64_t now = hvd__now_ms();
  prepare(j, now);
  uint64_t wake = rdzv_server_deadline(j->rdzv);
  if (j->phase_end < wake) wake = j->phase_end;
  int n = poll(j->fds, j->nfds, hvd__ms_left(wake));
  if (n < 0 && errno != EINTR) {
    say(j, 1, "poll: %s", strerror(errno));
    if (j->exit_code < 0) j->exit_code = 1;
    enter_kill(j);
  }
  if (n > 0) dispatch(j);
  now = hvd__now_ms();
  rdzv_server_expire(j->rdzv, now);
  if (now >= j->phase_end) on_deadline(j);
  output_sink_write(&j->out); /* what this turn queued, as far as it goes now */
  output_sink_write(&j->err);
}

/* ---- start and finish ---- */

/* The job's secret and the rendezvous server; the ranks' environment. */
static int start_rendezvous(job *j, rank_env *env) {
  char hostname[256] = "localhost", secret[128];
  hvd_secret key;
  int port;
  if (hvd__secret_generate(&key) < 0 || hvd__secret_encode(&key, secret, sizeof secret) < 0 ||
      rdzv_server_start((uint32_t)j->opt->np, &key, &j->err, j->opt->verbose, &j->rdzv,
                        &port) < 0) {
    say(j, 1, "cannot start the rendezvous: %s", hvd_last_error());
    return -1;
  }
  hvd__shm_name(&key, 0, j->shm_name, sizeof j->shm_name);
  say(j, 0, "rendezvous listening on 127.0.0.1:%d", port);
  gethostname(hostname, sizeof hostname - 1);
  rank_env_job ej = {j->opt, j->places, port, secret, hostname};
  if (rank_env_init(env, &ej) < 0) {
    say(j, 1, "out of memory building the ranks' environment");
    return -1;
  }
  return 0;
}

static void start_ranks(job *j, rank_env *env) {
  for (int r = 0; r < j->opt->np; r++) {
    if (proc_spawn(&j->procs[r], r, j->opt->argv, rank_env_for(env, r), &j->out, &j->err)) {
      say(j, 1, "cannot start rank %d: %s", r, strerror(errno));
      j->exit_code = 1;
      enter_term(j, TERM_AFTER_FAILURE_MS);
      return;
    }
    j->started++;
    j->running++;
    say(j, 0, "started rank %d (pid %d): %s", r, (int)j->procs[r].pid, j->opt->argv[0]);
  }
}

static int job_init(job *j, const hvdrun_options *o, const rank_place *places) {
  rank_env env;
  memset(j, 0, sizeof *j);
  j->opt = o;
  j->places = places;
  j->exit_code = -1;
  j->sig_fd = -1;
  j->phase_end = HVD__NEVER;
  output_sink_init(&j->out, STDOUT_FILENO);
  output_sink_init(&j->err, STDERR_FILENO);
  output_sink_pair(&j->out, &j->err);
  procs_raise_fd_limit();
  j->sig_fd = signals_install();
  if (j->sig_fd < 0) {
    say(j, 1, "cannot install signal handlers: %s", strerror(errno));
    return -1;
  }
  if (start_rendezvous(j, &env) < 0) return -1;
  j->procs = calloc((size_t)o->np, sizeof *j->procs);
  j->fds_cap = 3 + 3 * (size_t)o->np + rdzv_server_poll_max(j->rdzv);
  j->fds = calloc(j->fds_cap, sizeof *j->fds);
  j->slot_owner = calloc(j->fds_cap, sizeof *j->slot_owner);
  if (!j->procs || !j->fds || !j->slot_owner) {
    say(j, 1, "out of memory for %d ranks", o->np);
    rank_env_free(&env);
    return -1;
  }
  start_ranks(j, &env);
  rank_env_free(&env);
  return 0;
}

/* Writes what is left for as long as the reader takes it, as a pipe
 * would; a signal to hvdrun ends the wait, and after one already stopped
 * the job the reader gets DRAIN_MS more. */
static void drain_sinks(job *j) {
  uint64_t deadline = j->interrupted ? hvd__deadline_in(DRAIN_MS) : HVD__NEVER;
  while (output_sink_wants_write(&j->out) || output_sink_wants_write(&j->err)) {
    struct pollfd p[3] = {
        {j->out.fd, (short)(output_sink_wants_write(&j->out) ? POLLOUT : 0), 0},
        {j->err.fd, (short)(output_sink_wants_write(&j->err) ? POLLOUT : 0), 0},
        {j->sig_fd, POLLIN, 0}};
    int n = poll(p, 3, hvd__ms_left(deadline));
    if ((n < 0 && errno != EINTR) || (n == 0 && deadline != HVD__NEVER)) return;
    if (p[2].revents) {
      signals_seen seen = {0, 0, 0};
      signals_drain(j->sig_fd, &seen);
      if (seen.stop_count) return;
    }
    output_sink_write(&j->out);
    output_sink_write(&j->err);
  }
}

/* After the loop: give up on what is left, then free everything. */
static int job_finish(job *j) {
  if (j->exit_code > 0 && j->phase < PHASE_KILL)
    signal_all(j, SIGKILL); /* a failed job leaves nothing behind */
  for (int r = 0; r < j->started; r++) {
    proc *p = &j->procs[r];
    if (!p->reaped) say(j, 1, "rank %d (pid %d) did not exit even after SIGKILL", r, (int)p->pid);
    output_stream_close(&p->out);
    output_stream_close(&p->err);
    if (p->exec_fd >= 0) close(p->exec_fd);
  }
  /* Rank 0 unlinks the shared memory once every rank mapped it; a job
   * that ended before then would leave it in /dev/shm. */
  if (j->shm_name[0]) shm_unlink(j->shm_name);
  drain_sinks(j);
  output_sink_free(&j->out);
  output_sink_free(&j->err);
  rdzv_server_free(j->rdzv);
  if (j->sig_fd >= 0) close(j->sig_fd);
  free(j->procs);
  free(j->fds);
  free(j->slot_owner);
  return j->exit_code < 0 ? 0 : j->exit_code;
}

int job_run(const hvdrun_options *o, const rank_place *places) {
  job j;
  if (job_init(&j, o, places) < 0) {
    j.exit_code = 1;
    return job_finish(&j);
  }
  while (!job_over(&j)) turn(&j);
  return job_finish(&j);
}
