/*
 * job_elastic.c -- hvdrun as the elastic driver (job_elastic.h):
 * elastic.c decides, this file connects it to the plain job (job.c) as
 * that job's extension (job_int.h): the discovery script, the workers
 * (each a host of one rank, so one can be stopped alone), the rendezvous
 * that places them in jobs, and the end of the job.  It calls job.c;
 * job.c calls it only through the hooks of `ops` below.
 *
 * Discovery: the script runs about once a second (DISCOVERY_EVERY_MS) and
 * at once after a worker fails, at most DISCOVERY_TIMEOUT_MS each time;
 * its output (at most DISCOVERY_OUTPUT_MAX bytes) replaces the listing.
 * A script that fails or prints garbage the first time ends the job (it
 * is misconfigured); later, a warning, and the last listing stands.  With
 * -H or --hostfile instead, the listing is that, once: hosts can only be
 * lost.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "elastic.h"
#include "host_pool.h"
#include "job_elastic.h"
#include "job_int.h"
#include "wire/iface.h"
#include "wire/shm_name.h"

#define DISCOVERY_EVERY_MS 1000
#define DISCOVERY_TIMEOUT_MS 10000
#define DISCOVERY_OUTPUT_MAX (64 * 1024)

extern char **environ;

typedef struct {
  proc p;
  int running;
  uint64_t next, deadline;
  char out[DISCOVERY_OUTPUT_MAX + 1];
  size_t len;
  char err[512];
  size_t err_len;
  int overflow, runs;
} discovery;

typedef struct {
  job *j;
  job_ext ext;               /* how the job calls this driver */
  elastic brain;
  host_pool pool;
  discovery disc;
  int max_workers;
  host_spec *specs;          /* per worker id: its host, one rank */
  launch_host **worker_host; /* per worker id, once started */
  rank_place *places;        /* per worker id: unused by elastic workers, read by rank_env */
  int *local;                /* per pool host: -1 not known yet, else whether it is this machine */
  int nlocal;
  char (*segments)[HVD_SHM_NAME_MAX]; /* the jobs' shared-memory segments, to unlink at the end */
  int nsegments, cap_segments;
  int ended;
} job_elastic;

/* ---- the workers ---- */

static int host_is_local(job_elastic *el, int host) {
  if (host >= el->nlocal) {
    int *l = realloc(el->local, (size_t)(host + 1) * sizeof *l);
    if (!l) return 0;
    for (int i = el->nlocal; i <= host; i++) l[i] = -1;
    el->local = l;
    el->nlocal = host + 1;
  }
  if (el->local[host] < 0) el->local[host] = hvd__iface_host_is_local(el->pool.hosts[host].name);
  return el->local[host];
}

/* Where a host's workers reach the rendezvous: the address of the route
 * to it when the rendezvous listens there, else the first address. */
static int rdzv_index(job_elastic *el, int host) {
  const rdzv_addrs *a = el->j->addrs;
  char addr[HVD_NET_ADDR_MAX];
  if (host_is_local(el, host) || hvd__iface_route_src(el->pool.hosts[host].name, addr) < 0)
    return 0;
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->addr[i], addr) == 0) return (int)i;
  return 0;
}

static void act_start(void *ctx, int host, const uint32_t *ids, int n) {
  job_elastic *el = ctx;
  job *j = el->j;
  int a = rdzv_index(el, host);
  for (int i = 0; i < n; i++) {
    host_spec *spec = &el->specs[ids[i]];
    *spec = (host_spec){el->pool.hosts[host].name, 1, host_is_local(el, host), (int)ids[i], 1};
    launch_host *h = job_add_host(j, spec, j->addrs->addr[a], j->port[a]);
    if (!h) continue; /* said; the worker never reaches the rendezvous: given up on */
    el->worker_host[ids[i]] = h;
    job_say(j, 0, "elastic: starting worker %u on %s", ids[i], spec->name);
    job_start_host(j, h);
  }
}

static void act_stop(void *ctx, uint32_t id) {
  job_elastic *el = ctx;
  launch_host *h = (int)id < el->max_workers ? el->worker_host[id] : NULL;
  if (h && h->ranks[0].state != RANK_DONE) job_stop_host(el->j, h);
}

static void act_announce(void *ctx, uint64_t stamp, int added, int removed) {
  job_elastic *el = ctx;
  job_say(el->j, 0, "elastic: telling the workers: hosts %s%s%s (update %llu)",
          added ? "added" : "", added && removed ? " and " : "", removed ? "removed" : "",
          (unsigned long long)stamp);
  hvd__rdzv_server_notice(el->j->rdzv, stamp, added, removed);
}

