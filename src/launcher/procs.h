/*
 * procs.h -- child processes: starting, reading, reaping and signalling.
 *
 * hvdrun starts its local ranks and the ssh sessions to other hosts with
 * these, and hvdrun's agent on another host starts that host's ranks with
 * them.  Each child runs in its own process group, so a signal to the
 * group reaches everything it started (a shell's children, a data
 * loader's workers), and dies with its parent (PR_SET_PDEATHSIG).  Its
 * stdin is /dev/null, or a pipe when asked; its stdout and stderr are
 * pipes.  A third, close-on-exec pipe carries back the errno of a failed
 * exec, so "no such program" is reported as such.
 */
#ifndef HVDRUN_PROCS_H
#define HVDRUN_PROCS_H

#include <poll.h>
#include <stddef.h>
#include <sys/types.h>

/* How a process ended, or why it never ran. */
typedef enum {
  PROC_EXITED,   /* value: the exit code */
  PROC_KILLED,   /* value: the signal */
  PROC_NO_EXEC,  /* value: exec's errno (no such program, not executable) */
  PROC_NO_SETUP, /* value: errno of preparing the child (dup2, setpgid) */
  PROC_NO_START, /* value: errno of pipe() or fork() in the parent */
  PROC_LOST      /* no exit was ever reported (its host was lost) */
} proc_end;

typedef struct {
  proc_end how;
  int value;
} proc_exit;

/* The child's stdout and stderr, as the pipes and the protocol number them. */
enum { PROC_STDOUT = 1, PROC_STDERR = 2 };

typedef struct {
  pid_t pid;      /* also its process group; 0 when not started */
  int in_fd;      /* write end of its stdin pipe, or -1 */
  int out_fd[3];  /* [PROC_STDOUT], [PROC_STDERR]: read ends, -1 once at end of file */
  int exec_fd;    /* read end of the exec-status pipe, -1 once read */
  int exec_errno; /* why the child could not start its program (0: it did) */
  int setup_failed; /* exec_errno is from preparing the child, not from exec */
  int reaped;
  int status;     /* from waitpid(), once reaped */
} proc;

/* Raises the soft limit on open descriptors (hvdrun holds three per rank)
 * and remembers the old one for the children.  Best effort. */
void procs_raise_fd_limit(void);

/* Starts argv[0], searched in envp's PATH, with environment envp; with
 * stdin_pipe, p->in_fd is the write end of its stdin.  0, or -1 with
 * errno. */
int proc_spawn(proc *p, char *const argv[], char *const envp[], int stdin_pipe);

/* ---- the loop ---- */

/* Which output pipes to read: a mask of 1 << PROC_STDOUT, 1 << PROC_STDERR. */
#define PROC_BOTH ((1 << PROC_STDOUT) | (1 << PROC_STDERR))

/* Adds p's open descriptors to fds: the output pipes in the mask
 * `streams`, the exec-status pipe always.  Returns how many (at most 3). */
size_t proc_poll_add(const proc *p, int streams, struct pollfd *fds);

/* Called with what a pipe gave: n > 0 bytes, or n == 0 at end of file. */
typedef void proc_output_fn(void *ctx, int stream, const char *data, size_t n);

/* Handles what poll() reported for the slots proc_poll_add() filled. */
void proc_poll_dispatch(proc *p, const struct pollfd *fds, size_t n, proc_output_fn *fn,
                        void *ctx);

/* Reads what the pipes in `streams` hold now, a bounded amount (a
 * process the child left behind may keep writing), so its last words
 * come before its exit is reported. */
void proc_drain(proc *p, int streams, proc_output_fn *fn, void *ctx);

/* Closes the output pipes (reporting their end) and the exec pipe. */
void proc_close(proc *p, proc_output_fn *fn, void *ctx);

/* Reads what the exec-status pipe holds, without blocking. */
void proc_read_exec_status(proc *p);

/* Reaps one exited child without blocking: its pid (status in *status),
 * or 0 when none is waiting. */
pid_t procs_reap_one(int *status);

/* p exited with `status`: records it (and reads the exec report). */
void proc_reaped(proc *p, int status);

/* Sends sig to the process group (no-op if never started).  Also once
 * the child is reaped: what it left behind may still hold its pipes. */
void proc_signal_group(const proc *p, int sig);

/* How the reaped p ended. */
proc_exit proc_exit_of(const proc *p);

/* ---- exits ---- */

/* 1 if e is an exit with code 0. */
int proc_exit_ok(proc_exit e);
/* The status hvdrun passes on: the code, 128+signal, 127 when the program
 * could not be run, 1 when it could not be started, 255 when lost. */
int proc_exit_code(proc_exit e);
/* "exited with code 3", "was killed by signal 9 (Killed)", "could not be
 * run: No such file or directory". */
void proc_exit_describe(proc_exit e, char *buf, size_t cap);

#endif /* HVDRUN_PROCS_H */
