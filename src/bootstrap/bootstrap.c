/*
 * bootstrap.c -- from the job's description to a connected transport.
 *
 * The steps of hvd_init for a job of n > 1 ranks:
 *   1. meet (job->meet): at a rendezvous -- hvdrun's, or one rank 0 hosts
 *      on a thread of its own (rdzv_host.h) -- connect, prove we hold the
 *      job's secret, listen on the local address of that connection (the
 *      interface that routes to the rendezvous is the one our peers can
 *      reach too), register that address and receive everyone's; or do the
 *      same through MPI (mpi_controller.h), which also hands out a fresh
 *      secret.  Either way every rank ends with the same table;
 *   2. a sub-job (hvd_init_ranks) keeps the table's listed ranks;
 *   3. connect the full mesh (transport);
 *   4. set up shared memory among the ranks of each host (host_plan.c
 *      says which, from the table): one host uses it alone, several use
 *      it within each host and TCP between them (hybrid.c).
 * All of it within HOROVOD_START_TIMEOUT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "mpi_controller.h"
#include "transport/hybrid.h"
#include "wire/iface.h"
#include "transport/shm.h"
#include "bootstrap.h"
#include "host_plan.h"
#include "rdzv/rdzv_elastic.h"
#include "rdzv/rdzv_host.h"

/* How long a waiting TCP sendrecv keeps trying its sockets before it
 * sleeps in poll() when this host's ranks each have a core
 * (hvd_tcp_config.spin_us).  Longer than a peer's wake-up from poll(),
 * so that a peer which did fall asleep is still answered without a second
 * sleep: with a budget shorter than that (64 tries, ~20 us) two ranks fell
 * into a steady state of sleeping in turn, 28 us per 8 B allreduce at np 2
 * on loopback against 4 us spinning (docs/algorithms.md). */
#define TCP_SPIN_US 200
/* Beyond this many ranks a core a waiting rank sleeps at once rather than
 * yield first (shm.c's YIELDING_RANKS_PER_CORE, for the same reason). */
#define TCP_YIELDING_RANKS_PER_CORE 2

/* What meeting gives: everyone's entry, where this rank listens, the key. */
typedef struct {
  hvd_rdzv_entry *table; /* job->size entries */
  int listen_fd;
  hvd_secret key;
} met;

/* Where to listen for the peers: HOROVOD_GLOO_IFACE's interface, or the
 * one that reached the rendezvous -- the interface that routes there is
 * the one the other hosts can reach too. */
static int listen_addr(const hvd_job *job, int rdzv_fd, hvd_rdzv_entry *me) {
  const char *names = hvd__param_raw(HVD_P_GLOO_IFACE);
  char iface[IF_NAMESIZE];
  if (names) {
    int rc = hvd__iface_addr(names, me->listen.addr, iface);
    if (rc < 0) return hvd__err_prefix(rc, "HOROVOD_GLOO_IFACE on host %s", job->hostname);
  } else {
    HVD__CHECK(hvd__net_local_addr(rdzv_fd, me->listen.addr));
    hvd__iface_of_addr(me->listen.addr, iface);
  }
  snprintf(me->iface, sizeof me->iface, "%s", iface);
  return 0;
}

/* This rank's entry: where it listens for the peers (listening there). */
static int listen_entry(const hvd_job *job, int want_shm, int rdzv_fd, hvd_rdzv_entry *me,
                        int *listen_fd) {
  memset(me, 0, sizeof *me);
  me->shm = (uint8_t)want_shm;
  strcpy(me->hostname, job->hostname);
  strcpy(me->host_id, job->host_id);
  HVD__CHECK(listen_addr(job, rdzv_fd, me));
  HVD__CHECK(hvd__net_listen(me->listen.addr, 0, listen_fd, &me->listen.port));
  hvd__log(HVD_LOG_DEBUG, "listening for peers on %s:%d (%s)", me->listen.addr, me->listen.port,
           me->iface);
  return 0;
}

