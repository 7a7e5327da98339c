/*
 * job_int.h -- what job.c and job_elastic.c share: the job and its loop's
 * hooks.  Not for anyone else.
 *
 * A fixed job's hosts are the host plan's, each with its ranks.  An
 * elastic job starts each worker as a host of its own (launch.h: a
 * session of one rank), so that one worker can be stopped alone; its
 * "rank" in the launcher is its worker id.
 */
#ifndef HVDRUN_JOB_INT_H
#define HVDRUN_JOB_INT_H

#include "addrs.h"
#include "rdzv/rdzv_server.h"
#include "job.h"
#include "launch.h"
#include "signals.h"

#define GRACE_MS 2000
#define LINGER_MS 1000
#define TERM_AFTER_FAILURE_MS 1500
#define TERM_AFTER_SIGNAL_MS 2000
#define DRAIN_MS 500
#define CLOSE_MS 1000

typedef enum {
  PHASE_RUN, PHASE_LINGER, PHASE_GRACE, PHASE_TERM, PHASE_KILL, PHASE_CLOSE, PHASE_DONE
} phase;

/* hvdrun's own poll slots, before the hosts'. */
enum { SLOT_SIGNALS, SLOT_STDOUT, SLOT_STDERR, SLOT_FIXED };

typedef struct job_elastic job_elastic;

typedef struct launch_job {
  launch_ctx ctx;
  const host_plan *plan; /* a fixed job's hosts */
  const rdzv_addrs *addrs;
  launch_host **hosts;   /* in the order started */
  int nhosts, cap_hosts;
  int undone; /* ranks whose exit is not known yet */
  hvd_secret key;
  hvd_rdzv_server *rdzv;
  int port[HVD_RDZV_LISTEN_MAX]; /* where it listens on addrs->addr[i] */
  int sig_fd;
  output_sink out, err;
  phase phase;
  uint64_t phase_end;
  int exit_code;   /* -1 until a failure or a signal decides it */
  int interrupted; /* a signal asked hvdrun to stop */
  struct pollfd *fds;
  struct pollfd *fds_polled; /* while dispatching: the array poll() filled */
  size_t fds_cap, nfds;
  int fixed[SLOT_FIXED]; /* what fds[i] is, for i < nfixed */
  size_t nfixed;
  size_t rdzv_first, rdzv_count;
  job_elastic *el; /* NULL: a fixed job */
  hvd_rdzv_elastic_hooks rdzv_hooks; /* an elastic job's rendezvous tells its driver */
} job;

/* Says "hvdrun: ..." on stderr: always, or only under --verbose. */
void job_say(job *j, int always, const char *fmt, ...) HVD__PRINTF(3, 4);

/* A host of spec's ranks, its streams ready, not started; NULL (said)
 * when out of memory.  spec must outlive the job. */
launch_host *job_add_host(job *j, const host_spec *spec, const char *rdzv_addr, int rdzv_port);
/* Room in the poll set for n more descriptors.  0, or -1 (out of memory). */
int job_grow_fds(job *j, size_t n);
/* Starts it with its backend. */
int job_start_host(job *j, launch_host *h);
/* Stops one host's ranks: SIGTERM (and SIGCONT) now, SIGKILL after
 * TERM_AFTER_FAILURE_MS if they are still there. */
void job_stop_host(job *j, launch_host *h);
/* A failure decides the exit status and starts the countdown. */
void job_fail(job *j, int code);

/* ---- job_elastic.c ---- */

/* Starts the driver: discovery, the first workers.  -1 (said) on failure. */
int job_elastic_start(job *j);
void job_elastic_free(job *j);
/* What the loop hands the driver: its descriptors (the discovery
 * script's pipes), what poll() said of them, its deadline and time. */
size_t job_elastic_poll_max(const job *j);
size_t job_elastic_prepare(job *j, struct pollfd *fds);
void job_elastic_dispatch(job *j, const struct pollfd *fds, size_t n);
uint64_t job_elastic_deadline(const job *j);
void job_elastic_expire(job *j, uint64_t now);
/* A child exited: 1 if it was the discovery script. */
int job_elastic_reaped(job *j, pid_t pid, int status);
/* A worker's exit is known (after it was reported). */
void job_elastic_exited(job *j, launch_rank *r);
/* A signal stops the job: the driver ends it, saying so. */
void job_elastic_interrupted(job *j, int sig);
/* The rendezvous server's hooks (into out, for the job's server). */
void job_elastic_rdzv_hooks(job *j, hvd_rdzv_elastic_hooks *out);
/* 1 once the driver ended the job. */
int job_elastic_ended(const job *j);
/* Unlinks the shared-memory segments of the jobs it formed (job.c's
 * unlink_segments() for a fixed job). */
void job_elastic_unlink_segments(job *j);

#endif /* HVDRUN_JOB_INT_H */
