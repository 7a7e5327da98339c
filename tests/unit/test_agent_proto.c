/*
 * test_agent_proto.c -- the frames between hvdrun and its agent on another
 * host (src/launcher/agent_proto.c).
 *
 * What the agent reads comes from hvdrun over ssh, what hvdrun reads comes
 * from a remote host's stdout (where a login script may print anything),
 * so besides round trips these tests feed both decoders every truncation,
 * trailing bytes, oversized lengths, fields out of range, headers that are
 * not ours, and a few thousand random and mutated frames (run under
 * ASan/UBSan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_proto.h"
#include "common.h"
#include "wire/frame.h"
#include "rng.h"

/* Deterministic, so a failure replays. */
static rng gen = {12345};

/* Feeds a whole stream to a fresh reader and expects exactly one frame
 * that uses every byte. */
static void read_one(const bytes *q, unsigned accept, agent_reader *r) {
  size_t used;
  agent_reader_init(r, accept);
  assert_int_equal(agent_reader_feed(r, (const uint8_t *)q->buf + q->off, bytes_pending(q), &used), 1);
  assert_int_equal(used, bytes_pending(q));
}

/* Encodes m, reads it back and decodes it into *out. */
static void round_trip(const agent_msg *m, agent_msg *out) {
  bytes q = {0};
  agent_reader r;
  assert_int_equal(agent_put_msg(&q, m), 0);
  assert_memory_equal(q.buf, "HVDF", 4);
  assert_int_equal(q.buf[5], m->type);
  read_one(&q, AGENT_FROM_HVDRUN & AGENT_BIT(m->type) ? AGENT_FROM_HVDRUN : AGENT_FROM_AGENT, &r);
  assert_int_equal(r.type, m->type);
  assert_int_equal(agent_msg_decode(r.type, r.payload, r.len, out), 0);
  assert_int_equal(out->type, m->type);
  assert_int_equal(out->rank, m->rank);
  assert_int_equal(out->id, m->id);
  assert_int_equal(out->num, m->num);
  assert_int_equal(out->stream, m->stream);
  assert_int_equal(out->exit.how, m->exit.how);
  assert_int_equal(out->exit.value, m->exit.value);
  assert_string_equal(out->text, m->text);
  assert_int_equal(out->len, m->len);
  if (m->len) assert_memory_equal(out->data, m->data, m->len);
  agent_reader_free(&r);
  bytes_free(&q);
}

