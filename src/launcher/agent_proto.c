/*
 * agent_proto.c -- the frames between hvdrun and its agent (agent_proto.h).
 *
 * frame.h's header layout and payload codec, with types frame.c does not
 * know (hvd__frame_decode() would refuse them, rightly, on a rank's
 * connection), so the header is read here with the same hvd_reader.
 * Encoding and decoding share one validation, so what a side sends is
 * exactly what the other accepts.
 */
#include "agent_proto.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "options.h"
#include "wire/frame.h"

#define STR_MAX 65535 /* a u16 length */
#define VARS_PER_RANK_MAX 64
#define ERRNO_MAX 4095
#define SPAWN_MAX (64 * 1024) /* an ssh command line */

_Static_assert(AGENT_TYPE_END - 32 <= 32, "the accept masks are 32 bits");

static const char *const type_names[] = {"JOB",   "SIGNAL", "PING",  "HELLO", "STARTED",
                                         "OUTPUT", "CLOSED", "EXITED", "ERROR", "SPAWN",
                                         "TO",    "CLOSE",  "KILL",  "FROM",  "ENDED"};
_Static_assert(HVD__ARRAY_LEN(type_names) == AGENT_TYPE_END - 32, "a name for every type");

static const char *type_name(unsigned type) {
  return type >= 32 && type < AGENT_TYPE_END ? type_names[type - 32] : "?";
}

/* The largest payload of each type. */
static size_t payload_max(unsigned type) {
  switch (type) {
    case AGENT_JOB: return HVD_FRAME_CONTROL_MAX;
    case AGENT_SIGNAL: return 4;
    case AGENT_HELLO: return 4 + 2 + AGENT_TEXT_MAX - 1;
    case AGENT_STARTED: return 8;
    case AGENT_OUTPUT: return 5 + AGENT_OUTPUT_MAX;
    case AGENT_CLOSED: return 5;
    case AGENT_EXITED: return 9;
    case AGENT_ERROR: return 2 + AGENT_TEXT_MAX - 1;
    case AGENT_SPAWN: return SPAWN_MAX;
    case AGENT_TO: return 4 + AGENT_OUTPUT_MAX;
    case AGENT_CLOSE: return 4;
    case AGENT_KILL: return 8;
    case AGENT_FROM: return 5 + AGENT_OUTPUT_MAX;
    case AGENT_ENDED: return 9;
    default: return 0; /* PING */
  }
}

/* ---- validation, both ways ---- */

static int exit_valid(proc_exit e) {
  switch (e.how) {
    case PROC_EXITED: return e.value >= 0 && e.value <= 255;
    case PROC_KILLED: return e.value >= 1 && e.value < NSIG;
    case PROC_NO_EXEC:
    case PROC_NO_SETUP: return e.value >= 1 && e.value <= ERRNO_MAX;
    default: return 0; /* the others are hvdrun's own conclusions */
  }
}

static int bad(const agent_msg *m, const char *what) {
  return hvd__err(HVD_E_PROTOCOL, "%s message with %s", type_name(m->type), what);
}

static int msg_valid(const agent_msg *m) {
  int has_rank = m->type == AGENT_STARTED || m->type == AGENT_OUTPUT ||
                 m->type == AGENT_CLOSED || m->type == AGENT_EXITED;
  int has_stream = m->type == AGENT_OUTPUT || m->type == AGENT_CLOSED || m->type == AGENT_FROM;
  if (has_rank && m->rank >= HVDRUN_MAX_NP) return bad(m, "a rank out of range");
  if (has_stream && m->stream != PROC_STDOUT && m->stream != PROC_STDERR)
    return bad(m, "a stream other than 1 (stdout) or 2 (stderr)");
  switch (m->type) {
    case AGENT_SIGNAL:
    case AGENT_KILL:
      return m->num >= 1 && m->num < NSIG ? 0 : bad(m, "a signal out of range");
    case AGENT_STARTED:
      return m->num >= 1 && m->num <= INT32_MAX ? 0 : bad(m, "a pid out of range");
    case AGENT_OUTPUT:
    case AGENT_TO:
    case AGENT_FROM:
      return m->len >= 1 && m->len <= AGENT_OUTPUT_MAX ? 0 : bad(m, "no bytes, or too many");
    case AGENT_EXITED:
    case AGENT_ENDED: return exit_valid(m->exit) ? 0 : bad(m, "an exit out of range");
    case AGENT_HELLO:
    case AGENT_ERROR: return m->text[0] ? 0 : bad(m, "an empty text");
    case AGENT_PING:
    case AGENT_CLOSED:
    case AGENT_CLOSE: return 0;
    default: return hvd__err(HVD_E_PROTOCOL, "no message of type %u", m->type);
  }
}