/* The segment names of a job, for unlink_segments(): each host's first
 * rank under the job's key, as bootstrap.c derives it. */
static void remember_segments(job_elastic *el, uint32_t generation, const elastic_member *m,
                              int n) {
  char label[64];
  hvd_secret key;
  snprintf(label, sizeof label, "hvd elastic job %u", generation);
  if (hvd__secret_derive(&el->j->key, label, &key) < 0) return;
  for (int i = 0; i < n; i++) {
    if (m[i].local_rank != 0) continue;
    if (el->nsegments == el->cap_segments) {
      int cap = el->cap_segments ? 2 * el->cap_segments : 16;
      void *s = realloc(el->segments, (size_t)cap * sizeof *el->segments);
      if (!s) return;
      el->segments = s;
      el->cap_segments = cap;
    }
    hvd__shm_name(&key, m[i].rank, el->segments[el->nsegments++], HVD_SHM_NAME_MAX);
  }
}

static void act_form(void *ctx, int generation, const elastic_member *m, int n) {
  job_elastic *el = ctx;
  job *j = el->j;
  hvd_rdzv_member *members = calloc((size_t)(n ? n : 1), sizeof *members);
  char hosts[512] = "";
  size_t len = 0;
  if (!members) {
    job_say(j, 1, "elastic: out of memory forming job %d", generation);
    return;
  }
  for (int i = 0; i < n; i++) {
    members[i] = (hvd_rdzv_member){m[i].id, (uint32_t)m[i].local_rank,
                                   (uint32_t)m[i].local_size, (uint32_t)m[i].cross_rank,
                                   (uint32_t)m[i].cross_size};
    if (len < sizeof hosts)
      len += (size_t)snprintf(hosts + len, sizeof hosts - len, "%s%u@%s", i ? " " : "", m[i].id,
                              el->pool.hosts[m[i].host].name);
  }
  remember_segments(el, (uint32_t)generation, m, n);
  if (hvd__rdzv_server_place(j->rdzv, (uint32_t)generation, members, n) < 0)
    job_say(j, 1, "elastic: job %d: %s", generation, hvd_last_error());
  else
    job_say(j, 1, "elastic: job %d formed with %d workers (worker@host by rank: %s)", generation,
            n, hosts);
  free(members);
}

static void act_refuse(void *ctx, uint32_t id, const char *why) {
  job_elastic *el = ctx;
  hvd__rdzv_server_refuse(el->j->rdzv, id, why);
}

static void act_end(void *ctx, int code, const char *why) {
  job_elastic *el = ctx;
  el->ended = 1;
  if (code == 0) {
    job_say(el->j, 0, "elastic: every worker finished");
    return;
  }
  job_say(el->j, 1, "elastic: stopping the job: %s", why);
  job_fail(el->j, code);
}

/* ---- the rendezvous' news ---- */

static void on_joined(void *arg, uint32_t worker) {
  job_elastic *el = arg;
  elastic_registered(&el->brain, worker, hvd__now_ms());
}

static void on_left(void *arg, uint32_t worker) {
  job_elastic *el = arg;
  elastic_left(&el->brain, worker, hvd__now_ms());
}

/* ---- what the job tells the driver (job_ext_ops) ---- */

static void on_exited(void *arg, launch_rank *r) {
  job_elastic *el = arg;
  int code = proc_exit_ok(r->exit) ? 0 : proc_exit_code(r->exit);
  if (r->exit.how == PROC_NO_EXEC || r->exit.how == PROC_NO_SETUP) {
    /* No other host or later try would run it either (as a fixed job). */
    elastic_end(&el->brain, code, "the program cannot be run (said above)");
    return;
  }
  if (code) el->disc.next = hvd__now_ms(); /* look at the hosts again at once */
  elastic_exited(&el->brain, (uint32_t)r->rank, code, hvd__now_ms());
}

static void on_interrupted(void *arg, int sig) {
  job_elastic *el = arg;
  char why[96];
  snprintf(why, sizeof why, "hvdrun got signal %d (%s)", sig, strsignal(sig));
  elastic_end(&el->brain, 128 + sig, why);
}

static int ended(const void *arg) { return ((const job_elastic *)arg)->ended; }

/* ---- discovery ---- */

