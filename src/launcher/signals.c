/*
 * signals.c -- the self-pipe that turns signals into poll() events.
 *
 * The handler does the one async-signal-safe thing needed: write the
 * signal's number into a pipe.  errno is saved around it so the
 * interrupted code never sees it change.
 */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

static int pipe_w = -1;

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t n = write(pipe_w, &b, 1); /* a full pipe already wakes the loop */
  (void)n;
  errno = saved;
}

int signals_install(void) {
  int p[2];
  if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
  pipe_w = p[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
    if (sigaction(handled[i], &sa, NULL) != 0) return -1;
  signal(SIGPIPE, SIG_IGN);
  return p[0];
}

void signals_drain(int fd, signals_seen *seen) {
  unsigned char buf[64];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == SIGCHLD) {
        seen->child = 1;
      } else {
        seen->stop_sig = buf[i];
        seen->stop_count++;
      }
    }
  }
}

void signals_reset_for_exec(const sigset_t *mask) {
  for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) signal(handled[i], SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
}
