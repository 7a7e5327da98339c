/*
 * procs.c -- starting, reading, reaping and signalling children (procs.h).
 *
 * Between fork() and exec() the child only makes async-signal-safe calls.
 * Signals are blocked across fork() so that a Ctrl-C in that window
 * cannot run hvdrun's handler in the child; the child then puts every
 * disposition back to the default before it unblocks them.
 */
#include "procs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signals.h"

extern char **environ;

/* One read of a pipe: also the largest OUTPUT frame an agent sends. */
static char read_buf[64 * 1024];

/* The child's report when it cannot start the program. */
typedef struct {
  int setup; /* 1: failed before exec (dup2, /dev/null, setpgid) */
  int err;
} exec_report;

static struct rlimit saved_nofile;
static int have_saved_nofile;

void procs_raise_fd_limit(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  saved_nofile = r;
  have_saved_nofile = 1;
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
}

/* ---- the child ---- */

/* The pipes a child gets: [0] read end, [1] write end. */
typedef struct {
  int in[2], out[2], err[2], exec[2];
} pipes;

typedef struct {
  char *const *argv, *const *envp;
  const pipes *p;
  int stdin_pipe;
  pid_t parent;
  sigset_t mask;
} child_plan;

static void child_fail(int fd, int setup) {
  exec_report rep = {setup, errno};
  ssize_t n = write(fd, &rep, sizeof rep);
  (void)n;
  _exit(127);
}

/* Runs in the forked child; never returns. */
static void child_exec(const child_plan *c) {
  int w = c->p->exec[1];
  setpgid(0, 0);
  /* Should the parent be killed outright (SIGKILL, OOM), the child goes
   * too rather than run on unsupervised; unless it is already gone. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != c->parent) child_fail(w, 1);
  signals_reset_for_exec(&c->mask);
  int in = c->stdin_pipe ? c->p->in[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || dup2(in, 0) < 0 || dup2(c->p->out[1], 1) < 0 || dup2(c->p->err[1], 2) < 0)
    child_fail(w, 1);
  if (have_saved_nofile) setrlimit(RLIMIT_NOFILE, &saved_nofile);
  /* execvp() searches the PATH of environ, not of envp: make envp environ. */
  environ = (char **)c->envp;
  execvp(c->argv[0], c->argv);
  child_fail(w, 0);
}

/* ---- the parent ---- */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void close_all(pipes *p) {
  int *fds[] = {&p->in[0], &p->in[1], &p->out[0], &p->out[1],
                &p->err[0], &p->err[1], &p->exec[0], &p->exec[1]};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) close_fd(fds[i]);
}

/* Closes the pipes of a failed spawn, keeping errno. */
static int spawn_failed(pipes *p) {
  int saved = errno;
  close_all(p);
  errno = saved;
  return -1;
}

static int nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int open_pipes(pipes *p, int stdin_pipe) {
  if (stdin_pipe && (pipe2(p->in, O_CLOEXEC) || nonblocking(p->in[1]))) return -1;
  if (pipe2(p->out, O_CLOEXEC) || pipe2(p->err, O_CLOEXEC) || pipe2(p->exec, O_CLOEXEC))
    return -1;
  return nonblocking(p->out[0]) || nonblocking(p->err[0]) || nonblocking(p->exec[0]) ? -1 : 0;
}

int proc_spawn(proc *p, char *const argv[], char *const envp[], int stdin_pipe) {
  pipes fds = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
  sigset_t all;
  child_plan c = {argv, envp, &fds, stdin_pipe, getpid(), {{0}}};
  memset(p, 0, sizeof *p);
  p->in_fd = p->exec_fd = -1;
  p->out_fd[0] = p->out_fd[PROC_STDOUT] = p->out_fd[PROC_STDERR] = -1;
  if (open_pipes(&fds, stdin_pipe)) return spawn_failed(&fds);
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &c.mask);
  pid_t pid = fork();
  if (pid == 0) child_exec(&c);
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &c.mask, NULL);
  if (pid < 0) {
    errno = fork_errno;
    return spawn_failed(&fds);
  }
  setpgid(pid, pid); /* also here: no window where the group does not exist yet */
  p->pid = pid;
  p->in_fd = fds.in[1];
  p->out_fd[PROC_STDOUT] = fds.out[0];
  p->out_fd[PROC_STDERR] = fds.err[0];
  p->exec_fd = fds.exec[0];
  fds.in[1] = fds.out[0] = fds.err[0] = fds.exec[0] = -1;
  close_all(&fds); /* the child's ends */
  return 0;
}

/* ---- reading ---- */

/* Reads once what the stream's pipe holds and hands it on; at end of
 * file closes the pipe and says so.  Returns the bytes read. */
