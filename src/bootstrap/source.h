/*
 * source.h -- the sources of "who am I": one per launcher whose
 * environment hvd reads, tried in this order (source.c's table):
 *
 *   elastic   HOROVOD_ELASTIC=1, HOROVOD_ELASTIC_WORKER_ID  hvdrun's, which places it
 *   hvdrun    HOROVOD_RANK, _SIZE, _LOCAL_.., _CROSS_..  hvdrun's rendezvous
 *   Open MPI  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_..   MPI (built without it: rank 0's)
 *   PMIx      PMIX_RANK and SLURM's, in MPI builds     MPI: `srun --mpi=pmix`
 *   MPICH     PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, ..  rank 0's rendezvous
 *   SLURM     SLURM_PROCID, SLURM_NTASKS, ...          rank 0's rendezvous
 *
 * The first whose variables are there describes the job, so hvdrun's own
 * variables win over those of a scheduler hvdrun runs under.  A source
 * is a small struct: adding a launcher is adding one file and a row.
 * Each validates every variable it reads (HVD_E_ENV naming it) and says
 * how the ranks meet (bootstrap.h's hvd_meet).
 */
#ifndef HVD_SOURCE_H
#define HVD_SOURCE_H

#include "bootstrap.h"
#include "rdzv/slurm_lists.h"

typedef struct {
  const char *name;
  int (*present)(void);      /* 1 when its variables are in the environment */
  int (*read)(hvd_job *job); /* fills job and job->meet; 0 or HVD_E_ENV */
} hvd_source;

extern const hvd_source hvd__source_elastic, hvd__source_hvdrun, hvd__source_ompi,
    hvd__source_pmix, hvd__source_pmi, hvd__source_slurm;

/* ---- helpers the sources share (source_env.c) ---- */

/* hvdrun's rendezvous from HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT and
 * _HOROVOD_SECRET_KEY (source_hvdrun.c; the elastic source's too). */
int hvd__meet_hvdrun(hvd_meet *m);

/* The value of `name`, or NULL when unset or empty. */
const char *hvd__env(const char *name);

/* `name` as an integer in [min, max]; HVD_E_ENV when it is missing or
 * malformed. */
int hvd__env_int(const char *name, long min, long max, long *out);

/* HVD_E_ENV unless `name`'s value (when set) equals `expected`, the
 * value of `other`: two variables that must agree and do not come from
 * one job step. */
int hvd__env_agree(const char *name, long expected, const char *other);

/* rank < size, else HVD_E_ENV naming both variables. */
int hvd__env_below(const char *rank_name, long rank, const char *size_name, long size);

/* rank, size, local rank and local size from four variables (Open MPI's,
 * MPICH's), checked against each other; hostname this host's own. */
int hvd__env_world(hvd_job *job, const char *rank_var, const char *size_var,
                   const char *local_rank_var, const char *local_size_var);

/* The job's secret from _HOROVOD_SECRET_KEY, for a job no hvdrun started:
 * missing is an error saying how to set it (never an unauthenticated
 * job).  `launcher` names what started the job, for that message. */
int hvd__env_secret(const char *launcher, hvd_secret *key);

/* A meeting at rank 0's rendezvous: addr (unless HOROVOD_GLOO_RENDEZVOUS_ADDR
 * says otherwise), port from HOROVOD_GLOO_RENDEZVOUS_PORT or
 * `default_port` (<= 0: derived from the secret, which is fresh per
 * job), and the key: HMAC(secret, "hvd rank 0 rendezvous " + scope), so
 * jobs that share a secret but not a scope (two SLURM steps) never
 * authenticate each other. */
int hvd__meet_rank0(hvd_job *job, const char *launcher, const char *addr, int default_port,
                    const char *scope);

/* What SLURM says of this task's job step (source_slurm.c): job->rank,
 * size, local rank and size and hostname (its node's name in the list),
 * every SLURM_* variable checked against the others; the SLURM and PMIx
 * sources share it.  step->nodes is the caller's to free. */
typedef struct {
  long job_id, step_id, node_id;
  hvd_hostlist nodes; /* SLURM_STEP_NODELIST */
} hvd_slurm_step;
int hvd__slurm_step(hvd_job *job, hvd_slurm_step *step);


#endif /* HVD_SOURCE_H */