/* Valid messages of every type but JOB. */
static agent_msg samples(int i) {
  static uint8_t big[AGENT_OUTPUT_MAX];
  for (size_t k = 0; k < sizeof big; k++) big[k] = (uint8_t)(k * 7);
  static const uint8_t *x = (const uint8_t *)"x";
  agent_msg m = {0};
  switch (i) {
    case 0:
      m = (agent_msg){.type = AGENT_HELLO, .num = AGENT_PROTO_VERSION};
      strcpy(m.text, "h1");
      break;
    case 1: m = (agent_msg){.type = AGENT_STARTED, .rank = 4095, .num = 123456}; break;
    case 2:
      m = (agent_msg){.type = AGENT_OUTPUT, .rank = 3, .stream = 1, .data = x, .len = 1};
      break;
    case 3:
      m = (agent_msg){.type = AGENT_OUTPUT, .rank = 0, .stream = 2, .data = big, .len = sizeof big};
      break;
    case 4: m = (agent_msg){.type = AGENT_CLOSED, .rank = 9, .stream = PROC_STDERR}; break;
    case 5: m = (agent_msg){.type = AGENT_EXITED, .rank = 1, .exit = {PROC_EXITED, 255}}; break;
    case 6: m = (agent_msg){.type = AGENT_EXITED, .rank = 2, .exit = {PROC_KILLED, 9}}; break;
    case 7: m = (agent_msg){.type = AGENT_EXITED, .rank = 2, .exit = {PROC_NO_EXEC, ENOENT}}; break;
    case 8:
      m = (agent_msg){.type = AGENT_EXITED, .rank = 2, .exit = {PROC_NO_SETUP, EMFILE}};
      break;
    case 9:
      m = (agent_msg){.type = AGENT_ERROR};
      memset(m.text, 'e', sizeof m.text - 1); /* the longest */
      break;
    case 10: m = (agent_msg){.type = AGENT_PING}; break;
    case 11:
      m = (agent_msg){.type = AGENT_FROM, .id = 7, .stream = 1, .data = big, .len = sizeof big};
      break;
    case 12: m = (agent_msg){.type = AGENT_FROM, .id = 0, .stream = 2, .data = x, .len = 1}; break;
    case 13: m = (agent_msg){.type = AGENT_ENDED, .id = UINT32_MAX, .exit = {PROC_EXITED, 255}}; break;
    case 14: m = (agent_msg){.type = AGENT_ENDED, .id = 3, .exit = {PROC_NO_SETUP, EMFILE}}; break;
    /* from here on hvdrun's: test_stream_in_pieces reads the ones before */
    case 15: m = (agent_msg){.type = AGENT_TO, .id = 4095, .data = big, .len = sizeof big}; break;
    case 16: m = (agent_msg){.type = AGENT_CLOSE, .id = 12}; break;
    case 17: m = (agent_msg){.type = AGENT_KILL, .id = 12, .num = SIGKILL}; break;
    default: m = (agent_msg){.type = AGENT_SIGNAL, .num = SIGTERM}; break;
  }
  return m;
}
#define NSAMPLES 19
#define NSAMPLES_UP 15 /* samples 0..14 are the agent's */

static void test_messages_round_trip(void **state) {
  (void)state;
  for (int i = 0; i < NSAMPLES; i++) {
    agent_msg m = samples(i), out;
    print_message("sample %d\n", i);
    round_trip(&m, &out);
  }
}

/* ---- JOB ---- */

static char *argv_[] = {"/bin/prog", "", "an arg with spaces", NULL};
static char *env_[] = {"PATH=/usr/bin", "EMPTY=", "_HOROVOD_SECRET_KEY=abc=", NULL};
static char *vars0[] = {"HOROVOD_RANK=4", "HOROVOD_LOCAL_RANK=0"};
static char *vars1[] = {"HOROVOD_RANK=5", "HOROVOD_LOCAL_RANK=1"};

static agent_job sample_job(agent_rank ranks[2]) {
  ranks[0] = (agent_rank){4, vars0, 2};
  ranks[1] = (agent_rank){5, vars1, 2};
  return (agent_job){AGENT_PROTO_VERSION, "/home/u/work dir", argv_, 3, env_, 3, ranks, 2};
}

static void assert_strs(char **got, char **want, size_t n) {
  for (size_t i = 0; i < n; i++) assert_string_equal(got[i], want[i]);
}

static void test_job_round_trip(void **state) {
  (void)state;
  agent_rank ranks[2];
  agent_job in = sample_job(ranks), out;
  bytes q = {0};
  agent_reader r;
  assert_int_equal(agent_put_job(&q, &in), 0);
  read_one(&q, AGENT_FROM_HVDRUN, &r);
  assert_int_equal(r.type, AGENT_JOB);
  assert_int_equal(agent_job_decode(r.payload, r.len, &out), 0);
  assert_int_equal(out.version, in.version);
  assert_string_equal(out.cwd, in.cwd);
  assert_int_equal(out.argc, 3);
  assert_strs(out.argv, argv_, 3);
  assert_null(out.argv[3]);
  assert_int_equal(out.nenv, 3);
  assert_strs(out.env, env_, 3);
  assert_null(out.env[3]);
  assert_int_equal(out.nranks, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(out.ranks[i].rank, ranks[i].rank);
    assert_int_equal(out.ranks[i].nvars, 2);
    assert_strs(out.ranks[i].vars, ranks[i].vars, 2);
  }
  agent_job_free(&out);
  agent_reader_free(&r);
  bytes_free(&q);
}

