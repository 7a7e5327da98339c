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
 *   agent -> hvdrun
 *     HELLO    u32 version, str host name: at once
 *     STARTED  u32 rank, u32 pid
 *     OUTPUT   u32 rank, u8 stream (1 stdout, 2 stderr), then 1..AGENT_OUTPUT_MAX bytes
 *     CLOSED   u32 rank, u8 stream: that pipe of the rank reached its end
 *     EXITED   u32 rank, u8 how (procs.h: exited, killed, no exec, no
 *              setup), u32 value (code, signal or errno)
 *     ERROR    str message: the agent cannot go on
 *     PING     (empty) every second
 *
 * Everything is validated as it is decoded: the header's fields, each
 * type's largest payload, ranks below HVDRUN_MAX_NP, streams 1 or 2, exit
 * values in range, strings bounded and without NUL, no trailing bytes.
 * What depends on the conversation (the version, whether a rank belongs
 * to the host, the order of messages) the receiver checks.
 */
#ifndef HVDRUN_AGENT_PROTO_H
#define HVDRUN_AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "procs.h"

#define AGENT_PROTO_VERSION 1
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
  AGENT_TYPE_END
};

/* Which types a side accepts (for agent_reader_init). */
#define AGENT_FROM_HVDRUN ((1u << (AGENT_JOB - 32)) | (1u << (AGENT_SIGNAL - 32)) | \
                           (1u << (AGENT_PING - 32)))
#define AGENT_FROM_AGENT (((1u << (AGENT_TYPE_END - 32)) - 1) & ~(1u << (AGENT_JOB - 32)) & \
                          ~(1u << (AGENT_SIGNAL - 32)))

/* Any message but JOB. */
typedef struct {
  uint8_t type;
  uint32_t rank;   /* STARTED, OUTPUT, CLOSED, EXITED */
  uint32_t num;    /* HELLO: version; STARTED: pid; SIGNAL: signal */
  uint8_t stream;  /* OUTPUT, CLOSED: PROC_STDOUT or PROC_STDERR */
  proc_exit exit;  /* EXITED */
  const uint8_t *data; /* OUTPUT: the bytes, inside the decoded payload */
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

/* ---- decoding ---- */

/* Decodes a payload of any type but JOB into *m (m->data points into
 * payload).  0, or HVD_E_PROTOCOL with hvd_last_error() naming the bad
 * field. */
int agent_msg_decode(uint8_t type, const uint8_t *payload, size_t len, agent_msg *m);
/* Decodes a JOB payload into *j, which then owns copies (agent_job_free).
 * 0, HVD_E_PROTOCOL or HVD_E_NOMEM. */
int agent_job_decode(const uint8_t *payload, size_t len, agent_job *j);
void agent_job_free(agent_job *j);

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

#endif /* HVDRUN_AGENT_PROTO_H */
