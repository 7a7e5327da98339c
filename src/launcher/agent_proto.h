/*
 * agent_proto.h -- what hvdrun and its agent on another host say to each
 * other over the ssh session: hvdrun writes to the agent's stdin, the
 * agent answers on its stdout.
 *
 * Every message is a frame laid out as frame.h says (the 24-byte header,
 * then len payload bytes in hvd_writer's encoding), with frame types of
 * its own, from 32 up, that no hvd connection uses; tag and reserved
 * fields are 0.  str is a u16 length and that many bytes, without NUL.
 *
 *   hvdrun -> agent
 *     JOB      u32 version, str cwd, u32 argc, argc x str,
 *              u32 nenv, nenv x str "NAME=value",
 *              u32 nranks, nranks x (u32 rank, u32 nvars, nvars x str "NAME=value")
 *              the program, where to run it, the environment over the
 *              agent's own, and each rank of the host with its own variables
 *     SIGNAL   u32 signal: for every rank's process group
 *     PING     (empty) every second; closing the agent's stdin means
 *              that hvdrun is gone
 *     SPAWN    u32 id, u32 argc, argc x str: start a session (ssh) to
 *              another host with this command line, its stdin a pipe:
 *              the launch tree (launch_tree.h), where an agent starts
 *              further agents; id names the session in what follows
 *     TO       u32 id, then 1..AGENT_OUTPUT_MAX bytes for that session's
 *              stdin (a piece of the frames hvdrun writes to that agent)
 *     CLOSE    u32 id: close the session's stdin once its bytes are written
 *     KILL     u32 id, u32 signal: for the session's process group
 *   agent -> hvdrun
 *     HELLO    u32 version, str host name: at once
 *     STARTED  u32 rank, u32 pid
 *     OUTPUT   u32 rank, u8 stream (1 stdout, 2 stderr), then 1..AGENT_OUTPUT_MAX bytes
 *     CLOSED   u32 rank, u8 stream: that pipe of the rank reached its end
 *     EXITED   u32 rank, u8 how (procs.h: exited, killed, no exec, no
 *              setup), u32 value (code, signal or errno)
 *     ERROR    str message: the agent cannot go on
 *     PING     (empty) every second
 *     FROM     u32 id, u8 stream (1 stdout, 2 stderr), then 1..AGENT_OUTPUT_MAX
 *              bytes the session's process wrote (its agent's frames, or
 *              what ssh said)
 *     ENDED    u32 id, u8 how, u32 value: the session's process ended (as
 *              EXITED), after the last of its bytes
 *
 * A session started by SPAWN speaks this same protocol with hvdrun
 * through the agent that started it, which only relays bytes: hvdrun
 * wraps what it writes to that agent in TO frames, one level for each
 * agent on the way, and unwraps FROM frames as it reads.
 *
 * Everything is validated as it is decoded: the header's fields, each
 * type's largest payload, ranks below HVDRUN_MAX_NP, streams 1 or 2, exit
 * values in range, strings bounded and without NUL, no trailing bytes.
 * Session ids are any u32; whether one names a session is the receiver's
 * to check.
 * What depends on the conversation (the version, whether a rank belongs
 * to the host, the order of messages) the receiver checks.
 */
#ifndef HVDRUN_AGENT_PROTO_H
#define HVDRUN_AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "procs.h"

#define AGENT_PROTO_VERSION 2
#define AGENT_OUTPUT_MAX (64 * 1024)
#define AGENT_TEXT_MAX 1024 /* HELLO's host name, ERROR's message, with the NUL */

enum {
  AGENT_JOB = 32,
  AGENT_SIGNAL,
  AGENT_PING,
  AGENT_HELLO,
  AGENT_STARTED,
  AGENT_OUTPUT,
  AGENT_CLOSED,
  AGENT_EXITED,
  AGENT_ERROR,
  AGENT_SPAWN,
  AGENT_TO,
  AGENT_CLOSE,
  AGENT_KILL,
  AGENT_FROM,
  AGENT_ENDED,
  AGENT_TYPE_END
};

/* Which types a side accepts (for agent_reader_init). */
#define AGENT_BIT(type) (1u << ((type) - 32))
#define AGENT_FROM_HVDRUN                                                                  \
  (AGENT_BIT(AGENT_JOB) | AGENT_BIT(AGENT_SIGNAL) | AGENT_BIT(AGENT_PING) |                 \
   AGENT_BIT(AGENT_SPAWN) | AGENT_BIT(AGENT_TO) | AGENT_BIT(AGENT_CLOSE) |                  \
   AGENT_BIT(AGENT_KILL))