/* A JOB payload as hvdrun would write it, with whatever fields. */
static size_t job_payload(uint8_t *buf, size_t cap, const char *cwd, uint32_t argc,
                          const char *arg0, const char *var, uint32_t nranks, uint32_t rank0,
                          uint32_t rank1) {
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_u32(&w, AGENT_PROTO_VERSION);
  hvd__put_str(&w, cwd);
  hvd__put_u32(&w, argc);
  for (uint32_t i = 0; i < argc && i < 1; i++) hvd__put_str(&w, arg0);
  hvd__put_u32(&w, 1);
  hvd__put_str(&w, var);
  hvd__put_u32(&w, nranks);
  for (uint32_t i = 0; i < nranks && i < 2; i++) {
    hvd__put_u32(&w, i ? rank1 : rank0);
    hvd__put_u32(&w, 1);
    hvd__put_str(&w, "HOROVOD_RANK=0");
  }
  assert_false(w.failed);
  return w.len;
}

static void expect_bad_job(size_t len, const uint8_t *buf, const char *words) {
  agent_job j;
  assert_int_equal(agent_job_decode(buf, len, &j), HVD_E_PROTOCOL);
  print_message("%s\n", hvd_last_error());
  assert_non_null(strstr(hvd_last_error(), words));
  assert_null(j.cwd); /* nothing left to free */
}

static void test_job_rejects(void **state) {
  (void)state;
  uint8_t buf[512];
  size_t n = job_payload(buf, sizeof buf, "/w", 1, "prog", "A=1", 2, 0, 1);
  agent_job j;
  assert_int_equal(agent_job_decode(buf, n, &j), 0);
  agent_job_free(&j);
  expect_bad_job(job_payload(buf, sizeof buf, "rel/dir", 1, "p", "A=1", 1, 0, 0), buf, "relative");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 0, "", "A=1", 1, 0, 0), buf,
                 "without a program");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 1, "", "A=1", 1, 0, 0), buf,
                 "without a program");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 1, "p", "NOEQUALS", 1, 0, 0), buf,
                 "NAME=value");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 1, "p", "=x", 1, 0, 0), buf, "NAME=value");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 1, "p", "A=1", 2, 3, 3), buf, "twice");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 1, "p", "A=1", 1, 4096, 0), buf,
                 "out of range");
  expect_bad_job(job_payload(buf, sizeof buf, "/w", 1, "p", "A=1", 0, 0, 0), buf, "truncated");
  /* Counts the payload cannot hold fail before anything is allocated. */
  n = job_payload(buf, sizeof buf, "/w", 1, "p", "A=1", 1, 0, 0);
  buf[4 + 2 + 2] = 0xff, buf[4 + 2 + 2 + 3] = 0xff; /* argc = 0xff0000ff */
  expect_bad_job(n, buf, "truncated");
  /* A NUL inside a string. */
  n = job_payload(buf, sizeof buf, "/w", 1, "p", "A=1", 1, 0, 0);
  buf[4 + 2 + 1] = '\0';
  expect_bad_job(n, buf, "truncated");
}

static void test_job_too_large(void **state) {
  (void)state;
  agent_rank ranks[2];
  agent_job j = sample_job(ranks);
  char *big = malloc(60000), *env[20];
  memset(big, 'v', 59999);
  big[0] = 'B', big[1] = '=', big[59999] = '\0';
  for (int i = 0; i < 20; i++) env[i] = big; /* 20 x 60 KB > 1 MiB */
  j.env = env;
  j.nenv = 20;
  bytes q = {0};
  assert_int_equal(agent_put_job(&q, &j), -1);
  assert_int_equal(bytes_pending(&q), 0);
  char *huge = malloc(70000);
  memset(huge, 'a', 69999);
  huge[69999] = '\0';
  j.nenv = 0;
  j.argv[1] = huge; /* a string longer than a u16 length */
  assert_int_equal(agent_put_job(&q, &j), -1);
  j.argv[1] = "";
  assert_int_equal(bytes_pending(&q), 0);
  bytes_free(&q);
  free(big);
  free(huge);
}

