/*
 * job.c -- hvdrun's event loop and the job's life (job.h).
 *
 * Everything happens in one thread around one poll(): the self-pipe of
 * signals (SIGCHLD, SIGINT, SIGTERM, SIGHUP), hvdrun's stdout and stderr
 * while lines wait for them, the descriptors of every host's backend
 * (launch.h: a local rank's pipes, an ssh session's), and the rendezvous
 * server's sockets.  Every timed step has a deadline that becomes poll()'s
 * timeout, so hvdrun never waits on anything without one.
 *
 * The job moves through phases, only ever forward:
 *
 *   RUN     ranks running
 *   LINGER  every rank exited with 0, but something they started still
 *           holds their output pipes: give it LINGER_MS
 *   GRACE   a rank failed: the others get GRACE_MS to notice the lost
 *           peer and print their own errors
 *   TERM    SIGTERM sent to every rank's process group, on every host
 *   KILL    SIGKILL sent; what is left of the output is drained
 *   CLOSE   the agents on other hosts are told the job is over (their
 *           stdin closes) and get CLOSE_MS to finish and go
 *   DONE    stop waiting
 *
 * The job is over when every rank's exit is known, every output stream
 * has ended and no backend holds anything more (an ssh session), or at
 * DONE, whichever comes first.
 *
 * An extension (job_int.h's job_ext: the elastic driver, job_elastic.c,
 * which sits above this file) may start and stop ranks while the job
 * runs: then a rank's failure is not the job's, the extension judges it
 * and ends the job, and then the phases go on as above.  This file calls
 * it only through its hooks.
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
#include "job_int.h"
#include "launch_tree.h"
#include "wire/shm_name.h"

/* job_say(): it queues behind the forwarded lines, so the order is kept
 * and no line is cut. */
void job_say(job *j, int always, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  if (!always && !j->ctx.opt->verbose) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  output_sink_printf(&j->err, "hvdrun: %s", msg);
}

/* ---- phases ---- */

static void signal_all(job *j, int sig) {
  for (int h = 0; h < j->nhosts; h++) j->hosts[h]->backend->signal(j->hosts[h], sig);
}

static void enter(job *j, phase p, int ms) {
  j->phase = p;
  j->phase_end = ms < 0 ? HVD__NEVER : hvd__deadline_in(ms);
}

static void enter_term(job *j, int ms) {
  if (j->undone > 0) job_say(j, 0, "sending SIGTERM to the %d ranks still running", j->undone);
  signal_all(j, SIGTERM);
  signal_all(j, SIGCONT); /* a stopped rank acts on SIGTERM only once continued */
  enter(j, PHASE_TERM, ms);
}

static void enter_kill(job *j) {
  if (j->undone > 0) job_say(j, 0, "sending SIGKILL to the %d ranks still running", j->undone);
  signal_all(j, SIGKILL);
  enter(j, PHASE_KILL, DRAIN_MS);
}

static int hosts_busy(const job *j) {
  for (int h = 0; h < j->nhosts; h++)
    if (j->hosts[h]->backend->busy(j->hosts[h])) return 1;
  return 0;
}

static void enter_close(job *j) {
  for (int h = 0; h < j->nhosts; h++) j->hosts[h]->backend->close(j->hosts[h]);
  enter(j, PHASE_CLOSE, CLOSE_MS);
}

void job_fail(job *j, int code) {
  if (j->phase != PHASE_RUN) return;
  j->exit_code = code;
  enter(j, PHASE_GRACE, GRACE_MS);
}

static void on_deadline(job *j) {
  switch (j->phase) {
    case PHASE_LINGER:
    case PHASE_GRACE: enter_term(j, TERM_AFTER_FAILURE_MS); break;
    case PHASE_TERM: enter_kill(j); break;
    case PHASE_KILL:
      if (hosts_busy(j))
        enter_close(j);
      else
        enter(j, PHASE_DONE, -1);
      break;
    case PHASE_CLOSE: enter(j, PHASE_DONE, -1); break;
    default: break;
  }
}

static int streams_open(const job *j) {
  for (int h = 0; h < j->nhosts; h++)
    for (int i = 0; i < j->hosts[h]->spec->nranks; i++)
      if (j->hosts[h]->ranks[i].out.open || j->hosts[h]->ranks[i].err.open) return 1;
  return 0;
}

