/*
 * source_hvdrun.c -- a job hvdrun started: HOROVOD_RANK, HOROVOD_SIZE,
 * HOROVOD_LOCAL_*, HOROVOD_CROSS_*, HOROVOD_HOSTNAME, and hvdrun's
 * rendezvous at HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT with _HOROVOD_SECRET_KEY
 * (Horovod's names; another launcher may set them too).
 */
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "source.h"

/* A JOB variable as an integer in [min, max]; `def` when unset. */
static int job_int(hvd_param_id id, long def, long min, long max, int *out) {
  const char *v = hvd__param_raw(id);
  long x = def;
  if (v) HVD__CHECK(hvd__parse_long(hvd__params[id].name, v, min, max, &x));
  *out = (int)x;
  return 0;
}

static int present(void) {
  return hvd__param_raw(HVD_P_SIZE) != NULL || hvd__param_raw(HVD_P_RANK) != NULL;
}

int hvd__meet_hvdrun(hvd_meet *m) {
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
  if (strlen(a) >= sizeof m->addr)
    return hvd__err(HVD_E_ENV, "HOROVOD_GLOO_RENDEZVOUS_ADDR is longer than %zu bytes",
                    sizeof m->addr - 1);
  strcpy(m->addr, a);
  long port;
  HVD__CHECK(hvd__parse_long("HOROVOD_GLOO_RENDEZVOUS_PORT", p, 1, 65535, &port));
  m->port = (int)port;
  int rc = hvd__secret_decode(k, &m->key);
  return rc < 0 ? hvd__err_prefix(rc, "_HOROVOD_SECRET_KEY") : 0;
}

static int read_job(hvd_job *job) {
  HVD__CHECK(job_int(HVD_P_SIZE, 1, 1, 1 << 20, &job->size));
  HVD__CHECK(job_int(HVD_P_RANK, 0, 0, 1 << 20, &job->rank));
  HVD__CHECK(hvd__env_below("HOROVOD_RANK", job->rank, "HOROVOD_SIZE", job->size));
  /* Without the local/cross variables (a launcher that sets only rank and
   * size), assume one host: local = global, one "cross" group. */
  HVD__CHECK(job_int(HVD_P_LOCAL_SIZE, job->size, 1, job->size, &job->local_size));
  HVD__CHECK(job_int(HVD_P_LOCAL_RANK, job->rank, 0, 1 << 20, &job->local_rank));
  HVD__CHECK(hvd__env_below("HOROVOD_LOCAL_RANK", job->local_rank, "HOROVOD_LOCAL_SIZE",
                            job->local_size));
  HVD__CHECK(job_int(HVD_P_CROSS_SIZE, 1, 1, job->size, &job->cross_size));
  HVD__CHECK(job_int(HVD_P_CROSS_RANK, 0, 0, 1 << 20, &job->cross_rank));
  HVD__CHECK(hvd__env_below("HOROVOD_CROSS_RANK", job->cross_rank, "HOROVOD_CROSS_SIZE",
                            job->cross_size));
  HVD__CHECK(hvd__launcher_hostname(job));
  job->meet.launcher = "hvdrun";
  if (job->size == 1) return 0;
  job->meet.kind = HVD_MEET_SERVER;
  return hvd__meet_hvdrun(&job->meet);
}

const hvd_source hvd__source_hvdrun = {"hvdrun", present, read_job};