#define AGENT_FROM_AGENT                                                                   \
  (((AGENT_BIT(AGENT_TYPE_END) - 1) & ~AGENT_FROM_HVDRUN) | AGENT_BIT(AGENT_PING))
/* A SPAWN's command line: at most this many arguments. */
#define AGENT_SPAWN_ARGS_MAX 256

/* Any message but JOB and SPAWN. */
typedef struct {
  uint8_t type;
  uint32_t rank;   /* STARTED, OUTPUT, CLOSED, EXITED */
  uint32_t id;     /* TO, CLOSE, KILL, FROM, ENDED: the session */
  uint32_t num;    /* HELLO: version; STARTED: pid; SIGNAL, KILL: signal */
  uint8_t stream;  /* OUTPUT, CLOSED, FROM: PROC_STDOUT or PROC_STDERR */
  proc_exit exit;  /* EXITED, ENDED */
  const uint8_t *data; /* OUTPUT, TO, FROM: the bytes, inside the decoded payload */
  size_t len;
  char text[AGENT_TEXT_MAX]; /* HELLO, ERROR: control characters made '?' */
} agent_msg;

typedef struct {
  uint32_t rank;
  char **vars; /* nvars "NAME=value" */
  size_t nvars;
} agent_rank;

typedef struct {
  uint32_t version;
  char *cwd;   /* absolute */
  char **argv; /* argc entries and a NULL */
  size_t argc;
  char **env;  /* nenv "NAME=value" entries and a NULL */
  size_t nenv;
  agent_rank *ranks; /* distinct ranks */
  size_t nranks;
} agent_job;

typedef struct {
  uint32_t id;
  char **argv; /* argc entries and a NULL */
  size_t argc;
} agent_spawn;

/* ---- decoding ---- */

/* Decodes a payload of any type but JOB and SPAWN into *m (m->data points into
 * payload).  0, or HVD_E_PROTOCOL with hvd_last_error() naming the bad
 * field. */
int agent_msg_decode(uint8_t type, const uint8_t *payload, size_t len, agent_msg *m);
/* Decodes a JOB payload into *j, which then owns copies (agent_job_free).
 * 0, HVD_E_PROTOCOL or HVD_E_NOMEM. */
int agent_job_decode(const uint8_t *payload, size_t len, agent_job *j);
void agent_job_free(agent_job *j);
/* Decodes a SPAWN payload into *s, which then owns copies
 * (agent_spawn_free).  0, HVD_E_PROTOCOL or HVD_E_NOMEM. */
int agent_spawn_decode(const uint8_t *payload, size_t len, agent_spawn *s);
void agent_spawn_free(agent_spawn *s);

/* Frames from a byte stream: feed it what the pipe gave, take the frames. */
typedef struct {
  unsigned accept; /* AGENT_FROM_* */
  uint8_t hdr[24];
  size_t hdr_len;
  uint8_t type; /* of the frame being read, or of the frame ready */
  uint8_t *payload;
  size_t len, got, cap;
} agent_reader;

void agent_reader_init(agent_reader *r, unsigned accept);
/* Takes bytes from data[0..n) (*used says how many): 1 when a whole frame
 * is ready in r->type, r->payload[0..r->len) (until the next call), 0
 * when all n were taken and more are needed, or HVD_E_PROTOCOL (a header
 * that is not one of ours, a payload too large for its type) or
 * HVD_E_NOMEM. */
int agent_reader_feed(agent_reader *r, const uint8_t *data, size_t n, size_t *used);
void agent_reader_free(agent_reader *r);

/* ---- encoding: frames appended to what waits for the pipe ---- */

/* Appends the frame of m (its type says which fields count).  0, or -1
 * when out of memory or a field is out of range (nothing appended). */
int agent_put_msg(bytes *q, const agent_msg *m);
/* Appends a JOB frame.  0, or -1: out of memory, or larger than
 * HVD_FRAME_CONTROL_MAX (nothing appended). */
int agent_put_job(bytes *q, const agent_job *j);
/* Appends a SPAWN frame.  0, or -1: out of memory, no program, more than
 * AGENT_SPAWN_ARGS_MAX arguments, or an argument longer than a str. */
int agent_put_spawn(bytes *q, const agent_spawn *s);

#endif /* HVDRUN_AGENT_PROTO_H */
