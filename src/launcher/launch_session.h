/*
 * launch_session.h -- backends that run a host's ranks through a session
 * that starts `hvdrun --agent` there (launch_session.c): ssh
 * (launch_ssh.c) and srun (launch_srun.c).  They differ only in the
 * command line, which a session_kind builds; a backend is then its kind
 * and these functions.
 */
#ifndef HVDRUN_LAUNCH_SESSION_H
#define HVDRUN_LAUNCH_SESSION_H

#include <limits.h>

#include "rdzv/rdzv.h"
#include "launch.h"

#define SESSION_WHAT_MAX (2 * PATH_MAX + 32)

/* A session's command line, built by its kind. */
typedef struct {
  char self[PATH_MAX];         /* this hvdrun, which the host must have at the same path */
  char *words;                 /* a user's command split in place, or NULL (freed) */
  char **argv;                 /* NULL-terminated (freed) */
  char what[SESSION_WHAT_MAX]; /* what runs there, for --verbose */
  char buf[4][HVD_HOSTNAME_MAX + 32]; /* room for arguments the kind formats */
} session_cmd;

typedef struct {
  const char *name; /* "ssh", "srun": in messages */
  /* The command that is run, for messages ("ssh -F cfg", "srun"). */
  const char *(*program)(const launch_host *h);
  /* Fills c->argv (and c->what) for h; 0, or -1 with errno. */
  int (*build)(const launch_host *h, session_cmd *c);
} session_kind;

/* Splits `command` at blanks into c->words and c->argv, leaving room for
 * `more` arguments after them; returns the count.  -1 when out of memory. */
int session_words(session_cmd *c, const char *command, size_t more);

int session_self(char path[PATH_MAX]);
int session_start(launch_host *h, const session_kind *kind);
size_t session_poll_max(int n);
void session_signal(launch_host *h, int sig);
size_t session_prepare(launch_host *h, struct pollfd *fds, uint64_t now);
void session_dispatch(launch_host *h, const struct pollfd *fds, size_t n);
uint64_t session_deadline(const launch_host *h);
void session_expire(launch_host *h, uint64_t now);
int session_reaped(launch_host *h, pid_t pid, int status);
int session_busy(const launch_host *h);
void session_close(launch_host *h);
void session_stop(launch_host *h);

/* The backend struct of a kind whose start() calls session_start(). */
#define SESSION_BACKEND(name, start)                                                  \
  {name,            session_poll_max, start,            session_signal,               \
   session_prepare, session_dispatch, session_deadline, session_expire,               \
   session_reaped,  session_busy,     session_close,    session_stop}

#endif /* HVDRUN_LAUNCH_SESSION_H */