static void disc_output(void *ctx, int stream, const char *data, size_t n) {
  discovery *d = ctx;
  if (n == 0) return; /* end of a pipe: the script's exit says the rest */
  if (stream == PROC_STDOUT) {
    size_t room = DISCOVERY_OUTPUT_MAX - d->len;
    if (n > room) d->overflow = 1;
    memcpy(d->out + d->len, data, n < room ? n : room);
    d->len += n < room ? n : room;
  } else {
    size_t room = sizeof d->err - 1 - d->err_len;
    memcpy(d->err + d->err_len, data, n < room ? n : room);
    d->err_len += n < room ? n : room;
  }
}

static void disc_start(job_elastic *el, uint64_t now) {
  discovery *d = &el->disc;
  char *argv[] = {(char *)el->j->ctx.opt->discovery, NULL};
  d->len = d->err_len = 0;
  d->overflow = 0;
  d->next = now + DISCOVERY_EVERY_MS;
  if (proc_spawn(&d->p, argv, environ, 0) < 0) {
    job_say(el->j, 1, "elastic: cannot start the discovery script '%s': %s", argv[0],
            strerror(errno));
    return;
  }
  d->running = 1;
  d->deadline = now + DISCOVERY_TIMEOUT_MS;
}

/* Why the run that just ended gives no listing, or "" if it does. */
static void disc_failure(discovery *d, char *why, size_t cap) {
  proc_exit e = proc_exit_of(&d->p);
  why[0] = '\0';
  d->err[d->err_len] = '\0';
  if (e.how == PROC_NO_EXEC || e.how == PROC_NO_SETUP) { /* an errno, not an exit code */
    snprintf(why, cap, "cannot be run: %s", strerror(e.value));
  } else if (!proc_exit_ok(e)) {
    char how[128];
    proc_exit_describe(e, how, sizeof how);
    snprintf(why, cap, "%s%s%s", how, d->err_len ? ": " : "", d->err);
  } else if (d->overflow) {
    snprintf(why, cap, "printed more than %d bytes", DISCOVERY_OUTPUT_MAX);
  }
}

static void disc_done(job_elastic *el) {
  discovery *d = &el->disc;
  job *j = el->j;
  char why[700], parse[300];
  uint64_t now = hvd__now_ms();
  proc_drain(&d->p, PROC_BOTH, disc_output, d);
  proc_close(&d->p, disc_output, d);
  d->running = 0;
  disc_failure(d, why, sizeof why);
  int changed = why[0] ? -1 : host_pool_update(&el->pool, d->out, d->len, now, parse, sizeof parse);
  if (changed < 0 && !why[0]) snprintf(why, sizeof why, "%s", parse);
  if (changed < 0) {
    char msg[900];
    snprintf(msg, sizeof msg, "the host discovery script '%s': %s", j->ctx.opt->discovery, why);
    if (d->runs++ == 0) { /* a first listing is required */
      elastic_end(&el->brain, 1, msg);
    } else {
      job_say(j, 1, "elastic: %s; keeping the last listing", msg);
    }
    return;
  }
  d->runs++;
  if (changed) job_say(j, 0, "elastic: discovery: %ld usable slots", host_pool_slots(&el->pool, now));
  elastic_hosts_changed(&el->brain, changed, now);
}

/* The discovery script's pipes in the job's poll set. */
static size_t poll_max(const job_elastic *el) { return el->j->ctx.opt->discovery ? 3 : 0; }

static size_t prepare(void *arg, struct pollfd *fds) {
  discovery *d = &((job_elastic *)arg)->disc;
  return d->running ? proc_poll_add(&d->p, PROC_BOTH, fds) : 0;
}

static void dispatch(void *arg, const struct pollfd *fds, size_t n) {
  discovery *d = &((job_elastic *)arg)->disc;
  if (d->running && n) proc_poll_dispatch(&d->p, fds, n, disc_output, d);
}

static int reaped(void *arg, pid_t pid, int status) {
  job_elastic *el = arg;
  if (!el->disc.running || pid != el->disc.p.pid) return 0;
  proc_reaped(&el->disc.p, status);
  disc_done(el);
  return 1;
}

static uint64_t deadline(const void *arg) {
  const job_elastic *el = arg;
  uint64_t next = elastic_deadline(&el->brain);
  if (el->j->ctx.opt->discovery && !el->ended) {
    uint64_t d = el->disc.running ? el->disc.deadline : el->disc.next;
    if (d < next) next = d;
  }
  return next;
}