/* ---- malformed input ---- */

/* Every shorter payload fails to decode (but OUTPUT's, whose bytes run
 * to the end of the frame: there only a cut into rank and stream), and a
 * stream cut short never yields a frame. */
static void test_every_truncation(void **state) {
  (void)state;
  agent_rank ranks[2];
  agent_job job = sample_job(ranks), jout;
  for (int i = 0; i <= NSAMPLES; i++) {
    bytes q = {0};
    agent_msg m = samples(i < NSAMPLES ? i : 0), out;
    assert_int_equal(i < NSAMPLES ? agent_put_msg(&q, &m) : agent_put_job(&q, &job), 0);
    size_t total = bytes_pending(&q), plen = total - HVD_FRAME_HDR_LEN;
    /* OUTPUT's, FROM's and TO's bytes run to the end of the frame: only a
     * cut into the fields before them fails */
    size_t step = plen > 512 ? 97 : 1, short_of = plen;
    if (i < NSAMPLES && (m.type == AGENT_OUTPUT || m.type == AGENT_FROM)) short_of = 6;
    if (i < NSAMPLES && m.type == AGENT_TO) short_of = 5;
    const uint8_t *payload = (const uint8_t *)q.buf + HVD_FRAME_HDR_LEN;
    for (size_t len = 0; len < short_of; len += step) {
      int rc = i < NSAMPLES ? agent_msg_decode(m.type, payload, len, &out)
                            : agent_job_decode(payload, len, &jout);
      assert_int_equal(rc, HVD_E_PROTOCOL);
    }
    for (size_t cut = 0; cut < total; cut += step) {
      agent_reader r;
      size_t used;
      agent_reader_init(&r, AGENT_FROM_AGENT | AGENT_FROM_HVDRUN);
      assert_int_equal(agent_reader_feed(&r, (const uint8_t *)q.buf, cut, &used), 0);
      assert_int_equal(used, cut);
      agent_reader_free(&r);
    }
    bytes_free(&q);
  }
}

static void test_trailing_bytes(void **state) {
  (void)state;
  uint8_t buf[HVD_FRAME_HDR_LEN + 4096];
  for (int i = 0; i < NSAMPLES; i++) {
    bytes q = {0};
    agent_msg m = samples(i), out;
    if (m.type == AGENT_OUTPUT || m.type == AGENT_FROM || m.type == AGENT_TO)
      continue; /* its bytes run to the end */
    assert_int_equal(agent_put_msg(&q, &m), 0);
    size_t plen = bytes_pending(&q) - HVD_FRAME_HDR_LEN;
    memcpy(buf, q.buf + HVD_FRAME_HDR_LEN, plen);
    buf[plen] = 0;
    assert_int_equal(agent_msg_decode(m.type, buf, plen + 1, &out), HVD_E_PROTOCOL);
    bytes_free(&q);
  }
  uint8_t job[512];
  size_t n = job_payload(job, sizeof job - 1, "/w", 1, "p", "A=1", 1, 0, 0);
  agent_job j;
  assert_int_equal(agent_job_decode(job, n + 1, &j), HVD_E_PROTOCOL);
}

/* A header as the stream would carry it; 1 if the reader takes it. */
static int header_ok(uint32_t magic, uint8_t version, uint8_t type, uint32_t tag, uint64_t len,
                     unsigned accept) {
  uint8_t hdr[HVD_FRAME_HDR_LEN] = {0};
  hvd_writer w = {hdr, sizeof hdr, 0, 0};
  hvd__put_u32(&w, magic);
  hvd__put_u8(&w, version);
  hvd__put_u8(&w, type);
  hvd__put_u16(&w, 0);
  hvd__put_u32(&w, tag);
  hvd__put_u32(&w, 0);
  hvd__put_u64(&w, len);
  agent_reader r;
  size_t used;
  agent_reader_init(&r, accept);
  int rc = agent_reader_feed(&r, hdr, sizeof hdr, &used);
  agent_reader_free(&r);
  if (rc < 0) print_message("%s\n", hvd_last_error());
  return rc >= 0;
}

