/*
 * launch.h -- launcher backends: how the ranks of one host are started,
 * signalled and watched.
 *
 * job.c runs one poll() loop over the hosts of a job.  Each host has a
 * backend that knows how ranks run there: launch_local.c forks them on
 * this machine, launch_ssh.c has hvdrun's agent start them on another
 * host over ssh.  A backend is the struct of functions below.  It
 * reports what happens to the ranks with the launch_* calls, which job.c
 * implements, so the phases of the job, the exit reports and the output
 * forwarding are the same whichever backend runs a rank.  Adding a way to
 * start ranks (srun, mpirun) is adding one file with one such struct.
 */
#ifndef HVDRUN_LAUNCH_H
#define HVDRUN_LAUNCH_H

#include <poll.h>
#include <stdint.h>

#include "hosts.h"
#include "output.h"
#include "procs.h"

typedef enum {
  RANK_WAITING, /* not started (yet) */
  RANK_RUNNING, /* started: pid known */
  RANK_DONE     /* its exit is known, or it never will be (exit.how PROC_LOST) */
} rank_state;

typedef struct launch_host launch_host;

/* One rank, wherever it runs. */
typedef struct {
  int rank;
  launch_host *host;
  rank_state state;
  long pid;       /* on its host, once running */
  proc_exit exit; /* once done */
  output_stream out, err; /* its stdout and stderr, fed by the backend */
} launch_rank;

/* What every backend needs to know about the job. */
typedef struct {
  const hvdrun_options *opt;
  const rank_place *places; /* opt->np entries */
  char secret[128];         /* base64: _HOROVOD_SECRET_KEY */
  output_sink *out, *err;   /* hvdrun's stdout and stderr */
  int name_hosts;           /* the job is not one local host: messages name the host */
} launch_ctx;

typedef struct launch_backend {
  const char *name;
  /* Slots prepare() may add for a host of n ranks. */
  size_t (*poll_max)(int n);
  /* Starts the host's ranks, or begins to (an ssh session).  What goes
   * wrong is reported through launch_*; -1 only when the job cannot go on
   * at all (out of memory before anything started). */
  int (*start)(launch_host *h);
  /* Sends sig to every rank's process group. */
  void (*signal)(launch_host *h, int sig);
  /* The loop: descriptors to poll, what poll() said about them, when the
   * next timer falls due, and that time having come. */
  size_t (*prepare)(launch_host *h, struct pollfd *fds, uint64_t now);
  void (*dispatch)(launch_host *h, const struct pollfd *fds, size_t n);
  uint64_t (*deadline)(const launch_host *h);
  void (*expire)(launch_host *h, uint64_t now);
  /* A child exited: 1 if it was the host's (a rank, an ssh session). */
  int (*reaped)(launch_host *h, pid_t pid, int status);
  /* 1 while something of the host's beyond its ranks is still there. */
  int (*busy)(const launch_host *h);
  /* The job is over: let go (an agent's stdin is closed). */
  void (*close)(launch_host *h);
  /* Last: nothing of the host's may be left running; frees it all. */
  void (*stop)(launch_host *h);
} launch_backend;

struct launch_host {
  const launch_backend *backend;
  const launch_ctx *ctx;
  struct launch_job *job; /* job.c's */
  const host_spec *spec;  /* its name and ranks */
  launch_rank *ranks;     /* spec->nranks, ranks spec->first.. */
  struct launch_host *via; /* the host whose agent starts this one's session (the
                              launch tree, launch_tree.h); NULL: hvdrun itself */
  const char *rdzv_addr;  /* where its ranks reach the rendezvous */
  int rdzv_port;
  int told_exec;          /* job.c: "cannot run" was said for this host */
  size_t poll_first, poll_count; /* job.c: its slice of the poll set */
  uint64_t kill_at;       /* job.c: stopped alone (elastic): SIGKILL then, unless gone */
  void *impl;             /* the backend's */
};

extern const launch_backend launch_local;
extern const launch_backend launch_ssh;
extern const launch_backend launch_srun;

/* ---- reports from the backends (job.c) ---- */

/* The rank runs, as pid on its host. */
void launch_started(launch_rank *r, long pid);
/* The rank's exit is known: reported as the job's phase says, and a
 * failure stops the job. */
void launch_exited(launch_rank *r, proc_exit e);
/* The host cannot go on: says "hvdrun: <fmt...>", with name_lost "; ranks
 * 4-5 did not report an exit" for its ranks not done, which then count as
 * lost; the job stops with `code`. */
void launch_host_failed(launch_host *h, int code, int name_lost, const char *fmt, ...)
    HVD__PRINTF(4, 5);
/* Says "hvdrun: <fmt...>" on stderr: always, or only under --verbose. */
void launch_say(launch_host *h, int always, const char *fmt, ...) HVD__PRINTF(3, 4);

/* ---- helpers for the backends ---- */

/* The rank's stream for PROC_STDOUT or PROC_STDERR. */
output_stream *launch_stream(launch_rank *r, int stream);
/* A proc_output_fn that feeds ctx's (a launch_rank's) streams. */
void launch_feed(void *rank, int stream, const char *data, size_t n);
/* The streams (a PROC_BOTH mask) whose sink in hvdrun takes more: a rank's
 * stderr, its error messages, still flows while nobody reads stdout. */
int launch_output_room(const launch_host *h);
/* 1 when hvdrun's stdout or stderr is backed up: for a backend whose
 * streams come mixed on one pipe (an agent's session), read no more. */
int launch_output_full(const launch_host *h);
/* The rank of h numbered `rank` in the job, or NULL if not h's. */
launch_rank *launch_rank_of(launch_host *h, uint32_t rank);

#endif /* HVDRUN_LAUNCH_H */