static void expire(void *arg, uint64_t now) {
  job_elastic *el = arg;
  job *j = el->j;
  discovery *d = &el->disc;
  if (j->ctx.opt->discovery && !el->ended) {
    if (d->running && now >= d->deadline) {
      job_say(j, 1, "elastic: the host discovery script ran longer than %d s: killed",
              DISCOVERY_TIMEOUT_MS / 1000);
      proc_signal_group(&d->p, SIGKILL);
      d->deadline = HVD__NEVER; /* reaped as usual */
    } else if (!d->running && now >= d->next) {
      disc_start(el, now);
    }
  }
  elastic_tick(&el->brain, now);
}

/* ---- start and end ---- */

/* Runs the script once and waits for it (at most DISCOVERY_TIMEOUT_MS),
 * before the loop runs: the rendezvous must know where to listen.  0 with
 * the listing in d->out, or -1 with why. */
static int disc_run_now(const char *script, discovery *d, char *why, size_t cap) {
  char *argv[] = {(char *)script, NULL};
  uint64_t deadline = hvd__deadline_in(DISCOVERY_TIMEOUT_MS);
  memset(d, 0, sizeof *d);
  if (proc_spawn(&d->p, argv, environ, 0) < 0)
    return snprintf(why, cap, "cannot start it: %s", strerror(errno)), -1;
  while (d->p.out_fd[PROC_STDOUT] >= 0 || d->p.out_fd[PROC_STDERR] >= 0) {
    struct pollfd fds[3];
    size_t n = proc_poll_add(&d->p, PROC_BOTH, fds);
    int ready = poll(fds, n, hvd__ms_left(deadline));
    if (ready == 0) {
      proc_signal_group(&d->p, SIGKILL);
      snprintf(why, cap, "ran longer than %d s", DISCOVERY_TIMEOUT_MS / 1000);
      break;
    }
    if (ready > 0) proc_poll_dispatch(&d->p, fds, n, disc_output, d);
  }
  int status = 0;
  while (waitpid(d->p.pid, &status, 0) < 0 && errno == EINTR) continue;
  proc_reaped(&d->p, status);
  proc_close(&d->p, disc_output, d);
  if (why[0]) return -1;
  disc_failure(d, why, cap);
  return why[0] ? -1 : 0;
}

/* A host of the first listing that is not this machine: 1 if the
 * rendezvous can find a route to it, else a warning, and hvdrun goes on
 * without it (later listings leave such a host to fail and be
 * blacklisted; the first one decides where the rendezvous listens). */
static int reachable(const hvdrun_options *o, const char *host) {
  char addr[HVD_NET_ADDR_MAX];
  if (hvd__iface_route_src(host, addr) == 0) return 1;
  fprintf(stderr, "hvdrun: warning: the host discovery script '%s' lists %s: %s; going on "
          "without it\n", o->discovery, host, hvd_last_error());
  return 0;
}

static long first_slots(const host_plan *p) {
  long n = 0;
  for (int h = 0; h < p->n; h++) n += p->hosts[h].slots;
  return n;
}

int job_elastic_first_hosts(const hvdrun_options *o, host_plan *p) {
  static discovery d; /* its buffer is large */
  char why[700] = "", parse[300];
  host_pool pool;
  if (!o->discovery) return hosts_list(o, p);
  memset(p, 0, sizeof *p);
  if (disc_run_now(o->discovery, &d, why, sizeof why) < 0) {
    fprintf(stderr, "hvdrun: the host discovery script '%s': %s\n", o->discovery, why);
    return -1;
  }
  host_pool_init(&pool, o->slots_per_host, 0, 0);
  int rc = host_pool_update(&pool, d.out, d.len, hvd__now_ms(), parse, sizeof parse);
  if (rc < 0) fprintf(stderr, "hvdrun: the host discovery script '%s': %s\n", o->discovery, parse);
  p->hosts = rc < 0 ? NULL : calloc((size_t)(pool.n ? pool.n : 1), sizeof *p->hosts);
  if (rc >= 0 && !p->hosts) fprintf(stderr, "hvdrun: out of memory\n");
  int skipped = 0;
  for (int h = 0; p->hosts && h < pool.n; h++) {
    int local = hvd__iface_host_is_local(pool.hosts[h].name);
    if (!local && !reachable(o, pool.hosts[h].name)) {
      skipped = 1;
      continue;
    }
    p->hosts[p->n] = (host_spec){pool.hosts[h].name, pool.hosts[h].slots, local, 0, 0};
    pool.hosts[h].name = NULL; /* the plan's now */
    p->n++;
  }
  host_pool_free(&pool);
  if (p->hosts && skipped && first_slots(p) < o->min_np) {
    fprintf(stderr, "hvdrun: the host discovery script '%s': the hosts that can be reached have "
            "%ld slots, fewer than --min-np %d\n", o->discovery, first_slots(p), o->min_np);
    hosts_plan_free(p);
    return -1;
  }
  return p->hosts ? 0 : -1;
}

