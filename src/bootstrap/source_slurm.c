/*
 * source_slurm.c -- a task of a SLURM job step (`srun -n 4 ./train`, no
 * hvdrun, no MPI): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 * SLURM_NODEID, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE,
 * SLURM_JOB_ID and SLURM_STEP_ID.
 *
 * SLURM gives no local size: it is the count of SLURM_NODEID's node in
 * SLURM_STEP_TASKS_PER_NODE.  Variables that say the same thing twice
 * (SLURM_JOBID, SLURM_STEPID, SLURM_NPROCS, SLURM_STEP_NUM_TASKS,
 * SLURM_STEP_NUM_NODES, SLURM_GTIDS, SLURMD_NODENAME, PMIx's namespace)
 * must agree: a task that inherited another step's variables is refused,
 * naming the variable, rather than joining the wrong job.
 *
 * Rank 0 hosts the rendezvous on the first node of the step, at
 * HOROVOD_GLOO_RENDEZVOUS_PORT or, by default,
 *   10000 + (SLURM_JOB_ID * 32 + SLURM_STEP_ID) mod 20000,
 * with a key derived from _HOROVOD_SECRET_KEY and the job and step ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

#define ID_MAX 4294967295L /* SLURM's ids are 32-bit */
#define STEP_PORTS 32      /* steps of one job before the next job's ports */

/* `a`, or its older twin `b` when only that is set; the twin, when both
 * are, must agree. */
static int either(const char *a, const char *b, long max, long *out) {
  const char *name = hvd__env(a) || !hvd__env(b) ? a : b;
  HVD__CHECK(hvd__env_int(name, 0, max, out));
  return name == a ? hvd__env_agree(b, *out, a) : 0;
}

/* SLURM_GTIDS: this node's tasks, which must be local size many, with
 * this task at its local id. */
static int check_gtids(const hvd_job *job) {
  const char *v = hvd__env("SLURM_GTIDS");
  if (!v) return 0;
  int n = 0, at = -1;
  for (const char *p = v; *p;) {
    char *end;
    long id = strtol(p, &end, 10);
    if (end == p || (*end != ',' && *end != '\0'))
      return hvd__err(HVD_E_ENV, "SLURM_GTIDS='%s': expected task ids like 2,3", v);
    if (id == job->rank) at = n;
    n++;
    p = *end ? end + 1 : end;
  }
  if (n != job->local_size || at != job->local_rank)
    return hvd__err(HVD_E_ENV, "SLURM_GTIDS='%s' does not list SLURM_PROCID=%d as task %d of "
                    "the %d of this node: variables of another job step?", v, job->rank,
                    job->local_rank, job->local_size);
  return 0;
}

/* The other names the step's facts go by. */
static int check_twins(const hvd_job *job, const hvd_slurm_step *s) {
  HVD__CHECK(hvd__env_agree("SLURM_STEP_NUM_TASKS", job->size, "SLURM_NTASKS"));
  HVD__CHECK(hvd__env_agree("SLURM_STEP_NUM_NODES", s->nodes.n,
                            "the node count of SLURM_STEP_NODELIST"));
  HVD__CHECK(check_gtids(job));
  const char *node = hvd__env("SLURMD_NODENAME");
  if (node && strcmp(node, job->hostname) != 0)
    return hvd__err(HVD_E_ENV, "SLURMD_NODENAME=%s, but SLURM_NODEID=%ld is %s in "
                    "SLURM_STEP_NODELIST: variables of another job step?", node, s->node_id,
                    job->hostname);
  /* srun --mpi=pmix names the step's namespace "slurm.pmix.JOB.STEP". */
  const char *ns = hvd__env("PMIX_NAMESPACE");
  char want[64];
  snprintf(want, sizeof want, "slurm.pmix.%ld.%ld", s->job_id, s->step_id);
  if (ns && strncmp(ns, "slurm.pmix.", 11) == 0 && strcmp(ns, want) != 0)
    return hvd__err(HVD_E_ENV, "PMIX_NAMESPACE=%s is not this step's (%s, from SLURM_JOB_ID "
                    "and SLURM_STEP_ID): variables of another job step?", ns, want);
  return 0;
}

