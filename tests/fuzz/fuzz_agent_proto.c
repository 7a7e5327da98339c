/*
 * fuzz_agent_proto.c -- the frames between hvdrun and its agents on other
 * hosts (launcher/agent_proto.h), read from an ssh session's pipe, in
 * both directions.
 *
 * (SPAWN, TO, CLOSE, KILL, FROM and ENDED: the launch tree's relay.)
 *
 * Input: a byte choosing the side (bit 0: the agent reading hvdrun's
 * frames, else hvdrun reading an agent's) and the size of the pieces the
 * pipe delivers (1..256 bytes), then the stream.  Properties:
 *   - the reader never takes more than it was given, and a frame it
 *     completes has a type the side accepts;
 *   - a message or JOB that decodes, encoded again, decodes to the same
 *     thing (texts are made printable on the way, so the comparison is
 *     of the decoded values);
 *   - whatever is refused says why, and everything is freed.
 */
#include "fuzz.h"
#include "launcher/agent_proto.h"
#include "wire/frame.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  return 0;
}

static int same_strs(char **a, char **b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(a[i], b[i]) != 0) return 0;
  return !a[n] && !b[n];
}

static void check_job(const uint8_t *payload, size_t len) {
  agent_job j, k;
  int rc = agent_job_decode(payload, len, &j);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  bytes q = {0};
  FUZZ_CHECK(agent_put_job(&q, &j) == 0);
  FUZZ_CHECK(q.len - q.off >= HVD_FRAME_HDR_LEN);
  FUZZ_CHECK(agent_job_decode((uint8_t *)q.buf + q.off + HVD_FRAME_HDR_LEN,
                              q.len - q.off - HVD_FRAME_HDR_LEN, &k) == 0);
  FUZZ_CHECK(j.version == k.version && strcmp(j.cwd, k.cwd) == 0);
  FUZZ_CHECK(j.argc == k.argc && same_strs(j.argv, k.argv, j.argc));
  FUZZ_CHECK(j.nenv == k.nenv && same_strs(j.env, k.env, j.nenv));
  FUZZ_CHECK(j.nranks == k.nranks);
  for (size_t i = 0; i < j.nranks; i++)
    FUZZ_CHECK(j.ranks[i].rank == k.ranks[i].rank && j.ranks[i].nvars == k.ranks[i].nvars &&
               same_strs(j.ranks[i].vars, k.ranks[i].vars, j.ranks[i].nvars));
  agent_job_free(&j);
  agent_job_free(&k);
  bytes_free(&q);
}

static void check_spawn(const uint8_t *payload, size_t len) {
  agent_spawn s, t;
  int rc = agent_spawn_decode(payload, len, &s);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  bytes q = {0};
  FUZZ_CHECK(agent_put_spawn(&q, &s) == 0);
  FUZZ_CHECK(agent_spawn_decode((uint8_t *)q.buf + q.off + HVD_FRAME_HDR_LEN,
                                q.len - q.off - HVD_FRAME_HDR_LEN, &t) == 0);
  FUZZ_CHECK(s.id == t.id && s.argc == t.argc && same_strs(s.argv, t.argv, s.argc));
  agent_spawn_free(&s);
  agent_spawn_free(&t);
  bytes_free(&q);
}

static void check_msg(uint8_t type, const uint8_t *payload, size_t len) {
  agent_msg m, n;
  int rc = agent_msg_decode(type, payload, len, &m);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  bytes q = {0};
  FUZZ_CHECK(agent_put_msg(&q, &m) == 0);
  const uint8_t *p = (uint8_t *)q.buf + q.off;
  FUZZ_CHECK(q.len - q.off >= HVD_FRAME_HDR_LEN && p[5] == type);
  FUZZ_CHECK(agent_msg_decode(type, p + HVD_FRAME_HDR_LEN, q.len - q.off - HVD_FRAME_HDR_LEN,
                              &n) == 0);
  FUZZ_CHECK(m.rank == n.rank && m.id == n.id && m.num == n.num && m.stream == n.stream);
  FUZZ_CHECK(m.exit.how == n.exit.how && m.exit.value == n.exit.value);
  FUZZ_CHECK(m.len == n.len && (!m.len || memcmp(m.data, n.data, m.len) == 0));
  FUZZ_CHECK(strcmp(m.text, n.text) == 0);
  bytes_free(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, size};
  uint8_t side = fuzz_take_u8(&in);
  size_t piece = 1 + fuzz_take_u8(&in);
  unsigned accept = side & 1 ? AGENT_FROM_HVDRUN : AGENT_FROM_AGENT;
  agent_reader r;
  agent_reader_init(&r, accept);
  while (in.n > 0) {
    size_t n = in.n < piece ? in.n : piece, used = 0;
    int rc = agent_reader_feed(&r, in.p, n, &used);
    FUZZ_CHECK(used <= n);
    in.p += used;
    in.n -= used;
    if (rc < 0) {
      FUZZ_CHECK_ERROR(rc);
      break;
    }
    if (rc == 1) {
      FUZZ_CHECK(r.type >= 32 && ((accept >> (r.type - 32)) & 1));
      if (r.type == AGENT_JOB)
        check_job(r.payload, r.len);
      else if (r.type == AGENT_SPAWN)
        check_spawn(r.payload, r.len);
      else
        check_msg(r.type, r.payload, r.len);
    } else {
      FUZZ_CHECK(used == n);
    }
  }
  agent_reader_free(&r);
  return 0;
}