/* 1 while an extension runs the job (it may start ranks again). */
static int ext_running(const job *j) { return j->ext && !j->ext->ops->ended(j->ext->arg); }

/* What the messages call a rank. */
static const char *rank_word(const job *j) { return j->ext ? j->ext->ops->rank_word : "rank"; }

static int job_over(const job *j) {
  if (ext_running(j) && j->phase == PHASE_RUN) return 0; /* ranks come and go */
  return j->phase == PHASE_DONE || (j->undone == 0 && !streams_open(j) && !hosts_busy(j));
}

/* ---- what the backends report ---- */

/* " on h2" when the job names hosts, else "". */
static const char *on_host(const job *j, const launch_rank *r, char *buf, size_t cap) {
  if (!j->ctx.name_hosts) return "";
  snprintf(buf, cap, " on %s", r->host->spec->name);
  return buf;
}

static void report_exit(job *j, const launch_rank *r, int always) {
  char on[HVD_HOSTNAME_MAX + 8], how[128];
  const char *prog = j->ctx.opt->argv[0], *where = on_host(j, r, on, sizeof on);
  const char *rank = rank_word(j);
  proc_exit e = r->exit;
  switch (e.how) {
    case PROC_NO_SETUP:
      job_say(j, always, "%s %d%s: cannot prepare to run '%s': %s", rank, r->rank, where, prog,
              strerror(e.value));
      break;
    case PROC_NO_EXEC:
      job_say(j, always, "cannot run '%s'%s: %s", prog, where, strerror(e.value));
      break;
    case PROC_NO_START:
      job_say(j, always, "cannot start %s %d%s: %s", rank, r->rank, where, strerror(e.value));
      break;
    case PROC_LOST: break; /* its host's failure said so */
    default:
      proc_exit_describe(e, how, sizeof how);
      job_say(j, always, "%s %d%s (pid %ld) %s", rank, r->rank, where, r->pid, how);
      break;
  }
}

void launch_started(launch_rank *r, long pid) {
  char on[HVD_HOSTNAME_MAX + 8];
  job *j = r->host->job;
  r->pid = pid;
  r->state = RANK_RUNNING;
  job_say(j, 0, "started %s %d%s (pid %ld): %s", rank_word(j), r->rank,
          on_host(j, r, on, sizeof on), pid, j->ctx.opt->argv[0]);
}

static void done(job *j, launch_rank *r, proc_exit e) {
  r->state = RANK_DONE;
  r->exit = e;
  j->undone--;
}

/* A rank killed by a signal while the others have their grace after an
 * error exit: no one here has signalled it yet, so most likely it is the
 * cause and the error its consequence, its news late (a remote agent
 * reports later than a local rank's pipe, and a loaded host later still).
 * The first such death is news too, and the job's exit code. */
static int killed_in_grace(job *j, proc_exit e) {
  return j->phase == PHASE_GRACE && e.how == PROC_KILLED && !j->killed_told;
}

void launch_exited(launch_rank *r, proc_exit e) {
  job *j = r->host->job;
  if (r->state == RANK_DONE) return;
  done(j, r, e);
  if (j->ext) { /* a rank's failure is not the job's: the extension decides */
    report_exit(j, r, !proc_exit_ok(e) && j->phase == PHASE_RUN && !r->host->kill_at);
    j->ext->ops->exited(j->ext->arg, r);
    return;
  }
  if (proc_exit_ok(e)) {
    report_exit(j, r, 0);
    return;
  }
  /* The first failure is the news; and that the program is missing on a
   * host, once per host. */
  int news = j->phase == PHASE_RUN || (e.how == PROC_NO_EXEC && !r->host->told_exec);
  if (e.how == PROC_NO_EXEC) r->host->told_exec = 1;
  if (killed_in_grace(j, e)) {
    news = 1;
    j->exit_code = proc_exit_code(e);
    j->killed_told = 1;
  }
  if (e.how == PROC_KILLED && j->phase == PHASE_RUN) j->killed_told = 1;
  report_exit(j, r, news);
  job_fail(j, proc_exit_code(e));
}