static void test_headers(void **state) {
  (void)state;
  const unsigned A = AGENT_FROM_AGENT, H = AGENT_FROM_HVDRUN;
  assert_true(
      header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_OUTPUT, 0, 5 + AGENT_OUTPUT_MAX, A));
  assert_false(
      header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_OUTPUT, 0, 6 + AGENT_OUTPUT_MAX, A));
  assert_true(
      header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_JOB, 0, HVD_FRAME_CONTROL_MAX, H));
  assert_false(
      header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_JOB, 0, HVD_FRAME_CONTROL_MAX + 1, H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_JOB, 0, UINT64_MAX, H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_PING, 0, 1, H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_STARTED, 0, 9, A));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_JOB, 0, 10, A)); /* wrong way */
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_HELLO, 0, 10, H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, HVD_FRAME_DATA, 0, 10, A | H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, 31, 0, 0, A | H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_TYPE_END, 0, 0, A | H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, 200, 0, 0, A | H));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION + 1, AGENT_PING, 0, 0, A));
  assert_false(header_ok(HVD_FRAME_MAGIC, HVD_FRAME_VERSION, AGENT_PING, 7, 0, A));
  assert_false(header_ok(0x6c6c6548u, HVD_FRAME_VERSION, AGENT_PING, 0, 0, A));
  assert_non_null(strstr(hvd_last_error(), "does not begin with a frame but with 'Hell"));
}

/* What each decoder must refuse, and the encoder must not write. */
static void test_fields_out_of_range(void **state) {
  (void)state;
  agent_msg bad[] = {
      {.type = AGENT_STARTED, .rank = 4096, .num = 1},
      {.type = AGENT_STARTED, .rank = 0, .num = 0},
      {.type = AGENT_STARTED, .rank = 0, .num = 0x80000000u},
      {.type = AGENT_OUTPUT, .rank = 0, .stream = 0, .data = (const uint8_t *)"x", .len = 1},
      {.type = AGENT_OUTPUT, .rank = 0, .stream = 3, .data = (const uint8_t *)"x", .len = 1},
      {.type = AGENT_CLOSED, .rank = 0, .stream = 0},
      {.type = AGENT_CLOSED, .rank = UINT32_MAX, .stream = 1},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_EXITED, 256}},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_EXITED, -1}},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_KILLED, 0}},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_KILLED, NSIG}},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_NO_EXEC, 0}},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_NO_SETUP, 5000}},
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_NO_START, 1}}, /* hvdrun's own */
      {.type = AGENT_EXITED, .rank = 0, .exit = {PROC_LOST, 0}},
      {.type = AGENT_SIGNAL, .num = 0},
      {.type = AGENT_SIGNAL, .num = NSIG},
      {.type = AGENT_HELLO, .num = 1}, /* no host name */
      {.type = AGENT_ERROR},           /* no message */
      {.type = 77},
  };
  for (size_t i = 0; i < HVD__ARRAY_LEN(bad); i++) {
    bytes q = {0};
    agent_msg out;
    uint8_t buf[64];
    hvd_writer w = {buf, sizeof buf, 0, 0};
    print_message("bad %zu\n", i);
    assert_int_equal(agent_put_msg(&q, &bad[i]), -1);
    assert_int_equal(bytes_pending(&q), 0);
    /* The same fields as a sender that does not check would write them. */
    hvd__put_u32(
        &w, bad[i].type == AGENT_HELLO || bad[i].type == AGENT_SIGNAL ? bad[i].num : bad[i].rank);
    if (bad[i].type == AGENT_STARTED) hvd__put_u32(&w, bad[i].num);
    if (bad[i].type == AGENT_OUTPUT || bad[i].type == AGENT_CLOSED) hvd__put_u8(&w, bad[i].stream);
    if (bad[i].type == AGENT_EXITED) {
      hvd__put_u8(&w, (uint8_t)bad[i].exit.how);
      hvd__put_u32(&w, (uint32_t)bad[i].exit.value);
    }
    if (bad[i].type == AGENT_HELLO) hvd__put_str(&w, "");
    if (bad[i].type == AGENT_OUTPUT) hvd__put_u8(&w, 'x');
    if (bad[i].type == AGENT_ERROR) w.len = 0, hvd__put_str(&w, "");
    assert_int_equal(agent_msg_decode(bad[i].type, buf, w.len, &out), HVD_E_PROTOCOL);
    bytes_free(&q);
  }
  /* OUTPUT with no bytes, or more than one read's worth. */
  agent_msg empty = {.type = AGENT_OUTPUT, .stream = 1, .data = (const uint8_t *)"", .len = 0};
  bytes q = {0};
  assert_int_equal(agent_put_msg(&q, &empty), -1);
  bytes_free(&q);
  uint8_t five[5] = {0, 0, 0, 0, 1};
  agent_msg out;
  assert_int_equal(agent_msg_decode(AGENT_OUTPUT, five, sizeof five, &out), HVD_E_PROTOCOL);
}

