/*
 * agent_relay.h -- the sessions hvdrun's agent starts for hvdrun: the
 * launch tree (launch_tree.h), where the agent on one host starts the
 * ssh sessions to a few more hosts.
 *
 * The agent only relays: SPAWN starts a session's process (its command
 * line is hvdrun's, its stdin a pipe), TO's bytes go to its stdin, what
 * it writes comes back in FROM frames, and its end in one ENDED frame
 * after the last of its bytes (agent_proto.h).  It never reads the frames
 * inside: those are between hvdrun and the agent at the other end.
 */
#ifndef HVDRUN_AGENT_RELAY_H
#define HVDRUN_AGENT_RELAY_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "agent_proto.h"
#include "bytes.h"
#include "procs.h"

typedef struct relay relay;

typedef struct {
  relay *r;      /* its relay */
  uint32_t id;
  proc p;
  bytes q;       /* for its stdin */
  int closing;   /* CLOSE came: its stdin closes once q is written */
  int ended;     /* its ENDED is on its way */
  int in_polled; /* prepare() put its stdin first */
  size_t polled; /* and then this many of proc_poll_add()'s */
} relay_session;

struct relay {
  relay_session *s;
  size_t n, cap;
  /* Where FROM and ENDED go: the agent's frames to hvdrun. */
  void (*up)(void *arg, agent_msg m);
  void *arg;
};

void relay_init(relay *r, void (*up)(void *arg, agent_msg m), void *arg);
/* SPAWN, TO, CLOSE or KILL from hvdrun.  0, or HVD_E_PROTOCOL (a bad
 * payload, a session named that was never started, an id used twice)
 * or HVD_E_NOMEM, with hvd_last_error() saying which. */
int relay_on_frame(relay *r, uint8_t type, const uint8_t *payload, size_t len);

/* The loop: the most descriptors prepare() adds, adding them (their
 * output only while `read` is set: the agent's own queue has room),
 * and what poll() said of them. */
size_t relay_poll_max(const relay *r);
size_t relay_prepare(relay *r, int read, struct pollfd *fds);
void relay_dispatch(relay *r, const struct pollfd *fds, size_t n);
/* A child exited: 1 if it was a session's process (its ENDED is queued). */
int relay_reaped(relay *r, pid_t pid, int status);

/* The agent stops: every session's stdin closes (its agent then stops
 * its ranks).  relay_free() kills what is left. */
void relay_close_all(relay *r);
/* 1 when every session started has ended and its ENDED is queued. */
int relay_done(const relay *r);
void relay_free(relay *r);

#endif /* HVDRUN_AGENT_RELAY_H */
