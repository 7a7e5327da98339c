/*
 * job_int.h -- the plain job (job.c) as a layer to build on: the job, what
 * it lets an extension do, and the hooks through which it calls one.
 * The elastic driver (job_elastic.c) is such an extension, above job.c:
 * it calls job.c's functions below, and job.c calls it only through its
 * job_ext_ops, never by name.  Not for anyone else.
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
  PHASE_RUN,
  PHASE_LINGER,
  PHASE_GRACE,
  PHASE_TERM,
  PHASE_KILL,
  PHASE_CLOSE,
  PHASE_DONE
} phase;

/* hvdrun's own poll slots, before the hosts'. */
enum { SLOT_SIGNALS, SLOT_STDOUT, SLOT_STDERR, SLOT_FIXED };

/* What an extension does inside the job's loop (arg: the extension's).
 * With one, a rank's exit is the extension's to judge, never a failure
 * of the job by itself, and the job runs until the extension ends it. */
typedef struct {
  const char *rank_word; /* what the job's messages call a rank: "worker" */
  /* Its descriptors in the poll set, what poll() said of them. */
  size_t (*prepare)(void *arg, struct pollfd *fds);
  void (*dispatch)(void *arg, const struct pollfd *fds, size_t n);
  /* When it wants the loop back (HVD__NEVER: not), and that time come. */
  uint64_t (*deadline)(const void *arg);
  void (*expire)(void *arg, uint64_t now);
  /* A child exited: 1 if it was the extension's own. */
  int (*reaped)(void *arg, pid_t pid, int status);
  /* A rank's exit is known (after it was reported). */
  void (*exited)(void *arg, launch_rank *r);
  /* A signal stops the job: the extension ends it, saying so. */
  void (*interrupted)(void *arg, int sig);
  /* 1 once it ended the job. */
  int (*ended)(const void *arg);
  /* Unlinks the shared-memory segments of what it started (job.c does
   * its own plan's). */
  void (*unlink_segments)(void *arg);
} job_ext_ops;

typedef struct {
  const job_ext_ops *ops;
  void *arg;
  uint32_t rdzv_size;                /* ranks the rendezvous serves at once */
  hvd_rdzv_elastic_hooks rdzv_hooks; /* what the rendezvous tells the extension */
} job_ext;

typedef struct launch_job {
  launch_ctx ctx;
  const host_plan *plan; /* a fixed job's hosts */
  const rdzv_addrs *addrs;
  launch_host **hosts; /* in the order started */
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
  int killed_told; /* a rank's death by a signal was reported as news */
  int interrupted; /* a signal asked hvdrun to stop */
  struct pollfd *fds;
  struct pollfd *fds_polled; /* while dispatching: the array poll() filled */
  size_t fds_cap, nfds;
  int fixed[SLOT_FIXED]; /* what fds[i] is, for i < nfixed */
  size_t nfixed;
  size_t rdzv_first, rdzv_count;
  job_ext *ext; /* NULL: a fixed job */
} job;

/* The job's life, for an extension: job_begin() sets the job up (signals,
 * the secret, the rendezvous, the poll set) with ext (NULL: none), then
 * the extension starts its ranks; job_drive() runs the loop until the
 * job is over (at once to the end when started is 0) and frees the job;
 * its result is hvdrun's exit status (job.h). */
int job_begin(job *j, const hvdrun_options *o, const host_plan *plan, const rdzv_addrs *addrs,
              job_ext *ext);
int job_drive(job *j, int started);

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

#endif /* HVDRUN_JOB_INT_H */
