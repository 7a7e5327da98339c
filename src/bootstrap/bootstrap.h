/*
 * bootstrap.h -- who am I, and who are my peers.
 *
 * Reads the job's description from the environment its launcher set
 * (source.h: hvdrun's HOROVOD_*, Open MPI's OMPI_COMM_WORLD_*, MPICH's
 * PMI_*, SLURM's SLURM_*, and PMIx's under `srun --mpi=pmix`; without any,
 * the process is a job of size 1), validates every value, and for a job of
 * more than one rank meets the others -- at hvdrun's rendezvous, at one
 * rank 0 hosts, or through MPI -- and builds the transport.
 */
#ifndef HVD_BOOTSTRAP_H
#define HVD_BOOTSTRAP_H

#include "transport/transport.h"
#include "rdzv/rdzv.h"

/* How the ranks of a job find each other. */
typedef enum {
  HVD_MEET_ALONE,  /* a job of one rank: nobody to meet */
  HVD_MEET_SERVER, /* at a rendezvous server the launcher runs (hvdrun's) */
  HVD_MEET_RANK0,  /* at a rendezvous server rank 0 runs inside hvd_init (rdzv_host.h) */
  HVD_MEET_MPI,    /* through MPI: entries and a fresh secret exchanged (mpi_controller.h) */
  HVD_MEET_ELASTIC /* an elastic worker: hvdrun's rendezvous places it (rdzv_elastic.h) */
} hvd_meet_kind;

typedef struct {
  hvd_meet_kind kind;
  /* SERVER, RANK0: where the rendezvous listens (a numeric address or a
   * name) and the key that opens it. */
  char addr[HVD_HOSTNAME_MAX];
  int port;
  hvd_secret key;
  const char *launcher;  /* who started the job, for messages: "hvdrun", "srun", ... */
  const void *mpi_comm;  /* MPI: an MPI_Comm * from hvd_init_comm(); NULL: MPI_COMM_WORLD */
  uint32_t worker;       /* ELASTIC: this worker's id */
} hvd_meet;

typedef struct {
  int rank, size, local_rank, local_size;
  int cross_rank, cross_size;      /* -1 until the meeting, when a source cannot say */
  char hostname[HVD_HOSTNAME_MAX]; /* the launcher's name for this host */
  char host_id[HVD_HOST_ID_MAX];   /* where this process really runs */
  const char *source;              /* the environment that described the job */
  hvd_meet meet;
  /* hvd_init_ranks(): the ranks (of the job the environment describes)
   * that form this job, numbered by their place in the list; NULL: all. */
  const int *ranks;
  int nranks;
  /* ELASTIC, after the meeting: the job's number (generation) and the
   * connection to hvdrun on which it announces host changes (the
   * caller's to close); -1 otherwise. */
  uint32_t generation;
  int control_fd;
} hvd_job;

/* What hvd_init's variants ask for beyond the environment. */
typedef struct {
  const int *ranks; /* hvd_init_ranks(); NULL: every rank */
  int nranks;
  const void *mpi_comm; /* hvd_init_comm(): an MPI_Comm *; NULL: none */
} hvd_init_spec;

/* hvd_init and its variants (api.c). */
int hvd__init(const hvd_init_spec *spec);

/* Fills job from the environment, through the first source of source.h's
 * table whose variables are there.  HVD_E_ENV naming the variable when a
 * value is malformed, out of range or inconsistent with the others.
 *
 * hostname is the launcher's name for the host (HOROVOD_HOSTNAME, the
 * node's name in SLURM's list, or the host's own name): ranks with the
 * same one were placed on one host.  host_id is what the kernel says,
 * "nodename/boot-id": two processes with the same one share memory.  The
 * boot id alone would not do: network namespaces (hosts emulated on one
 * machine) share it and /dev/shm, and only their UTS name differs. */
int hvd__job_from_env(hvd_job *job);

/* "nodename/boot-id" of this process (see above). */
void hvd__host_id(char out[HVD_HOST_ID_MAX]);

/* job->hostname = this host's own name, for launchers that name none. */
void hvd__own_hostname(hvd_job *job);
/* The name hvdrun gave this rank's host (HOROVOD_HOSTNAME), else this
 * machine's; HVD_E_ENV if it does not fit. */
int hvd__launcher_hostname(hvd_job *job);

/* Joins the job: *xport is NULL for a job of size 1, else a connected,
 * authenticated transport to every peer.  Completes job: the cross rank
 * and size from the table when the source could not say them, and for a
 * sub-job (job->ranks) the rank, size and local values within it; a rank
 * the list leaves out gets HVD_E_INVALID once the others have met. */
int hvd__bootstrap(hvd_job *job, hvd_transport **xport);

#endif /* HVD_BOOTSTRAP_H */