/* Listens where the peers can reach us and registers there. */
static int register_at(const hvd_job *job, int want_shm, int rdzv_fd, uint64_t deadline, met *m) {
  hvd_rdzv_entry me;
  HVD__CHECK(listen_entry(job, want_shm, rdzv_fd, &me, &m->listen_fd));
  me.rank = (uint32_t)job->rank;
  me.size = (uint32_t)job->size;
  me.local_rank = (uint32_t)job->local_rank;
  me.local_size = (uint32_t)job->local_size;
  return hvd__rdzv_register(rdzv_fd, &me, deadline, m->table);
}

/* Step 1 for an elastic worker: hvdrun places it in the job it forms
 * and keeps the connection for its notices.  The transports are keyed
 * per job, so that nothing of an earlier job (a late connection, a shared
 * memory segment) is ever taken for this one's. */
static int meet_elastic(hvd_job *job, int want_shm, uint64_t deadline, met *m) {
  const hvd_meet *how = &job->meet;
  hvd_rdzv_entry me;
  hvd_rdzv_place p;
  char label[64];
  int fd = -1;
  int rc = hvd__rdzv_connect(how->addr, how->port, &how->key, how->worker, deadline, &fd);
  if (rc == 0) rc = listen_entry(job, want_shm, fd, &me, &m->listen_fd);
  if (rc == 0) rc = hvd__rdzv_join(fd, how->worker, &me, deadline, &p, &m->table);
  if (rc == 0) {
    snprintf(label, sizeof label, "hvd elastic job %u", p.generation);
    rc = hvd__secret_derive(&how->key, label, &m->key);
  }
  if (rc < 0) {
    hvd__net_close(&fd);
    return hvd__err_prefix(rc, "worker %u at hvdrun's rendezvous at %s:%d", how->worker, how->addr,
                           how->port);
  }
  job->rank = (int)p.rank;
  job->size = (int)p.size;
  job->local_rank = (int)m->table[p.rank].local_rank;
  job->local_size = (int)m->table[p.rank].local_size;
  job->cross_rank = (int)p.cross_rank;
  job->cross_size = (int)p.cross_size;
  job->generation = p.generation;
  job->control_fd = fd;
  hvd__log_set_rank(job->rank);
  hvd__log(HVD_LOG_DEBUG, "worker %u: rank %d of %d in job %u", how->worker, job->rank, job->size,
           p.generation);
  return 0;
}

/* Step 1 at a rendezvous server; rank 0 runs it when the meeting says so. */
static int meet_at_rendezvous(const hvd_job *job, int want_shm, uint64_t deadline, met *m) {
  const hvd_meet *how = &job->meet;
  hvd_rdzv_host *host = NULL;
  int fd = -1, rc = 0;
  m->key = how->key;
  if (how->kind == HVD_MEET_RANK0 && job->rank == 0)
    rc = hvd__rdzv_host_start(how->addr, how->port, (uint32_t)job->size, &how->key, &host);
  if (rc == 0)
    rc = hvd__rdzv_connect(how->addr, how->port, &how->key, (uint32_t)job->rank, deadline, &fd);
  if (rc == 0) rc = register_at(job, want_shm, fd, deadline, m);
  hvd__net_close(&fd);
  /* The others may still be taking their tables: give them until the
   * deadline, or no time if this rank failed. */
  hvd__rdzv_host_stop(host, rc == 0 ? deadline : 0);
  if (rc < 0)
    return hvd__err_prefix(rc, "rendezvous %sat %s:%d",
                           how->kind == HVD_MEET_RANK0 ? "hosted by rank 0 " : "", how->addr,
                           how->port);
  return 0;
}

/* Step 2: the listed ranks become ranks 0..n-1 of a job of their own;
 * a rank left out stops here. */