/* The relay's frames (the launch tree): what each side must refuse. */
static void test_relay_fields_out_of_range(void **state) {
  (void)state;
  agent_msg bad[] = {
      {.type = AGENT_FROM, .id = 1, .stream = 0, .data = (const uint8_t *)"x", .len = 1},
      {.type = AGENT_FROM, .id = 1, .stream = 1, .data = (const uint8_t *)"", .len = 0},
      {.type = AGENT_TO, .id = 1, .data = (const uint8_t *)"", .len = 0},
      {.type = AGENT_ENDED, .id = 1, .exit = {PROC_LOST, 0}},
      {.type = AGENT_ENDED, .id = 1, .exit = {PROC_KILLED, NSIG}},
      {.type = AGENT_KILL, .id = 1, .num = 0},
      {.type = AGENT_KILL, .id = 1, .num = NSIG},
  };
  for (size_t i = 0; i < HVD__ARRAY_LEN(bad); i++) {
    bytes q = {0};
    print_message("bad %zu\n", i);
    assert_int_equal(agent_put_msg(&q, &bad[i]), -1);
    assert_int_equal(bytes_pending(&q), 0);
    bytes_free(&q);
  }
  uint8_t kill0[8] = {0, 0, 0, 1, 0, 0, 0, 0}, from[5] = {0, 0, 0, 1, 3}, ended[9] = {0};
  agent_msg out;
  ended[4] = PROC_LOST;
  assert_int_equal(agent_msg_decode(AGENT_KILL, kill0, sizeof kill0, &out), HVD_E_PROTOCOL);
  assert_int_equal(agent_msg_decode(AGENT_FROM, from, sizeof from, &out), HVD_E_PROTOCOL);
  assert_int_equal(agent_msg_decode(AGENT_ENDED, ended, sizeof ended, &out), HVD_E_PROTOCOL);
  assert_int_equal(agent_msg_decode(AGENT_TO, from, 4, &out), HVD_E_PROTOCOL); /* no bytes */
  /* JOB and SPAWN have decoders of their own. */
  assert_int_equal(agent_msg_decode(AGENT_SPAWN, from, sizeof from, &out), HVD_E_PROTOCOL);
}