/* "; ranks 4-5, 7 did not report an exit" for h's ranks not done. */
static void lost_ranks(const launch_host *h, char *buf, size_t cap) {
  char list[512] = "";
  size_t len = 0;
  int count = 0, n = h->spec->nranks;
  for (int i = 0; i < n; i++) {
    if (h->ranks[i].state == RANK_DONE) continue;
    int k = i;
    while (k + 1 < n && h->ranks[k + 1].state != RANK_DONE) k++;
    if (len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, k > i ? "%s%d-%d" : "%s%d",
                              count ? ", " : "", h->ranks[i].rank, h->ranks[k].rank);
    count += k - i + 1;
    i = k;
  }
  buf[0] = '\0';
  if (count)
    snprintf(buf, cap, "; %s %s did not report an exit", count > 1 ? "ranks" : "rank", list);
}

void launch_host_failed(launch_host *h, int code, int name_lost, const char *fmt, ...) {
  job *j = h->job;
  char msg[1536], lost[600] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (name_lost) lost_ranks(h, lost, sizeof lost);
  job_say(j, j->phase < PHASE_TERM, "%s%s", msg, lost);
  for (int i = 0; i < h->spec->nranks; i++) {
    launch_rank *r = &h->ranks[i];
    int was_done = r->state == RANK_DONE;
    if (!was_done) done(j, r, (proc_exit){PROC_LOST, 0});
    output_stream_end(&r->out);
    output_stream_end(&r->err);
    if (j->ext && !was_done) j->ext->ops->exited(j->ext->arg, r);
  }
  if (!j->ext) job_fail(j, code);
}

void launch_say(launch_host *h, int always, const char *fmt, ...) {
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  job_say(h->job, always, "%s", msg);
}

output_stream *launch_stream(launch_rank *r, int stream) {
  return stream == PROC_STDOUT ? &r->out : &r->err;
}

void launch_feed(void *rank, int stream, const char *data, size_t n) {
  output_stream_feed(launch_stream(rank, stream), data, n);
}

int launch_output_room(const launch_host *h) {
  return (output_sink_full(h->ctx->out) ? 0 : 1 << PROC_STDOUT) |
         (output_sink_full(h->ctx->err) ? 0 : 1 << PROC_STDERR);
}

int launch_output_full(const launch_host *h) { return launch_output_room(h) != PROC_BOTH; }

launch_rank *launch_rank_of(launch_host *h, uint32_t rank) {
  uint32_t first = (uint32_t)h->spec->first;
  return rank >= first && rank - first < (uint32_t)h->spec->nranks ? &h->ranks[rank - first] : NULL;
}

/* ---- signals to hvdrun ---- */

static void on_stop_signal(job *j, int sig, int count) {
  if (j->exit_code < 0) j->exit_code = 128 + sig;
  j->interrupted = 1;
  if (j->ext && count == 1) j->ext->ops->interrupted(j->ext->arg, sig); /* not "ranks lost" */
  if (j->phase < PHASE_TERM && count == 1) {
    job_say(j, 0, "got signal %d (%s): stopping the job", sig, strsignal(sig));
    enter_term(j, TERM_AFTER_SIGNAL_MS);
  } else if (j->phase < PHASE_KILL) { /* asked twice: no more waiting */
    enter_kill(j);
  }
}

static void reap(job *j) {
  int status;
  pid_t pid;
  while ((pid = procs_reap_one(&status)) > 0) {
    if (j->ext && j->ext->ops->reaped(j->ext->arg, pid, status)) continue;
    for (int h = 0; h < j->nhosts; h++)
      if (j->hosts[h]->backend->reaped(j->hosts[h], pid, status)) break;
  }
}

static void on_signals(job *j) {
  signals_seen seen = {0, 0, 0};
  signals_drain(j->sig_fd, &seen);
  if (seen.child) reap(j);
  if (seen.stop_count) on_stop_signal(j, seen.stop_sig, seen.stop_count);
}

/* ---- the loop ---- */

static void add_fixed(job *j, int fd, short events, int what) {
  j->fds[j->nfds++] = (struct pollfd){fd, events, 0};
  j->fixed[j->nfixed++] = what;
}

static void add_sink(job *j, const output_sink *s, int what) {
  if (output_sink_wants_write(s)) add_fixed(j, s->fd, POLLOUT, what);
}

