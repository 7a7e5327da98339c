/*
 * bootstrap.c -- from environment variables to a connected transport.
 *
 * The steps of hvd_init for a job of n > 1 ranks:
 *   1. connect to hvdrun's rendezvous and prove we hold the job's secret;
 *   2. listen on the local address of that connection -- the interface
 *      that routes to the launcher is the one our peers can reach too;
 *   3. register that address and receive everyone's;
 *   4. connect the full mesh (transport);
 *   5. set up shared memory among the ranks of each host (host_plan.c
 *      says which, from the table): one host uses it alone, several use
 *      it within each host and TCP between them (hybrid.c).
 * All of it within HOROVOD_START_TIMEOUT.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../env.h"
#include "../transport/hybrid.h"
#include "../transport/iface.h"
#include "../transport/shm.h"
#include "bootstrap.h"
#include "host_plan.h"

/* A JOB variable as an integer in [min, max]; `def` when unset. */
static int job_int(hvd_param_id id, long def, long min, long max, int *out) {
  const char *v = hvd__param_raw(id);
  long x = def;
  if (v) HVD__CHECK(hvd__parse_long(hvd__params[id].name, v, min, max, &x));
  *out = (int)x;
  return 0;
}

static int check_rank(const char *what, int rank, hvd_param_id size_id, int size) {
  if (rank < size) return 0;
  return hvd__err(HVD_E_ENV, "%s=%d is not below %s=%d", what, rank, hvd__params[size_id].name,
                  size);
}

/* "nodename/boot-id"; the boot id reads as "unknown" where /proc lacks it,
 * which only makes more ranks look alike by it, never fewer. */
static void host_id(char out[HVD_HOST_ID_MAX]) {
  struct utsname u;
  char boot[64] = "unknown";
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, boot, sizeof boot - 1);
    boot[n > 0 ? n : 0] = '\0';
    boot[strcspn(boot, "\n")] = '\0';
    close(fd);
  }
  if (uname(&u) != 0) snprintf(u.nodename, sizeof u.nodename, "unknown");
  snprintf(out, HVD_HOST_ID_MAX, "%.64s/%.40s", u.nodename[0] ? u.nodename : "unknown",
           boot[0] ? boot : "unknown");
}

int hvd__job_from_env(hvd_job *job) {
  memset(job, 0, sizeof *job);
  HVD__CHECK(job_int(HVD_P_SIZE, 1, 1, 1 << 20, &job->size));
  HVD__CHECK(job_int(HVD_P_RANK, 0, 0, 1 << 20, &job->rank));
  HVD__CHECK(check_rank("HOROVOD_RANK", job->rank, HVD_P_SIZE, job->size));
  /* Without the local/cross variables (a launcher that sets only rank and
   * size), assume one host: local = global, one "cross" group. */
  HVD__CHECK(job_int(HVD_P_LOCAL_SIZE, job->size, 1, job->size, &job->local_size));
  HVD__CHECK(job_int(HVD_P_LOCAL_RANK, job->rank, 0, 1 << 20, &job->local_rank));
  HVD__CHECK(check_rank("HOROVOD_LOCAL_RANK", job->local_rank, HVD_P_LOCAL_SIZE,
                        job->local_size));
  HVD__CHECK(job_int(HVD_P_CROSS_SIZE, 1, 1, job->size, &job->cross_size));
  HVD__CHECK(job_int(HVD_P_CROSS_RANK, 0, 0, 1 << 20, &job->cross_rank));
  HVD__CHECK(check_rank("HOROVOD_CROSS_RANK", job->cross_rank, HVD_P_CROSS_SIZE,
                        job->cross_size));
  const char *host = hvd__param_raw(HVD_P_HOSTNAME);
  if (host && strlen(host) >= sizeof job->hostname)
    return hvd__err(HVD_E_ENV, "HOROVOD_HOSTNAME is longer than %zu bytes",
                    sizeof job->hostname - 1);
  if (host)
    strcpy(job->hostname, host);
  else if (gethostname(job->hostname, sizeof job->hostname - 1) != 0)
    strcpy(job->hostname, "localhost");
  host_id(job->host_id);
  return 0;
}

/* Where the rendezvous is and the key that opens it. */
static int rdzv_from_env(char *addr, size_t cap, int *port, hvd_secret *key) {
  const char *a = hvd__param_raw(HVD_P_RDZV_ADDR);
  const char *p = hvd__param_raw(HVD_P_RDZV_PORT);
  const char *k = hvd__param_raw(HVD_P_SECRET_KEY);
  if (!a || !p || !k)
    return hvd__err(HVD_E_ENV,
                    "HOROVOD_SIZE > 1 but %s is not set: start the job with hvdrun "
                    "(or set HOROVOD_GLOO_RENDEZVOUS_ADDR, HOROVOD_GLOO_RENDEZVOUS_PORT "
                    "and _HOROVOD_SECRET_KEY)",
                    !a ? "HOROVOD_GLOO_RENDEZVOUS_ADDR"
                       : !p ? "HOROVOD_GLOO_RENDEZVOUS_PORT" : "_HOROVOD_SECRET_KEY");
  if (strlen(a) >= cap)
    return hvd__err(HVD_E_ENV, "HOROVOD_GLOO_RENDEZVOUS_ADDR is longer than %zu bytes", cap - 1);
  strcpy(addr, a);
  long port_l;
  HVD__CHECK(hvd__parse_long("HOROVOD_GLOO_RENDEZVOUS_PORT", p, 1, 65535, &port_l));
  *port = (int)port_l;
  int rc = hvd__secret_decode(k, key);
  return rc < 0 ? hvd__err_prefix(rc, "_HOROVOD_SECRET_KEY") : 0;
}