static void test_spawn(void **state) {
  (void)state;
  char *argv[] = {"ssh", "-F", "/run/cfg", "h9", "exec '/usr/bin/hvdrun' --agent", NULL};
  agent_spawn in = {77, argv, 5}, out;
  bytes q = {0};
  agent_reader r;
  assert_int_equal(agent_put_spawn(&q, &in), 0);
  read_one(&q, AGENT_FROM_HVDRUN, &r);
  assert_int_equal(r.type, AGENT_SPAWN);
  assert_int_equal(agent_spawn_decode(r.payload, r.len, &out), 0);
  assert_int_equal(out.id, 77);
  assert_int_equal(out.argc, 5);
  assert_strs(out.argv, argv, 5);
  assert_null(out.argv[5]);
  agent_spawn_free(&out);
  for (size_t len = 0; len < r.len; len++) /* every truncation */
    assert_int_equal(agent_spawn_decode(r.payload, len, &out), HVD_E_PROTOCOL);
  agent_reader_free(&r);
  bytes_free(&q);
  /* Refused both ways: no program, an empty one, too many arguments. */
  agent_spawn none = {1, argv, 0}, empty = {1, (char *[]){"", NULL}, 1};
  assert_int_equal(agent_put_spawn(&q, &none), -1);
  assert_int_equal(agent_put_spawn(&q, &empty), -1);
  uint8_t buf[64];
  hvd_writer w = {buf, sizeof buf, 0, 0};
  hvd__put_u32(&w, 1);
  hvd__put_u32(&w, 1);
  hvd__put_str(&w, "");
  assert_int_equal(agent_spawn_decode(buf, w.len, &out), HVD_E_PROTOCOL);
  assert_non_null(strstr(hvd_last_error(), "the first not empty"));
  char **many = calloc(AGENT_SPAWN_ARGS_MAX + 2, sizeof *many);
  for (int i = 0; i <= AGENT_SPAWN_ARGS_MAX; i++) many[i] = "a";
  agent_spawn lots = {1, many, AGENT_SPAWN_ARGS_MAX + 1};
  assert_int_equal(agent_put_spawn(&q, &lots), -1);
  assert_int_equal(bytes_pending(&q), 0);
  free(many);
  bytes_free(&q);
}

static void test_text_made_printable(void **state) {
  (void)state;
  agent_msg m = {.type = AGENT_ERROR}, out;
  bytes q = {0};
  agent_reader r;
  strcpy(m.text, "cannot\x1b[31m go\non\x7f");
  assert_int_equal(agent_put_msg(&q, &m), 0);
  read_one(&q, AGENT_FROM_AGENT, &r);
  assert_int_equal(agent_msg_decode(r.type, r.payload, r.len, &out), 0);
  assert_string_equal(out.text, "cannot?[31m go?on?");
  agent_reader_free(&r);
  bytes_free(&q);
}

/* Many frames fed a few bytes at a time come out whole and in order. */
static void test_stream_in_pieces(void **state) {
  (void)state;
  bytes q = {0};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < NSAMPLES_UP; i++) {
      agent_msg m = samples(i);
      assert_int_equal(agent_put_msg(&q, &m), 0);
    }
  agent_reader r;
  agent_reader_init(&r, AGENT_FROM_AGENT);
  size_t at = 0, total = bytes_pending(&q);
  int seen = 0;
  while (at < total) {
    size_t n = 1 + rng_next(&gen) % 7, used;
    if (n > total - at) n = total - at;
    int rc = agent_reader_feed(&r, (const uint8_t *)q.buf + at, n, &used);
    assert_true(rc >= 0 && used <= n);
    at += used;
    if (rc == 1) {
      agent_msg want = samples(seen % NSAMPLES_UP), got;
      assert_int_equal(r.type, want.type);
      assert_int_equal(agent_msg_decode(r.type, r.payload, r.len, &got), 0);
      seen++;
    } else {
      assert_int_equal(used, n);
    }
  }
  assert_int_equal(seen, 3 * NSAMPLES_UP);
  agent_reader_free(&r);
  bytes_free(&q);
}

/* Random bytes, and valid frames with random bytes changed: the decoders
 * say yes or no, and never read or write out of bounds. */