static void prepare(job *j, uint64_t now) {
  j->nfds = j->nfixed = 0;
  add_fixed(j, j->sig_fd, POLLIN, SLOT_SIGNALS);
  add_sink(j, &j->out, SLOT_STDOUT);
  add_sink(j, &j->err, SLOT_STDERR);
  for (int h = 0; h < j->nhosts; h++) {
    launch_host *host = j->hosts[h];
    host->poll_first = j->nfds;
    host->poll_count = host->backend->prepare(host, j->fds + j->nfds, now);
    j->nfds += host->poll_count;
  }
  j->rdzv_first = j->nfds;
  j->rdzv_count = hvd__rdzv_server_prepare(j->rdzv, j->fds + j->nfds, now);
  j->nfds += j->rdzv_count;
  if (j->ext) j->nfds += j->ext->ops->prepare(j->ext->arg, j->fds + j->nfds);
}

static void dispatch(job *j) {
  int signals = 0;
  for (size_t i = 0; i < j->nfixed; i++) {
    if (!j->fds[i].revents) continue;
    switch (j->fixed[i]) {
      case SLOT_SIGNALS: signals = 1; break;
      case SLOT_STDOUT: output_sink_write(&j->out); break;
      default: output_sink_write(&j->err); break;
    }
  }
  /* Hosts an extension adds while dispatching have no slots yet. */
  int hosts = j->nhosts;
  for (int h = 0; h < hosts; h++)
    j->hosts[h]->backend->dispatch(j->hosts[h], j->fds + j->hosts[h]->poll_first,
                                   j->hosts[h]->poll_count);
  hvd__rdzv_server_dispatch(j->rdzv, j->fds + j->rdzv_first, j->rdzv_count);
  size_t ext_first = j->rdzv_first + j->rdzv_count;
  if (j->ext) j->ext->ops->dispatch(j->ext->arg, j->fds + ext_first, j->nfds - ext_first);
  if (signals) on_signals(j); /* last: reaping reads the exec pipes */
}

static uint64_t next_wake(const job *j) {
  uint64_t wake = hvd__rdzv_server_deadline(j->rdzv);
  if (j->phase_end < wake) wake = j->phase_end;
  uint64_t ext = j->ext ? j->ext->ops->deadline(j->ext->arg) : HVD__NEVER;
  if (ext < wake) wake = ext;
  for (int h = 0; h < j->nhosts; h++) {
    uint64_t d = j->hosts[h]->backend->deadline(j->hosts[h]);
    if (d < wake) wake = d;
    if (j->hosts[h]->kill_at && j->hosts[h]->kill_at < wake) wake = j->hosts[h]->kill_at;
  }
  return wake;
}

/* Hosts stopped alone that did not go on SIGTERM get SIGKILL. */
static void kill_stopped(job *j, uint64_t now) {
  for (int h = 0; h < j->nhosts; h++) {
    launch_host *host = j->hosts[h];
    if (!host->kill_at || now < host->kill_at) continue;
    host->kill_at = HVD__NEVER; /* once */
    host->backend->signal(host, SIGKILL);
  }
}

static void turn(job *j) {
  uint64_t now = hvd__now_ms();
  prepare(j, now);
  int n = poll(j->fds, j->nfds, hvd__ms_left(next_wake(j)));
  if (n < 0 && errno != EINTR) {
    job_say(j, 1, "poll: %s", strerror(errno));
    if (j->exit_code < 0) j->exit_code = 1;
    enter_kill(j);
  }
  if (n > 0) {
    j->fds_polled = j->fds;
    dispatch(j);
    if (j->fds_polled != j->fds) free(j->fds_polled);
    j->fds_polled = NULL;
  }
  now = hvd__now_ms();
  hvd__rdzv_server_expire(j->rdzv, now);
  for (int h = 0; h < j->nhosts; h++) j->hosts[h]->backend->expire(j->hosts[h], now);
  kill_stopped(j, now);
  if (j->ext && j->phase == PHASE_RUN) j->ext->ops->expire(j->ext->arg, now);
  if (now >= j->phase_end) on_deadline(j);
  if (j->undone == 0 && j->phase == PHASE_RUN && streams_open(j) && !ext_running(j))
    enter(j, PHASE_LINGER, LINGER_MS);
  output_sink_write(&j->out); /* what this turn queued, as far as it goes now */
  output_sink_write(&j->err);
}