static int keep_sub_job(hvd_job *job, met *m) {
  int me = -1, n = job->nranks;
  for (int i = 0; i < n; i++)
    if (job->ranks[i] == job->rank) me = i;
  if (me < 0)
    return hvd__err(HVD_E_INVALID,
                    "rank %d is not among the ranks given to "
                    "hvd_init_ranks()",
                    job->rank);
  hvd_rdzv_entry *sub = calloc((size_t)n, sizeof *sub);
  if (!sub) return hvd__err(HVD_E_NOMEM, "a table of %d ranks", n);
  for (int i = 0; i < n; i++) {
    sub[i] = m->table[job->ranks[i]];
    sub[i].rank = (uint32_t)i;
    sub[i].size = (uint32_t)n;
  }
  hvd__layout_local(sub, n);
  free(m->table);
  m->table = sub;
  job->rank = me;
  job->size = n;
  job->local_rank = (int)sub[me].local_rank;
  job->local_size = (int)sub[me].local_size;
  job->cross_rank = -1; /* from the new table */
  return 0;
}

/* Step 4: what the plan says joins this rank to the others.  Consumes
 * tcp, whatever happens. */
static int join(const hvd_host_plan *plan, const hvd_tcp_config *cfg, const hvd_job *job,
                hvd_transport *tcp, hvd_transport **xport) {
  hvd_transport *shm = NULL;
  if (plan->why[0] && plan->me == 0)
    hvd__log(HVD_LOG_WARNING,
             "no shared memory among the ranks placed on host '%s', using "
             "TCP: %s",
             job->hostname, plan->why);
  if (plan->shm) {
    hvd_shm_config sc = {plan->members, plan->n, plan->me, cfg->key, cfg->timeout_ms};
    int rc = hvd__shm_setup(&sc, tcp, &shm);
    if (rc < 0) {
      tcp->ops->abort(tcp, -1, hvd_last_error());
      tcp->ops->destroy(tcp);
      return rc;
    }
  }
  if (shm) /* under hybrid, what the TCP watchdog finds fails shared-memory waits too */
    hvd__shm_liveness(shm, cfg->live_ms,
                      plan->mode == HVD_PLAN_HYBRID ? hvd__tcp_alarm(tcp) : NULL);
  if (plan->mode == HVD_PLAN_HYBRID) return hvd__hybrid_new(tcp, shm, plan->members, xport);
  if (shm) { /* one host: shared memory alone */
    tcp->ops->destroy(tcp);
    *xport = shm;
  } else {
    *xport = tcp;
  }
  hvd__log(HVD_LOG_DEBUG, "rank %d: %s transport", cfg->rank, (*xport)->ops->name);
  return 0;
}

/* Steps 3-4, from the table. */
static int connect_all(const hvd_job *job, met *m, uint64_t deadline, long timeout_s,
                       hvd_transport **xport) {
  hvd_host_plan plan = {0};
  hvd_transport *tcp = NULL;
  hvd_tcp_config cfg;
  long live_s;
  memset(&cfg, 0, sizeof cfg);
  HVD__CHECK(hvd__param_int(HVD_P_LIVENESS_TIMEOUT_SECONDS, &live_s));
  hvd_peer_addr *peers = calloc((size_t)job->size, sizeof *peers);
  const char **hosts = calloc((size_t)job->size, sizeof *hosts);
  if (!peers || !hosts) {
    free(peers);
    free(hosts);
    return hvd__err(HVD_E_NOMEM, "allocating the addresses of %d ranks", job->size);
  }
  int rc = hvd__host_plan(m->table, job->size, job->rank, &plan);
  if (rc < 0) goto free_all;
  for (int i = 0; i < job->size; i++) peers[i] = m->table[i].listen;
  for (int i = 0; i < job->size; i++) hosts[i] = m->table[i].hostname;
  cfg.rank = job->rank;
  cfg.size = job->size;
  cfg.key = m->key;
  cfg.listen_fd = m->listen_fd;
  cfg.peers = peers;
  cfg.connect_deadline = deadline;
  cfg.timeout_ms = (int)(timeout_s * 1000);
  cfg.spin_us = hvd__core_each(job->local_size) ? TCP_SPIN_US : 0;
  cfg.yield_first = job->local_size <= TCP_YIELDING_RANKS_PER_CORE * hvd__cpus();
  cfg.live_ms = (int)(live_s * 1000);
  cfg.hosts = hosts;
  rc = hvd__tcp_create(&cfg, &tcp); /* owns the listener from here, even on failure */
  m->listen_fd = -1;
  if (rc < 0)
    hvd__err_prefix(rc, "connecting to the other ranks");
  else
    rc = join(&plan, &cfg, job, tcp, xport);
free_all:
  hvd__host_plan_free(&plan);
  free(peers);
  free(hosts);
  return rc;
}