static void test_fuzz(void **state) {
  (void)state;
  uint8_t junk[4096];
  for (int round = 0; round < 2000; round++) {
    agent_reader r;
    size_t n = rng_next(&gen) % sizeof junk, at = 0, used;
    for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)rng_next(&gen);
    if (round % 2) memcpy(junk, "HVDF\x01", n >= 5 ? 5 : n); /* get past the magic */
    if (round % 4 == 1 && n >= 6)
      junk[5] = (uint8_t)(32 + rng_next(&gen) % (AGENT_TYPE_END - 32));
    agent_reader_init(&r, round % 3 ? AGENT_FROM_AGENT : AGENT_FROM_HVDRUN);
    int rc;
    while ((rc = agent_reader_feed(&r, junk + at, n - at, &used)) == 1) {
      agent_msg m;
      agent_job j;
      at += used;
      agent_spawn sp;
      if (r.type == AGENT_SPAWN && agent_spawn_decode(r.payload, r.len, &sp) == 0)
        agent_spawn_free(&sp);
      else if (r.type == AGENT_JOB ? agent_job_decode(r.payload, r.len, &j) == 0
                                   : agent_msg_decode(r.type, r.payload, r.len, &m) == 0)
        if (r.type == AGENT_JOB) agent_job_free(&j);
    }
    agent_reader_free(&r);
  }
  agent_rank ranks[2];
  agent_job job = sample_job(ranks);
  bytes q = {0};
  assert_int_equal(agent_put_job(&q, &job), 0);
  size_t plen = bytes_pending(&q) - HVD_FRAME_HDR_LEN;
  uint8_t *copy = malloc(plen);
  for (int round = 0; round < 3000; round++) {
    agent_job j;
    memcpy(copy, q.buf + HVD_FRAME_HDR_LEN, plen);
    for (int k = 0; k < 1 + round % 4; k++) copy[rng_next(&gen) % plen] = (uint8_t)rng_next(&gen);
    if (agent_job_decode(copy, plen - (round % 7 == 0), &j) == 0) {
      bytes again = {0};
      assert_int_equal(agent_put_job(&again, &j), 0); /* what decodes, encodes */
      bytes_free(&again);
      agent_job_free(&j);
    }
  }
  free(copy);
  bytes_free(&q);
}

/* ---- writing ---- */

static void test_queue_writes_through_a_pipe(void **state) {
  (void)state;
  int p[2];
  bytes q = {0};
  agent_msg m = samples(3); /* 64 KiB: more than one pipe buffer's worth with the rest */
  assert_int_equal(pipe(p), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(agent_put_msg(&q, &m), 0);
  size_t total = bytes_pending(&q), got = 0;
  uint8_t *all = malloc(total), *want = malloc(total);
  memcpy(want, q.buf, total);
  assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
  while (bytes_pending(&q) > 0) {
    assert_int_equal(bytes_write(&q, p[1]), 0);
    ssize_t n = read(p[0], all + got, total - got);
    assert_true(n > 0);
    got += (size_t)n;
  }
  while (got < total) got += (size_t)read(p[0], all + got, total - got);
  assert_memory_equal(all, want, total);
  close(p[0]);
  signal(SIGPIPE, SIG_IGN);
  assert_int_equal(agent_put_msg(&q, &m), 0);
  assert_int_equal(bytes_write(&q, p[1]), -1); /* the reader is gone */
  assert_int_equal(errno, EPIPE);
  close(p[1]);
  free(all);
  free(want);
  bytes_free(&q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_messages_round_trip),
      cmocka_unit_test(test_job_round_trip),
      cmocka_unit_test(test_job_rejects),
      cmocka_unit_test(test_job_too_large),
      cmocka_unit_test(test_every_truncation),
      cmocka_unit_test(test_trailing_bytes),
      cmocka_unit_test(test_headers),
      cmocka_unit_test(test_fields_out_of_range),
      cmocka_unit_test(test_relay_fields_out_of_range),
      cmocka_unit_test(test_spawn),
      cmocka_unit_test(test_text_made_printable),
      cmocka_unit_test(test_stream_in_pieces),
      cmocka_unit_test(test_fuzz),
      cmocka_unit_test(test_queue_writes_through_a_pipe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