/* ---- start and finish ---- */

/* "10.0.0.1:40123" or "[fd00::1]:40123". */
static void endpoint(const char *addr, int port, char *buf, size_t cap) {
  snprintf(buf, cap, strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
}

static void say_listening(job *j) {
  const rdzv_addrs *a = j->addrs;
  for (size_t i = 0; i < a->n; i++) {
    char where[HVD_NET_ADDR_MAX + 16], names[512] = "";
    size_t len = 0;
    for (int h = 0; h < j->plan->n && len < sizeof names; h++)
      if ((size_t)a->of_host[h] == i)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "",
                                j->plan->hosts[h].name);
    endpoint(a->addr[i], j->port[i], where, sizeof where);
    job_say(j, 0, "rendezvous listening on %s (%s) for host%s %s", where, a->iface[i],
            strchr(names, ',') ? "s" : "", names);
  }
}

/* The rendezvous server's lines, on hvdrun's stderr. */
static void rdzv_log(void *arg, const char *line) {
  output_sink_printf(arg, "hvdrun: rendezvous: %s", line);
}

/* The job's secret and the rendezvous server: for the job's ranks, or as
 * many at once as an extension says, telling it through its hooks. */
static int start_rendezvous(job *j) {
  const rdzv_addrs *a = j->addrs;
  const hvdrun_options *o = j->ctx.opt;
  uint32_t size = j->ext ? j->ext->rdzv_size : (uint32_t)o->np;
  hvd_rdzv_server_config cfg = {size,     &j->key,  a->list, a->n,
                                "hvdrun", rdzv_log, &j->err, o->verbose};
  if (hvd__secret_generate(&j->key) < 0 ||
      hvd__secret_encode(&j->key, j->ctx.secret, sizeof j->ctx.secret) < 0 ||
      (j->ext ? hvd__rdzv_server_start_elastic(&cfg, &j->ext->rdzv_hooks, j->port, &j->rdzv)
              : hvd__rdzv_server_start(&cfg, j->port, &j->rdzv)) < 0) {
    job_say(j, 1, "cannot start the rendezvous: %s", hvd_last_error());
    return -1;
  }
  say_listening(j);
  return 0;
}

/* The rank's streams, and with --output-filename their files. */
static int init_rank(job *j, launch_rank *r) {
  char prefix[48], path[PATH_MAX];
  const char *dir = j->ctx.opt->output_dir;
  snprintf(prefix, sizeof prefix, "[%d]<stdout>:", r->rank);
  output_stream_init(&r->out, prefix, &j->out);
  snprintf(prefix, sizeof prefix, "[%d]<stderr>:", r->rank);
  output_stream_init(&r->err, prefix, &j->err);
  r->out.timestamp = r->err.timestamp = j->ctx.opt->prefix_timestamp;
  if (!dir) return 0;
  snprintf(path, sizeof path, "%s/rank.%d", dir, r->rank);
  int rc = output_make_dirs(path);
  if (rc == 0) {
    snprintf(path, sizeof path, "%s/rank.%d/stdout", dir, r->rank);
    rc = output_stream_save(&r->out, path);
  }
  if (rc == 0) {
    snprintf(path, sizeof path, "%s/rank.%d/stderr", dir, r->rank);
    rc = output_stream_save(&r->err, path);
  }
  if (rc < 0) job_say(j, 1, "--output-filename: cannot create '%s': %s", path, strerror(errno));
  return rc;
}

/* Room in the poll set for n more descriptors.  An extension adds
 * hosts while the array poll() filled is being dispatched, and the
 * dispatchers hold pointers into it: that one is copied, not moved, and
 * freed once the dispatch is over. */
int job_grow_fds(job *j, size_t n) {
  size_t cap = j->fds_cap + n;
  struct pollfd *fds = malloc(cap * sizeof *fds);
  if (!fds) return -1;
  if (j->nfds) memcpy(fds, j->fds, j->nfds * sizeof *fds);
  if (j->fds != j->fds_polled) free(j->fds);
  j->fds = fds;
  j->fds_cap = cap;
  return 0;
}