/* The first listing: the hosts hvdrun.c planned the rendezvous for. */
static int first_listing(job_elastic *el) {
  const host_plan *p = el->j->plan;
  char *text = NULL, why[300];
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return -1;
  for (int h = 0; h < p->n; h++)
    fprintf(f, strchr(p->hosts[h].name, ':') ? "[%s]:%ld\n" : "%s:%ld\n", p->hosts[h].name,
            p->hosts[h].slots);
  fclose(f);
  int changed = host_pool_update(&el->pool, text, len, hvd__now_ms(), why, sizeof why);
  free(text);
  if (changed < 0) job_say(el->j, 1, "elastic: %s", why);
  for (int h = 0; h < p->n && h < el->pool.n; h++) {
    host_is_local(el, h);
    el->local[h] = p->hosts[h].local;
  }
  return changed < 0 ? -1 : 0;
}

static void unlink_segments(void *arg) {
  job_elastic *el = arg;
  for (int i = 0; i < el->nsegments; i++) shm_unlink(el->segments[i]);
}

static const job_ext_ops ops = {"worker", prepare, dispatch, deadline, expire, reaped,
                                on_exited, on_interrupted, ended, unlink_segments};

/* With the job begun (its rendezvous listening): the driver's tables,
 * room in the poll set, the first listing and the first workers.  -1
 * (said) on failure. */
static int start(job_elastic *el) {
  job *j = el->j;
  const hvdrun_options *o = j->ctx.opt;
  el->max_workers = HVDRUN_MAX_NP;
  el->specs = calloc((size_t)el->max_workers, sizeof *el->specs);
  el->worker_host = calloc((size_t)el->max_workers, sizeof *el->worker_host);
  el->places = calloc((size_t)el->max_workers, sizeof *el->places);
  if (!el->specs || !el->worker_host || !el->places) {
    job_say(j, 1, "out of memory for the elastic driver");
    return -1;
  }
  j->ctx.places = el->places;
  j->ctx.name_hosts = 1;
  host_pool_init(&el->pool, o->slots_per_host, o->cooldown_min, o->cooldown_max);
  elastic_config cfg = {o->np, o->min_np, o->max_np, el->max_workers,
                        (long)o->elastic_timeout * 1000, (long)o->start_timeout * 1000,
                        o->reset_limit};
  elastic_actions act = {el, act_start, act_stop, act_announce, act_form, act_refuse, act_end};
  elastic_init(&el->brain, &cfg, &act, &el->pool);
  el->disc.runs = 1; /* hvdrun.c ran the first discovery */
  el->disc.next = hvd__now_ms() + DISCOVERY_EVERY_MS;
  if (job_grow_fds(j, poll_max(el)) < 0) {
    job_say(j, 1, "out of memory for the poll set");
    return -1;
  }
  if (first_listing(el) < 0) return -1;
  job_say(j, 0, "elastic: %d to %d workers, %ld usable slots", o->min_np, o->max_np,
          host_pool_slots(&el->pool, hvd__now_ms()));
  elastic_hosts_changed(&el->brain, 1, hvd__now_ms());
  elastic_tick(&el->brain, hvd__now_ms());
  return 0;
}

static void driver_free(job_elastic *el) {
  if (el->disc.running) {
    proc_signal_group(&el->disc.p, SIGKILL);
    proc_close(&el->disc.p, disc_output, &el->disc);
  }
  elastic_free(&el->brain);
  host_pool_free(&el->pool);
  free(el->specs);
  free(el->worker_host);
  free(el->places);
  free(el->local);
  free(el->segments);
  free(el);
}

int job_elastic_run(const hvdrun_options *o, const host_plan *hosts, const rdzv_addrs *addrs) {
  job j;
  job_elastic *el = calloc(1, sizeof *el); /* its discovery's buffer is large */
  if (!el) {
    fprintf(stderr, "hvdrun: out of memory for the elastic driver\n");
    return 1;
  }
  el->j = &j;
  el->ext = (job_ext){&ops, el, (uint32_t)o->max_np, {el, on_joined, on_left}};
  int started = job_begin(&j, o, hosts, addrs, &el->ext) == 0 && start(el) == 0;
  int rc = job_drive(&j, started);
  driver_free(el); /* after the job: its hooks are called until the end */
  return rc;
}
