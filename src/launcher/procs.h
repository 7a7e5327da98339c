/*
 * procs.h -- the ranks as processes: starting, reaping and signalling.
 *
 * Each rank runs in its own process group, so a signal to the group
 * reaches everything the rank started (a shell's children, a data loader's
 * workers).  Its stdin is /dev/null, its stdout and stderr are pipes read
 * by output.c.  A third, close-on-exec pipe carries back the errno of a
 * failed exec, so "no such program" is reported as such.
 */
#ifndef HVDRUN_PROCS_H
#define HVDRUN_PROCS_H

#include <sys/types.h>

#include "output.h"

typedef struct {
  int rank;
  pid_t pid;       /* also its process group; 0 when not started */
  int exec_fd;     /* read end of the exec-status pipe, -1 once read */
  int exec_errno;  /* why the child could not start its program (0: it did) */
  int setup_failed; /* exec_errno is from preparing the child, not from exec */
  int reaped;
  int status;      /* from waitpid(), once reaped */
  output_stream out, err;
} proc;

/* Raises the soft limit on open descriptors (hvdrun holds three per rank)
 * and remembers the old one for the ranks.  Best effort. */
void procs_raise_fd_limit(void);

/* Starts argv[0] (searched in PATH) as `rank`.  0, or -1 with errno. */
int proc_spawn(proc *p, int rank, char *const argv[], char *const envp[], output_sink *out,
               output_sink *err);

/* Reads what the exec-status pipe holds, without blocking. */
void proc_read_exec_status(proc *p);

/* Reaps one exited child without blocking: its pid (status in *status),
 * or 0 when none is waiting. */
pid_t procs_reap_one(int *status);

/* Sends sig to the rank's whole process group (no-op if never started). */
void proc_signal_group(const proc *p, int sig);

/* 1 if the rank exited with 0. */
int proc_succeeded(const proc *p);
/* The exit status hvdrun passes on: the rank's code, 128+signal, or 127
 * when the program could not be run. */
int proc_exit_code(const proc *p);
/* "exited with code 3", "was killed by signal 9 (Killed)", ... */
void proc_describe_exit(const proc *p, char *buf, size_t cap);

#endif /* HVDRUN_PROCS_H */