launch_host *job_add_host(job *j, const host_spec *spec, const char *rdzv_addr, int rdzv_port) {
  if (j->nhosts == j->cap_hosts) {
    int cap = j->cap_hosts ? 2 * j->cap_hosts : 16;
    launch_host **hosts = realloc(j->hosts, (size_t)cap * sizeof *hosts);
    if (!hosts) goto out_of_memory;
    j->hosts = hosts;
    j->cap_hosts = cap;
  }
  launch_host *h = calloc(1, sizeof *h + (size_t)spec->nranks * sizeof(launch_rank));
  if (!h) goto out_of_memory;
  /* --ssh-this-host: this machine's ranks go through the ssh command too
   * (a relay that starts them inside a Spark task or Ray actor) */
  int fork_here = spec->local && !j->ctx.opt->ssh_this_host;
  h->backend = fork_here                            ? &launch_local
               : j->plan->launcher == LAUNCHER_SRUN ? &launch_srun
                                                    : &launch_ssh;
  h->ctx = &j->ctx;
  h->job = j;
  h->spec = spec;
  h->ranks = (launch_rank *)(h + 1);
  h->rdzv_addr = rdzv_addr;
  h->rdzv_port = rdzv_port;
  if (job_grow_fds(j, h->backend->poll_max(spec->nranks)) < 0) {
    free(h);
    goto out_of_memory;
  }
  j->hosts[j->nhosts++] = h;
  for (int i = 0; i < spec->nranks; i++) {
    launch_rank *r = &h->ranks[i];
    r->rank = spec->first + i;
    r->host = h;
    j->undone++;
    if (init_rank(j, r) < 0) return NULL;
  }
  return h;
out_of_memory:
  job_say(j, 1, "out of memory for the ranks of host %s", spec->name);
  return NULL;
}

int job_start_host(job *j, launch_host *h) {
  (void)j;
  return h->backend->start(h);
}

void job_stop_host(job *j, launch_host *h) {
  if (h->kill_at) return;
  h->backend->signal(h, SIGTERM);
  h->backend->signal(h, SIGCONT); /* a stopped rank acts on SIGTERM only once continued */
  h->kill_at = hvd__deadline_in(TERM_AFTER_FAILURE_MS);
  (void)j;
}

/* The launch tree (launch_tree.h) over the hosts reached by ssh: which
 * of them starts which.  0, or -1 when out of memory. */
static int plan_tree(job *j) {
  launch_host **ssh = malloc((size_t)j->nhosts * sizeof *ssh);
  int *parent = malloc((size_t)j->nhosts * sizeof *parent), n = 0;
  if (!ssh || !parent) {
    free(ssh);
    free(parent);
    job_say(j, 1, "out of memory for the launch tree of %d hosts", j->nhosts);
    return -1;
  }
  for (int h = 0; h < j->nhosts; h++)
    if (j->hosts[h]->backend == &launch_ssh) ssh[n++] = j->hosts[h];
  launch_tree(n, j->ctx.opt->launch_fanout, parent);
  for (int i = 0; i < n; i++) ssh[i]->via = parent[i] < 0 ? NULL : ssh[parent[i]];
  int depth = launch_tree_depth(n, parent);
  if (depth > 1)
    job_say(j, 0, "starting %d hosts over ssh in a tree of %d levels, at most %d sessions each", n,
            depth, j->ctx.opt->launch_fanout);
  free(ssh);
  free(parent);
  return 0;
}

/* A fixed job: every host of the plan with its ranks, all started at
 * once (local ranks fork, ssh sessions begin: beyond --launch-fanout
 * hosts in a tree, parents first). */
static int start_plan(job *j) {
  const host_plan *p = j->plan;
  j->ctx.name_hosts = p->n > 1 || !p->hosts[0].local;
  for (int h = 0; h < p->n; h++) {
    int a = j->addrs->of_host[h];
    if (!job_add_host(j, &p->hosts[h], j->addrs->addr[a], j->port[a])) return -1;
  }
  if (plan_tree(j) < 0) return -1;
  for (int h = 0; h < j->nhosts; h++)
    if (job_start_host(j, j->hosts[h]) < 0) return -1;
  return 0;
}

