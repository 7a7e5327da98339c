/*
 * procs.c -- starting, reaping and signalling the ranks (procs.h).
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

typedef struct {
  char *const *argv, *const *envp;
  int out_w, err_w, exec_w;
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
  setpgid(0, 0);
  /* Should hvdrun be killed outright (SIGKILL, OOM), its ranks go too
   * rather than run on unsupervised; unless it is already gone. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != c->parent)
    child_fail(c->exec_w, 1);
  signals_reset_for_exec(&c->mask);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(c->out_w, 1) < 0 || dup2(c->err_w, 2) < 0)
    child_fail(c->exec_w, 1);
  if (have_saved_nofile) setrlimit(RLIMIT_NOFILE, &saved_nofile);
  execvpe(c->argv[0], c->argv, c->envp);
  child_fail(c->exec_w, 0);
}

/* ---- the parent ---- */

static void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
}

/* Closes the three pipes of a failed spawn, keeping errno. */
static int spawn_failed(int o[2], int e[2], int x[2]) {
  int saved = errno;
  close_pair(o);
  close_pair(e);
  close_pair(x);
  errno = saved;
  return -1;
}

static int nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int proc_spawn(proc *p, int rank, char *const argv[], char *const envp[], output_sink *out,
               output_sink *err) {
  int o[2] = {-1, -1}, e[2] = {-1, -1}, x[2] = {-1, -1};
  sigset_t all;
  child_plan c = {argv, envp, -1, -1, -1, getpid(), {{0}}};
  memset(p, 0, sizeof *p);
  p->rank = rank;
  p->exec_fd = -1;
  if (pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC) || pipe2(x, O_CLOEXEC) ||
      nonblocking(o[0]) || nonblocking(e[0]) || nonblocking(x[0]))
    return spawn_failed(o, e, x);
  c.out_w = o[1];
  c.err_w = e[1];
  c.exec_w = x[1];
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &c.mask);
  pid_t pid = fork();
  if (pid == 0) child_exec(&c);
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &c.mask, NULL);
  if (pid < 0) {
    errno = fork_errno;
    return spawn_failed(o, e, x);
  }
  setpgid(pid, pid); /* also here: no window where the group does not exist yet */
  close(o[1]);
  close(e[1]);
  close(x[1]);
  p->pid = pid;
  p->exec_fd = x[0];
  output_stream_init(&p->out, o[0], rank, "stdout", out);
  output_stream_init(&p->err, e[0], rank, "stderr", err);
  return 0;
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
  close(p->exec_fd); /* a report, or end of file: exec succeeded */
  p->exec_fd = -1;
}

pid_t procs_reap_one(int *status) {
  pid_t pid;
  do pid = waitpid(-1, status, WNOHANG);
  while (pid < 0 && errno == EINTR);
  return pid > 0 ? pid : 0;
}

void proc_signal_group(const proc *p, int sig) {
  if (p->pid > 0) kill(-p->pid, sig);
}

int proc_succeeded(const proc *p) {
  return p->reaped && !p->exec_errno && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}

int proc_exit_code(const proc *p) {
  if (p->exec_errno) return 127;
  if (WIFSIGNALED(p->status)) return 128 + WTERMSIG(p->status);
  return WEXITSTATUS(p->status);
}

void proc_describe_exit(const proc *p, char *buf, size_t cap) {
  if (WIFSIGNALED(p->status)) {
    int sig = WTERMSIG(p->status);
    snprintf(buf, cap, "was killed by signal %d (%s)", sig, strsignal(sig));
  } else {
    snprintf(buf, cap, "exited with code %d", WEXITSTATUS(p->status));
  }
}