/* Where to listen for the peers: HOROVOD_GLOO_IFACE's interface, or the
 * one that reached the launcher -- the interface that routes to hvdrun is
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

/* Steps 2-3: listen where the peers can reach us, learn everyone's entry. */
static int meet(const hvd_job *job, int want_shm, int rdzv_fd, uint64_t deadline,
                int *listen_fd, hvd_rdzv_entry *table) {
  hvd_rdzv_entry me;
  memset(&me, 0, sizeof me);
  me.rank = (uint32_t)job->rank;
  me.size = (uint32_t)job->size;
  me.local_rank = (uint32_t)job->local_rank;
  me.local_size = (uint32_t)job->local_size;
  me.shm = (uint8_t)want_shm;
  strcpy(me.hostname, job->hostname);
  strcpy(me.host_id, job->host_id);
  HVD__CHECK(listen_addr(job, rdzv_fd, &me));
  hvd__log(HVD_LOG_DEBUG, "rank %d: listening for peers on %s (%s)", job->rank, me.listen.addr,
           me.iface);
  HVD__CHECK(hvd__net_listen(me.listen.addr, 0, listen_fd, &me.listen.port));
  return hvd__rdzv_register(rdzv_fd, &me, deadline, table);
}

/* Step 5: what the plan says joins this rank to the others.  Consumes
 * tcp, whatever happens. */
static int join(const hvd_host_plan *plan, const hvd_tcp_config *cfg, hvd_transport *tcp,
                hvd_transport **xport) {
  hvd_transport *shm = NULL;
  if (plan->why[0] && plan->me == 0)
    hvd__log(HVD_LOG_WARNING, "no shared memory among the ranks placed on host '%s', using "
             "TCP: %s", hvd__param_raw(HVD_P_HOSTNAME) ? hvd__param_raw(HVD_P_HOSTNAME)
                                                        : "this host", plan->why);
  if (plan->shm) {
    hvd_shm_config sc = {plan->members, plan->n, plan->me, cfg->key, cfg->timeout_ms};
    int rc = hvd__shm_setup(&sc, tcp, &shm);
    if (rc < 0) {
      tcp->ops->abort(tcp, -1, hvd_last_error());
      tcp->ops->destroy(tcp);
      return rc;
    }
  }
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

int hvd__bootstrap(const hvd_job *job, hvd_transport **xport) {
  *xport = NULL;
  if (job->size == 1) return 0;

  long start_s, timeout_s;
  int shm_disable;
  HVD__CHECK(hvd__param_int(HVD_P_START_TIMEOUT, &start_s));
  HVD__CHECK(hvd__param_int(HVD_P_GLOO_TIMEOUT_SECONDS, &timeout_s));
  HVD__CHECK(hvd__param_bool(HVD_P_SHM_DISABLE, &shm_disable));
  hvd_tcp_config cfg;
  memset(&cfg, 0, sizeof cfg);
  char addr[HVD_NET_ADDR_MAX + 192];
  int port = 0, rdzv_fd = -1;
  HVD__CHECK(rdzv_from_env(addr, sizeof addr, &port, &cfg.key));

  uint64_t deadline = hvd__deadline_in(start_s * 1000);
  hvd_peer_addr *peers = calloc((size_t)job->size, sizeof *peers);
  hvd_rdzv_entry *table = calloc((size_t)job->size, sizeof *table);
  hvd_host_plan plan = {0};
  hvd_transport *tcp = NULL;
  cfg.listen_fd = -1;
  int rc = peers && table ? 0 : hvd__err(HVD_E_NOMEM, "allocating the table of %d ranks",
                                         job->size);
  if (rc == 0)
    rc = hvd__rdzv_connect(addr, port, &cfg.key, (uint32_t)job->rank, deadline, &rdzv_fd);
  if (rc == 0) rc = meet(job, !shm_disable, rdzv_fd, deadline, &cfg.listen_fd, table);
  hvd__net_close(&rdzv_fd);
  if (rc < 0) {
    hvd__err_prefix(rc, "rendezvous at %s:%d", addr, port);
    goto free_all;
  }
  rc = hvd__host_plan(table, job->size, job->rank, &plan);
  if (rc < 0) goto free_all;
  for (int i = 0; i < job->size; i++) peers[i] = table[i].listen;
  cfg.rank = job->rank;
  cfg.size = job->size;
  cfg.peers = peers;
  cfg.connect_deadline = deadline;
  cfg.timeout_ms = (int)(timeout_s * 1000);
  rc = hvd__tcp_create(&cfg, &tcp); /* owns the listener from here, even on failure */
  cfg.listen_fd = -1;
  if (rc < 0)
    hvd__err_prefix(rc, "connecting to the other ranks");
  else
    rc = join(&plan, &cfg, tcp, xport);
free_all:
  hvd__net_close(&cfg.listen_fd);
  hvd__host_plan_free(&plan);
  free(table);
  free(peers);
  return rc;
}