/* ---- decoding ---- */

/* A str into text, with control characters made harmless to print. */
static void get_text(hvd_reader *r, char *text) {
  hvd__get_str(r, text, AGENT_TEXT_MAX);
  for (char *c = text; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
}

int agent_msg_decode(uint8_t type, const uint8_t *payload, size_t len, agent_msg *m) {
  hvd_reader r = {payload, len, 0, 0};
  memset(m, 0, sizeof *m);
  m->type = type;
  switch (type) {
    case AGENT_SIGNAL: m->num = hvd__get_u32(&r); break;
    case AGENT_HELLO:
      m->num = hvd__get_u32(&r);
      get_text(&r, m->text);
      break;
    case AGENT_ERROR: get_text(&r, m->text); break;
    case AGENT_STARTED:
      m->rank = hvd__get_u32(&r);
      m->num = hvd__get_u32(&r);
      break;
    case AGENT_OUTPUT:
    case AGENT_CLOSED:
      m->rank = hvd__get_u32(&r);
      m->stream = hvd__get_u8(&r);
      m->len = type == AGENT_OUTPUT && !r.failed ? len - r.pos : 0;
      m->data = m->len ? hvd__get_bytes(&r, m->len) : NULL;
      break;
    case AGENT_EXITED:
    case AGENT_ENDED:
      if (type == AGENT_EXITED)
        m->rank = hvd__get_u32(&r);
      else
        m->id = hvd__get_u32(&r);
      m->exit.how = (proc_end)hvd__get_u8(&r);
      m->exit.value = (int)hvd__get_u32(&r);
      break;
    case AGENT_TO:
    case AGENT_FROM:
      m->id = hvd__get_u32(&r);
      if (type == AGENT_FROM) m->stream = hvd__get_u8(&r);
      m->len = !r.failed ? len - r.pos : 0;
      m->data = m->len ? hvd__get_bytes(&r, m->len) : NULL;
      break;
    case AGENT_CLOSE:
    case AGENT_KILL:
      m->id = hvd__get_u32(&r);
      if (type == AGENT_KILL) m->num = hvd__get_u32(&r);
      break;
    default: break; /* PING; msg_valid() refuses the rest (JOB and SPAWN too) */
  }
  if (!hvd__reader_done(&r))
    return hvd__err(HVD_E_PROTOCOL, "%s message of %zu bytes: truncated, a string too long, "
                    "or bytes left over", type_name(type), len);
  return msg_valid(m);
}

/* A str as a new NUL-terminated string; NULL (and r failed) if it is not
 * there or holds a NUL. */
static char *take_str(hvd_reader *r) {
  uint16_t n = hvd__get_u16(r);
  const uint8_t *p = hvd__get_bytes(r, n);
  char *s = p && !memchr(p, 0, n) ? malloc((size_t)n + 1) : NULL;
  if (!s) {
    r->failed = 1;
    return NULL;
  }
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* A u32 count and that many strs, as a NULL-terminated array.  A count
 * the payload cannot hold fails before anything is allocated. */
static char **take_strs(hvd_reader *r, size_t *count) {
  uint32_t n = hvd__get_u32(r);
  char **v = NULL;
  *count = 0;
  if (!r->failed && n <= (r->len - r->pos) / 2) v = calloc((size_t)n + 1, sizeof *v);
  if (!v) {
    r->failed = 1;
    return NULL;
  }
  for (uint32_t i = 0; i < n && !r->failed; i++) v[(*count)++] = take_str(r);
  return v;
}

static void free_strs(char **v) {
  for (size_t i = 0; v && v[i]; i++) free(v[i]);
  free(v);
}

/* Each entry "NAME=value" with a non-empty name. */
static int vars_valid(char *const *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (v[i][0] == '=' || !strchr(v[i], '=')) return 0;
  return 1;
}

static int job_ranks(hvd_reader *r, agent_job *j) {
  uint32_t n = hvd__get_u32(r);
  if (r->failed || n == 0 || n > HVDRUN_MAX_NP || n > (r->len - r->pos) / 8) {
    r->failed = 1;
    return 0;
  }
  j->ranks = calloc(n, sizeof *j->ranks);
  if (!j->ranks) return HVD_E_NOMEM;
  for (uint32_t i = 0; i < n && !r->failed; i++, j->nranks++) {
    agent_rank *k = &j->ranks[i];
    k->rank = hvd__get_u32(r);
    k->vars = take_strs(r, &k->nvars);
  }
  return 0;
}

/* What the structure allows but the job must not be. */
static int job_valid(const agent_job *j) {
  uint8_t seen[HVDRUN_MAX_NP / 8] = {0};
  if (j->cwd[0] != '/') return hvd__err(HVD_E_PROTOCOL, "JOB with a relative directory");
  if (j->argc == 0 || !j->argv[0][0]) return hvd__err(HVD_E_PROTOCOL, "JOB without a program");
  if (!vars_valid(j->env, j->nenv))
    return hvd__err(HVD_E_PROTOCOL, "JOB with a variable that is not NAME=value");
  for (size_t i = 0; i < j->nranks; i++) {
    const agent_rank *k = &j->ranks[i];
    if (k->rank >= HVDRUN_MAX_NP || (seen[k->rank / 8] >> (k->rank % 8)) & 1)
      return hvd__err(HVD_E_PROTOCOL, "JOB with rank %u out of range or twice", k->rank);
    seen[k->rank / 8] |= (uint8_t)(1u << (k->rank % 8));
    if (k->nvars > VARS_PER_RANK_MAX || !vars_valid(k->vars, k->nvars))
      return hvd__err(HVD_E_PROTOCOL, "JOB with bad variables for rank %u", k->rank);
  }
  return 0;
}

int agent_job_decode(const uint8_t *payload, size_t len, agent_job *j) {
  hvd_reader r = {payload, len, 0, 0};
  memset(j, 0, sizeof *j);
  j->version = hvd__get_u32(&r);
  j->cwd = take_str(&r);
  j->argv = take_strs(&r, &j->argc);
  j->env = take_strs(&r, &j->nenv);
  int rc = job_ranks(&r, j);
  if (rc == 0 && !hvd__reader_done(&r))
    rc = hvd__err(HVD_E_PROTOCOL, "JOB message of %zu bytes: truncated, a count too large, "
                  "or bytes left over", len);
  if (rc == 0) rc = job_valid(j);
  if (rc == HVD_E_NOMEM) hvd__err(rc, "out of memory for the JOB");
  if (rc < 0) agent_job_free(j);
  return rc;
}

void agent_job_free(agent_job *j) {
  free(j->cwd);
  free_strs(j->argv);
  free_strs(j->env);
  for (size_t i = 0; i < j->nranks; i++) free_strs(j->ranks[i].vars);
  free(j->ranks);
  memset(j, 0, sizeof *j);
}

int agent_spawn_decode(const uint8_t *payload, size_t len, agent_spawn *s) {
  hvd_reader r = {payload, len, 0, 0};
  memset(s, 0, sizeof *s);
  s->id = hvd__get_u32(&r);
  s->argv = take_strs(&r, &s->argc);
  int rc = 0;
  if (!hvd__reader_done(&r))
    rc = hvd__err(HVD_E_PROTOCOL, "SPAWN message of %zu bytes: truncated, a count too large, "
                  "or bytes left over", len);
  else if (s->argc == 0 || s->argc > AGENT_SPAWN_ARGS_MAX || !s->argv[0][0])
    rc = hvd__err(HVD_E_PROTOCOL, "SPAWN with %zu arguments (1..%d, the first not empty)",
                  s->argc, AGENT_SPAWN_ARGS_MAX);
  if (rc < 0) agent_spawn_free(s);
  return rc;
}

void agent_spawn_free(agent_spawn *s) {
  free_strs(s->argv);
  memset(s, 0, sizeof *s);
}

/* ---- the stream of frames ---- */

void agent_reader_init(agent_reader *r, unsigned accept) {
  memset(r, 0, sizeof *r);
  r->accept = accept;
}

/* Says what a stream that is not ours began with, printably: a login
 * script that writes to stdout is the usual culprit. */
static int not_a_frame(const uint8_t *hdr) {
  char text[HVD_FRAME_HDR_LEN + 1];
  for (size_t i = 0; i < HVD_FRAME_HDR_LEN; i++)
    text[i] = hdr[i] >= 0x20 && hdr[i] < 0x7f ? (char)hdr[i] : '.';
  text[HVD_FRAME_HDR_LEN] = '\0';
  return hvd__err(HVD_E_PROTOCOL, "the stream does not begin with a frame but with '%s' "
                  "(does a login script print something?)", text);
}

static int take_header(agent_reader *r) {
  hvd_reader h = {r->hdr, HVD_FRAME_HDR_LEN, 0, 0};
  uint32_t magic = hvd__get_u32(&h);
  uint8_t version = hvd__get_u8(&h), type = hvd__get_u8(&h);
  uint32_t reserved = hvd__get_u16(&h), tag = hvd__get_u32(&h);
  reserved |= hvd__get_u32(&h);
  uint64_t len = hvd__get_u64(&h);
  if (magic != HVD_FRAME_MAGIC) return not_a_frame(r->hdr);
  if (version != HVD_FRAME_VERSION)
    return hvd__err(HVD_E_PROTOCOL, "frame version %u, expected %u", version, HVD_FRAME_VERSION);
  if (type < 32 || type >= AGENT_TYPE_END || !((r->accept >> (type - 32)) & 1))
    return hvd__err(HVD_E_PROTOCOL, "unexpected frame type %u", type);
  if (reserved || tag) return hvd__err(HVD_E_PROTOCOL, "nonzero tag or reserved field");
  if (len > payload_max(type))
    return hvd__err(HVD_E_PROTOCOL, "%s frame of %llu bytes (at most %zu)", type_name(type),
                    (unsigned long long)len, payload_max(type));
  if (len > r->cap) {
    uint8_t *p = realloc(r->payload, (size_t)len);
    if (!p) return hvd__err(HVD_E_NOMEM, "out of memory for a frame of %llu bytes",
                            (unsigned long long)len);
    r->payload = p;
    r->cap = (size_t)len;
  }
  r->type = type;
  r->len = (size_t)len;
  r->got = 0;
  return 0;
}

static size_t take(uint8_t *dst, size_t want, const uint8_t *src, size_t have) {
  size_t n = want < have ? want : have;
  if (n) memcpy(dst, src, n);
  return n;
}

int agent_reader_feed(agent_reader *r, const uint8_t *data, size_t n, size_t *used) {
  size_t u = 0;
  if (r->hdr_len == HVD_FRAME_HDR_LEN && r->got == r->len) r->hdr_len = 0; /* the last was taken */
  for (;;) {
    if (r->hdr_len < HVD_FRAME_HDR_LEN) {
      size_t k = take(r->hdr + r->hdr_len, HVD_FRAME_HDR_LEN - r->hdr_len, data + u, n - u);
      r->hdr_len += k;
      u += k;
      if (r->hdr_len < HVD_FRAME_HDR_LEN) break;
      int rc = take_header(r);
      if (rc < 0) {
        *used = u;
        return rc;
      }
    }
    /* An empty frame (PING) may come before any payload buffer exists:
     * no arithmetic on a NULL pointer (found by fuzz_agent_proto). */
    size_t k = r->got < r->len ? take(r->payload + r->got, r->len - r->got, data + u, n - u) : 0;
    r->got += k;
    u += k;
    if (r->got < r->len) break;
    *used = u;
    return 1;
  }
  *used = u;
  return 0;
}

void agent_reader_free(agent_reader *r) {
  free(r->payload);
  r->payload = NULL;
  r->cap = 0;
}

/* ---- encoding ---- */

/* Room for a frame of up to `max` payload bytes; the writer covers the
 * payload.  -1 when out of memory. */
static int frame_begin(bytes *q, size_t max, hvd_writer *w) {
  if (bytes_reserve(q, HVD_FRAME_HDR_LEN + max) < 0) return -1;
  *w = (hvd_writer){(uint8_t *)q->buf + q->len + HVD_FRAME_HDR_LEN, max, 0, 0};
  return 0;
}

static int frame_end(bytes *q, uint8_t type, const hvd_writer *w) {
  if (w->failed) return -1;
  hvd_frame f = {type, 0, w->len};
  hvd__frame_encode(&f, (uint8_t *)q->buf + q->len);
  q->len += HVD_FRAME_HDR_LEN + w->len;
  return 0;
}

int agent_put_msg(bytes *q, const agent_msg *m) {
  hvd_writer w;
  if (m->type == AGENT_JOB || m->type == AGENT_SPAWN || msg_valid(m) < 0 ||
      frame_begin(q, payload_max(m->type), &w) < 0)
    return -1;
  switch (m->type) {
    case AGENT_SIGNAL: hvd__put_u32(&w, m->num); break;
    case AGENT_HELLO:
      hvd__put_u32(&w, m->num);
      hvd__put_str(&w, m->text);
      break;
    case AGENT_ERROR: hvd__put_str(&w, m->text); break;
    case AGENT_STARTED:
      hvd__put_u32(&w, m->rank);
      hvd__put_u32(&w, m->num);
      break;
    case AGENT_OUTPUT:
    case AGENT_CLOSED:
      hvd__put_u32(&w, m->rank);
      hvd__put_u8(&w, m->stream);
      if (m->type == AGENT_OUTPUT) hvd__put_bytes(&w, m->data, m->len);
      break;
    case AGENT_EXITED:
    case AGENT_ENDED:
      hvd__put_u32(&w, m->type == AGENT_EXITED ? m->rank : m->id);
      hvd__put_u8(&w, (uint8_t)m->exit.how);
      hvd__put_u32(&w, (uint32_t)m->exit.value);
      break;
    case AGENT_TO:
    case AGENT_FROM:
      hvd__put_u32(&w, m->id);
      if (m->type == AGENT_FROM) hvd__put_u8(&w, m->stream);
      hvd__put_bytes(&w, m->data, m->len);
      break;
    case AGENT_CLOSE:
    case AGENT_KILL:
      hvd__put_u32(&w, m->id);
      if (m->type == AGENT_KILL) hvd__put_u32(&w, m->num);
      break;
    default: break; /* PING */
  }
  return frame_end(q, m->type, &w);
}

static size_t strs_size(char *const *v, size_t n) {
  size_t size = 4;
  for (size_t i = 0; i < n; i++) size += 2 + strlen(v[i]);
  return size;
}

static void put_strs(hvd_writer *w, char *const *v, size_t n) {
  hvd__put_u32(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    if (strlen(v[i]) > STR_MAX) w->failed = 1;
    hvd__put_str(w, v[i]);
  }
}

int agent_put_job(bytes *q, const agent_job *j) {
  size_t size = 4 + 2 + strlen(j->cwd) + strs_size(j->argv, j->argc) +
                strs_size(j->env, j->nenv) + 4;
  for (size_t i = 0; i < j->nranks; i++) size += 4 + strs_size(j->ranks[i].vars, j->ranks[i].nvars);
  hvd_writer w;
  if (size > HVD_FRAME_CONTROL_MAX || strlen(j->cwd) > STR_MAX || frame_begin(q, size, &w) < 0)
    return -1;
  hvd__put_u32(&w, j->version);
  hvd__put_str(&w, j->cwd);
  put_strs(&w, j->argv, j->argc);
  put_strs(&w, j->env, j->nenv);
  hvd__put_u32(&w, (uint32_t)j->nranks);
  for (size_t i = 0; i < j->nranks; i++) {
    hvd__put_u32(&w, j->ranks[i].rank);
    put_strs(&w, j->ranks[i].vars, j->ranks[i].nvars);
  }
  return frame_end(q, AGENT_JOB, &w);
}

int agent_put_spawn(bytes *q, const agent_spawn *s) {
  size_t size = 4 + strs_size(s->argv, s->argc);
  hvd_writer w;
  if (s->argc == 0 || s->argc > AGENT_SPAWN_ARGS_MAX || !s->argv[0][0] || size > SPAWN_MAX ||
      frame_begin(q, size, &w) < 0)
    return -1;
  hvd__put_u32(&w, s->id);
  put_strs(&w, s->argv, s->argc);
  return frame_end(q, AGENT_SPAWN, &w);
}
