/*
 * source_env.c -- what the sources (source.h) share: reading and checking
 * their environment variables, the job's secret, a meeting at rank 0's
 * rendezvous, and this host's names.
 */
#include "source.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "env.h"

/* The first port derived for a job (below the kernel's ephemeral range),
 * and how many there are. */
#define DERIVED_PORT_BASE 10000
#define DERIVED_PORTS 20000

const char *hvd__env(const char *name) {
  const char *v = getenv(name);
  return v && v[0] ? v : NULL;
}

int hvd__env_int(const char *name, long min, long max, long *out) {
  const char *v = hvd__env(name);
  if (!v) return hvd__err(HVD_E_ENV, "%s is not set", name);
  return hvd__parse_long(name, v, min, max, out);
}

int hvd__env_agree(const char *name, long expected, const char *other) {
  const char *v = hvd__env(name);
  long x;
  if (!v) return 0;
  HVD__CHECK(hvd__parse_long(name, v, 0, 1L << 40, &x));
  if (x == expected) return 0;
  return hvd__err(HVD_E_ENV, "%s=%ld disagrees with %s=%ld: variables of another job or job "
                  "step in the environment?", name, x, other, expected);
}

int hvd__env_below(const char *rank_name, long rank, const char *size_name, long size) {
  if (rank < size) return 0;
  return hvd__err(HVD_E_ENV, "%s=%ld is not below %s=%ld", rank_name, rank, size_name, size);
}

int hvd__env_world(hvd_job *job, const char *rank_var, const char *size_var,
                   const char *local_rank_var, const char *local_size_var) {
  long size, rank, lsize, lrank;
  HVD__CHECK(hvd__env_int(size_var, 1, 1 << 20, &size));
  HVD__CHECK(hvd__env_int(rank_var, 0, 1 << 20, &rank));
  HVD__CHECK(hvd__env_below(rank_var, rank, size_var, size));
  HVD__CHECK(hvd__env_int(local_size_var, 1, size, &lsize));
  HVD__CHECK(hvd__env_int(local_rank_var, 0, 1 << 20, &lrank));
  HVD__CHECK(hvd__env_below(local_rank_var, lrank, local_size_var, lsize));
  job->rank = (int)rank;
  job->size = (int)size;
  job->local_rank = (int)lrank;
  job->local_size = (int)lsize;
  hvd__own_hostname(job);
  return 0;
}

int hvd__env_secret(const char *launcher, hvd_secret *key) {
  const char *k = hvd__param_raw(HVD_P_SECRET_KEY);
  if (!k)
    return hvd__err(HVD_E_ENV, "_HOROVOD_SECRET_KEY is not set: a job started by %s without "
                    "hvdrun authenticates every connection with a secret its ranks share; "
                    "export one before starting it: export _HOROVOD_SECRET_KEY=$(hvdrun "
                    "--make-secret)", launcher);
  int rc = hvd__secret_decode(k, key);
  return rc < 0 ? hvd__err_prefix(rc, "_HOROVOD_SECRET_KEY") : 0;
}

/* A port from the secret: the same on every rank, fresh for every job. */
static int port_of_secret(const hvd_secret *secret, int *port) {
  hvd_secret d;
  HVD__CHECK(hvd__secret_derive(secret, "hvd rendezvous port", &d));
  uint32_t x = (uint32_t)d.bytes[0] | (uint32_t)d.bytes[1] << 8 | (uint32_t)d.bytes[2] << 16;
  *port = DERIVED_PORT_BASE + (int)(x % DERIVED_PORTS);
  return 0;
}

int hvd__meet_rank0(hvd_job *job, const char *launcher, const char *addr, int default_port,
                    const char *scope) {
  hvd_meet *m = &job->meet;
  hvd_secret secret;
  char label[256];
  m->kind = HVD_MEET_RANK0;
  m->launcher = launcher;
  HVD__CHECK(hvd__env_secret(launcher, &secret));
  const char *a = hvd__param_raw(HVD_P_RDZV_ADDR);
  if (!a) a = addr;
  if (!a)
    return hvd__err(HVD_E_ENV, "HOROVOD_GLOO_RENDEZVOUS_ADDR is not set: a job of several "
                    "hosts started by %s without MPI meets at rank 0's host, which it names",
                    launcher);
  if (strlen(a) >= sizeof m->addr)
    return hvd__err(HVD_E_ENV, "the rendezvous address '%.64s...' is too long", a);
  strcpy(m->addr, a);
  const char *p = hvd__param_raw(HVD_P_RDZV_PORT);
  long port = default_port;
  if (p) HVD__CHECK(hvd__parse_long("HOROVOD_GLOO_RENDEZVOUS_PORT", p, 1, 65535, &port));
  m->port = (int)port;
  if (m->port <= 0) HVD__CHECK(port_of_secret(&secret, &m->port));
  snprintf(label, sizeof label, "hvd rank 0 rendezvous %s", scope);
  return hvd__secret_derive(&secret, label, &m->key);
}

void hvd__own_hostname(hvd_job *job) {
  if (gethostname(job->hostname, sizeof job->hostname - 1) != 0)
    strcpy(job->hostname, "localhost");
}

int hvd__launcher_hostname(hvd_job *job) {
  const char *host = hvd__param_raw(HVD_P_HOSTNAME);
  if (!host) {
    hvd__own_hostname(job);
    return 0;
  }
  if (strlen(host) >= sizeof job->hostname)
    return hvd__err(HVD_E_ENV, "HOROVOD_HOSTNAME is longer than %zu bytes",
                    sizeof job->hostname - 1);
  strcpy(job->hostname, host);
  return 0;
}

/* "nodename/boot-id"; the boot id reads as "unknown" where /proc lacks it,
 * which only makes more ranks look alike by it, never fewer. */
void hvd__host_id(char out[HVD_HOST_ID_MAX]) {
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