/* The tasks of each node of the step, and this task's place there. */
static int read_layout(hvd_job *job, hvd_slurm_step *s) {
  int *tasks = NULL, ntasks = 0;
  const char *per = hvd__env("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                                                          : "SLURM_TASKS_PER_NODE";
  const char *text = hvd__env(per);
  if (!text) return hvd__err(HVD_E_ENV, "SLURM_STEP_TASKS_PER_NODE is not set");
  HVD__CHECK(hvd__slurm_counts(per, text, &tasks, &ntasks));
  long sum = 0, node, local;
  for (int i = 0; i < ntasks; i++) sum += tasks[i];
  int rc = ntasks == s->nodes.n ? 0
           : hvd__err(HVD_E_ENV, "%s='%s' lists %d nodes, SLURM_STEP_NODELIST %d", per, text,
                      ntasks, s->nodes.n);
  if (rc == 0 && sum != job->size)
    rc = hvd__err(HVD_E_ENV, "%s='%s' adds up to %ld tasks, SLURM_NTASKS=%d: variables of "
                  "another job step?", per, text, sum, job->size);
  if (rc == 0) rc = hvd__env_int("SLURM_NODEID", 0, ntasks - 1, &node);
  if (rc == 0) rc = hvd__env_int("SLURM_LOCALID", 0, HVD_SLURM_COUNT_MAX, &local);
  if (rc == 0) rc = hvd__env_below("SLURM_LOCALID", local, "its node's count in SLURM_STEP_"
                                   "TASKS_PER_NODE", tasks[node]);
  if (rc == 0) {
    s->node_id = node;
    job->local_rank = (int)local;
    job->local_size = tasks[node];
    snprintf(job->hostname, sizeof job->hostname, "%s", s->nodes.names[node]);
  }
  free(tasks);
  return rc;
}

int hvd__slurm_step(hvd_job *job, hvd_slurm_step *s) {
  long size, rank;
  memset(s, 0, sizeof *s);
  HVD__CHECK(either("SLURM_JOB_ID", "SLURM_JOBID", ID_MAX, &s->job_id));
  HVD__CHECK(either("SLURM_STEP_ID", "SLURM_STEPID", ID_MAX, &s->step_id));
  HVD__CHECK(either("SLURM_NTASKS", "SLURM_NPROCS", 1 << 20, &size));
  if (size < 1) return hvd__err(HVD_E_ENV, "SLURM_NTASKS=0");
  HVD__CHECK(hvd__env_int("SLURM_PROCID", 0, 1 << 20, &rank));
  HVD__CHECK(hvd__env_below("SLURM_PROCID", rank, "SLURM_NTASKS", size));
  job->rank = (int)rank;
  job->size = (int)size;
  const char *list = hvd__env("SLURM_STEP_NODELIST");
  if (!list) return hvd__err(HVD_E_ENV, "SLURM_STEP_NODELIST is not set");
  HVD__CHECK(hvd__slurm_hostlist("SLURM_STEP_NODELIST", list, &s->nodes));
  int rc = read_layout(job, s);
  if (rc == 0) rc = check_twins(job, s);
  if (rc < 0) hvd__slurm_hostlist_free(&s->nodes);
  return rc;
}

static int present(void) {
  return hvd__env("SLURM_PROCID") && (hvd__env("SLURM_STEP_ID") || hvd__env("SLURM_STEPID"));
}

static int read_job(hvd_job *job) {
  hvd_slurm_step s;
  char scope[64];
  HVD__CHECK(hvd__slurm_step(job, &s));
  job->meet.launcher = "srun";
  int rc = 0;
  if (job->rank == 0 && s.node_id != 0 && !hvd__env("HOROVOD_GLOO_RENDEZVOUS_ADDR"))
    rc = hvd__err(HVD_E_ENV, "task 0 runs on SLURM_NODEID=%ld, not on the first node of "
                  "SLURM_STEP_NODELIST (%s), where it would host the rendezvous: set "
                  "HOROVOD_GLOO_RENDEZVOUS_ADDR to its host", s.node_id, s.nodes.names[0]);
  snprintf(scope, sizeof scope, "slurm %ld.%ld", s.job_id, s.step_id);
  int port = 10000 + (int)((s.job_id * STEP_PORTS + s.step_id) % 20000);
  if (rc == 0 && job->size > 1) rc = hvd__meet_rank0(job, "srun", s.nodes.names[0], port, scope);
  hvd__slurm_hostlist_free(&s.nodes);
  return rc;
}

const hvd_source hvd__source_slurm = {"SLURM", present, read_job};