static size_t pump(proc *p, int stream, proc_output_fn *fn, void *ctx) {
  ssize_t n = read(p->out_fd[stream], read_buf, sizeof read_buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) {
    close_fd(&p->out_fd[stream]);
    fn(ctx, stream, NULL, 0);
    return 0;
  }
  fn(ctx, stream, read_buf, (size_t)n);
  return (size_t)n;
}

size_t proc_poll_add(const proc *p, int streams, struct pollfd *fds) {
  size_t n = 0;
  for (int s = PROC_STDOUT; s <= PROC_STDERR; s++)
    if (p->out_fd[s] >= 0 && (streams >> s) & 1)
      fds[n++] = (struct pollfd){p->out_fd[s], POLLIN, 0};
  if (p->exec_fd >= 0) fds[n++] = (struct pollfd){p->exec_fd, POLLIN, 0};
  return n;
}

void proc_poll_dispatch(proc *p, const struct pollfd *fds, size_t n, proc_output_fn *fn,
                        void *ctx) {
  for (size_t i = 0; i < n; i++) {
    if (!fds[i].revents) continue;
    if (fds[i].fd == p->out_fd[PROC_STDOUT])
      pump(p, PROC_STDOUT, fn, ctx);
    else if (fds[i].fd == p->out_fd[PROC_STDERR])
      pump(p, PROC_STDERR, fn, ctx);
    else if (fds[i].fd == p->exec_fd)
      proc_read_exec_status(p);
  }
}

void proc_drain(proc *p, int streams, proc_output_fn *fn, void *ctx) {
  for (int s = PROC_STDOUT; s <= PROC_STDERR; s++)
    for (int i = 0; i < 16 && p->out_fd[s] >= 0 && (streams >> s) & 1; i++)
      if (pump(p, s, fn, ctx) == 0) break;
}

void proc_close(proc *p, proc_output_fn *fn, void *ctx) {
  for (int s = PROC_STDOUT; s <= PROC_STDERR; s++) {
    if (p->out_fd[s] < 0) continue;
    close_fd(&p->out_fd[s]);
    fn(ctx, s, NULL, 0);
  }
  close_fd(&p->exec_fd);
  close_fd(&p->in_fd);
}

void proc_read_exec_status(proc *p) {
  exec_report rep;
  if (p->exec_fd < 0) return;
  ssize_t n = read(p->exec_fd, &rep, sizeof rep);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n == (ssize_t)sizeof rep) {
    p->exec_errno = rep.err ? rep.err : EIO;
    p->setup_failed = rep.setup;
  }
  close_fd(&p->exec_fd); /* a report, or end of file: exec succeeded */
}

/* ---- reaping and signals ---- */

pid_t procs_reap_one(int *status) {
  pid_t pid;
  do pid = waitpid(-1, status, WNOHANG);
  while (pid < 0 && errno == EINTR);
  return pid > 0 ? pid : 0;
}

void proc_reaped(proc *p, int status) {
  p->reaped = 1;
  p->status = status;
  proc_read_exec_status(p); /* the child wrote any report before it exited */
}

void proc_signal_group(const proc *p, int sig) {
  if (p->pid > 0) kill(-p->pid, sig);
}

proc_exit proc_exit_of(const proc *p) {
  if (p->exec_errno) return (proc_exit){p->setup_failed ? PROC_NO_SETUP : PROC_NO_EXEC,
                                        p->exec_errno};
  if (WIFSIGNALED(p->status)) return (proc_exit){PROC_KILLED, WTERMSIG(p->status)};
  return (proc_exit){PROC_EXITED, WEXITSTATUS(p->status)};
}

/* ---- exits ---- */

int proc_exit_ok(proc_exit e) { return e.how == PROC_EXITED && e.value == 0; }

int proc_exit_code(proc_exit e) {
  switch (e.how) {
    case PROC_EXITED: return e.value;
    case PROC_KILLED: return 128 + e.value;
    case PROC_NO_EXEC:
    case PROC_NO_SETUP: return 127;
    case PROC_NO_START: return 1;
    case PROC_LOST: break;
  }
  return 255;
}

void proc_exit_describe(proc_exit e, char *buf, size_t cap) {
  switch (e.how) {
    case PROC_KILLED:
      snprintf(buf, cap, "was killed by signal %d (%s)", e.value, strsignal(e.value));
      break;
    case PROC_EXITED: snprintf(buf, cap, "exited with code %d", e.value); break;
    /* e.value is an errno here, not an exit code. */
    case PROC_NO_EXEC: snprintf(buf, cap, "could not be run: %s", strerror(e.value)); break;
    case PROC_NO_SETUP:
    case PROC_NO_START: snprintf(buf, cap, "could not be started: %s", strerror(e.value)); break;
    case PROC_LOST: snprintf(buf, cap, "was lost with its host"); break;
  }
}