int job_begin(job *j, const hvdrun_options *o, const host_plan *plan, const rdzv_addrs *addrs,
              job_ext *ext) {
  memset(j, 0, sizeof *j);
  j->ext = ext;
  j->ctx.opt = o;
  j->ctx.places = plan->places;
  j->ctx.out = &j->out;
  j->ctx.err = &j->err;
  j->plan = plan;
  j->addrs = addrs;
  j->exit_code = -1;
  j->sig_fd = -1;
  j->phase_end = HVD__NEVER;
  output_sink_init(&j->out, STDOUT_FILENO);
  output_sink_init(&j->err, STDERR_FILENO);
  output_sink_pair(&j->out, &j->err);
  procs_raise_fd_limit();
  j->sig_fd = signals_install();
  if (j->sig_fd < 0) {
    job_say(j, 1, "cannot install signal handlers: %s", strerror(errno));
    return -1;
  }
  if (start_rendezvous(j) < 0) return -1;
  if (job_grow_fds(j, SLOT_FIXED + hvd__rdzv_server_poll_max(j->rdzv)) < 0) {
    job_say(j, 1, "out of memory for the poll set");
    return -1;
  }
  return 0;
}

/* Writes what is left for as long as the reader takes it, as a pipe
 * would; a signal to hvdrun ends the wait, and after one already stopped
 * the job the reader gets DRAIN_MS more. */
static void drain_sinks(job *j) {
  uint64_t deadline = j->interrupted ? hvd__deadline_in(DRAIN_MS) : HVD__NEVER;
  while (output_sink_wants_write(&j->out) || output_sink_wants_write(&j->err)) {
    struct pollfd p[3] = {{j->out.fd, (short)(output_sink_wants_write(&j->out) ? POLLOUT : 0), 0},
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

/* Each local host's ranks share a segment named after the host's first
 * rank, which unlinks it once every rank mapped it; a job that ended
 * before then would leave it in /dev/shm.  (Agents do the same on theirs.) */
static void unlink_segments(job *j) {
  char name[HVD_SHM_NAME_MAX];
  if (!j->rdzv) return; /* no secret, no segment */
  if (j->ext) {
    j->ext->ops->unlink_segments(j->ext->arg);
    return;
  }
  for (int h = 0; h < j->plan->n; h++) {
    if (!j->plan->hosts[h].local) continue;
    hvd__shm_name(&j->key, j->plan->hosts[h].first, name, sizeof name);
    shm_unlink(name);
  }
}

/* After the loop: give up on what is left, then free everything. */
static int job_finish(job *j) {
  char on[HVD_HOSTNAME_MAX + 8];
  if (j->exit_code > 0 && j->phase < PHASE_KILL && j->hosts)
    signal_all(j, SIGKILL); /* a failed job leaves nothing behind */
  for (int h = 0; h < j->nhosts; h++) j->hosts[h]->backend->stop(j->hosts[h]);
  for (int h = 0; h < j->nhosts; h++) {
    for (int i = 0; i < j->hosts[h]->spec->nranks; i++) {
      launch_rank *k = &j->hosts[h]->ranks[i];
      if (k->state == RANK_RUNNING)
        job_say(j, 1, "%s %d%s (pid %ld) did not exit even after SIGKILL", rank_word(j), k->rank,
                on_host(j, k, on, sizeof on), k->pid);
      output_stream_end(&k->out);
      output_stream_end(&k->err);
    }
  }
  unlink_segments(j);
  drain_sinks(j);
  output_sink_free(&j->out);
  output_sink_free(&j->err);
  hvd__rdzv_server_free(j->rdzv);
  if (j->sig_fd >= 0) close(j->sig_fd);
  for (int h = 0; h < j->nhosts; h++) free(j->hosts[h]);
  free(j->hosts);
  free(j->fds);
  return j->exit_code < 0 ? 0 : j->exit_code;
}

int job_drive(job *j, int started) {
  if (!started) {
    j->exit_code = 1;
    return job_finish(j);
  }
  while (!job_over(j)) turn(j);
  return job_finish(j);
}

int job_run(const hvdrun_options *o, const host_plan *hosts, const rdzv_addrs *addrs) {
  job j;
  int started = job_begin(&j, o, hosts, addrs, NULL) == 0 && start_plan(&j) == 0;
  return job_drive(&j, started);
}