/* hvd_init_ranks()'s list, before anyone meets: in range, no repeats. */
static int check_ranks(const hvd_job *job) {
  if (!job->ranks) return 0;
  if (job->nranks < 1 || job->nranks > job->size)
    return hvd__err(HVD_E_INVALID, "hvd_init_ranks: %d ranks of a job of %d", job->nranks,
                    job->size);
  for (int i = 0; i < job->nranks; i++) {
    if (job->ranks[i] < 0 || job->ranks[i] >= job->size)
      return hvd__err(HVD_E_INVALID, "hvd_init_ranks: rank %d is not in 0..%d", job->ranks[i],
                      job->size - 1);
    for (int k = 0; k < i; k++)
      if (job->ranks[k] == job->ranks[i])
        return hvd__err(HVD_E_INVALID, "hvd_init_ranks: rank %d is listed twice", job->ranks[i]);
  }
  return 0;
}

/* Step 1, whichever way the job meets. */
static int meet(hvd_job *job, int want_shm, uint64_t deadline, met *m) {
  if (job->meet.kind == HVD_MEET_ELASTIC) return meet_elastic(job, want_shm, deadline, m);
  if (job->meet.kind == HVD_MEET_MPI)
    return hvd__mpi_meet(job, deadline, &m->table, &m->listen_fd, &m->key);
  m->table = calloc((size_t)job->size, sizeof *m->table);
  if (!m->table) return hvd__err(HVD_E_NOMEM, "allocating the table of %d ranks", job->size);
  HVD__CHECK(meet_at_rendezvous(job, want_shm, deadline, m));
  return job->ranks ? keep_sub_job(job, m) : 0;
}

int hvd__bootstrap(hvd_job *job, hvd_transport **xport) {
  *xport = NULL;
  HVD__CHECK(check_ranks(job));
  if (job->meet.kind == HVD_MEET_ALONE) return 0;

  long start_s, timeout_s;
  int shm_disable;
  HVD__CHECK(hvd__param_int(HVD_P_START_TIMEOUT, &start_s));
  HVD__CHECK(hvd__param_int(HVD_P_GLOO_TIMEOUT_SECONDS, &timeout_s));
  HVD__CHECK(hvd__param_bool(HVD_P_SHM_DISABLE, &shm_disable));
  uint64_t deadline = hvd__deadline_in(start_s * 1000);
  met m = {NULL, -1, {{0}}};
  int rc = meet(job, !shm_disable, deadline, &m);
  /* An elastic worker may wait long to be placed (hvdrun forms the job
   * when enough workers joined); the job's members all joined before it
   * was formed, so connecting to them gets the start timeout afresh. */
  if (job->meet.kind == HVD_MEET_ELASTIC) deadline = hvd__deadline_in(start_s * 1000);
  if (rc == 0 && job->cross_rank < 0)
    hvd__layout_cross(m.table, job->size, job->rank, &job->cross_rank, &job->cross_size);
  if (rc == 0 && job->size > 1) rc = connect_all(job, &m, deadline, timeout_s, xport);
  hvd__net_close(&m.listen_fd);
  free(m.table);
  if (rc < 0) hvd__net_close(&job->control_fd); /* no job: nothing to hear about */
  return rc;
}
