/*
 * seeds.c -- writes the seed corpora of the fuzz targets from real
 * encodings: `fuzz_seeds DIR` fills DIR/<target>/ (tests/fuzz/corpus is
 * what it wrote, committed).  Every seed is what hvd's own encoders put
 * on the wire, behind the control bytes its target reads first, so the
 * fuzzers start from inputs that get past every check and mutate from
 * there.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>

#include "rdzv/rdzv.h"
#include "rdzv/rdzv_elastic.h"
#include "engine/message.h"
#include "fuzz.h"
#include "launcher/agent_proto.h"
#include "transport/shm_seg.h"

static const char *root;

static void die(const char *what) {
  fprintf(stderr, "fuzz_seeds: %s: %s\n", what, hvd_last_error());
  exit(1);
}

/* DIR/target/name := head (control bytes) + body. */
static void seed(const char *target, const char *name, const uint8_t *head, size_t nhead,
                 const void *body, size_t nbody) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, target);
  if (mkdir(path, 0777) != 0 && errno != EEXIST) die(path);
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(head, 1, nhead, f) != nhead || fwrite(body, 1, nbody, f) != nbody ||
      fclose(f) != 0)
    die(path);
}

#define HEAD(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})

/* A frame: header then payload, into out; returns its length. */
static size_t framed(uint8_t type, const uint8_t *payload, size_t len, uint8_t *out) {
  hvd_frame f = {type, 0, len};
  hvd__frame_encode(&f, out);
  memcpy(out + HVD_FRAME_HDR_LEN, payload, len);
  return HVD_FRAME_HDR_LEN + len;
}

/* ---- frame ---- */

static void frame_seeds(void) {
  uint8_t buf[256];
  hvd_writer w = {buf, sizeof buf, 0, 0};
  hvd_frame f = {HVD_FRAME_DATA, 7, 64};
  hvd__frame_encode(&f, buf);
  w.len = HVD_FRAME_HDR_LEN;
  /* script: u8, u16, u32, u64, str (cap 32), 4 raw bytes, done */
  static const uint8_t script[] = {0, 1, 2, 3, 4 | (31 << 3), 6 | (4 << 3), 7};
  hvd__put_u8(&w, sizeof script);
  hvd__put_bytes(&w, script, sizeof script);
  hvd__put_u8(&w, 0xab);
  hvd__put_u16(&w, 0x1234);
  hvd__put_u32(&w, 0xdeadbeef);
  hvd__put_u64(&w, 0x0102030405060708ull);
  hvd__put_str(&w, "grad.layer1");
  hvd__put_bytes(&w, "\x01\x02\x03\x04", 4);
  if (w.failed) die("frame seed");
  seed("frame", "data_script", NULL, 0, buf, w.len);
  static const uint8_t types[] = {HVD_FRAME_ABORT, HVD_FRAME_RDZV_REGISTER, HVD_FRAME_RDZV_TABLE,
                                  HVD_FRAME_RDZV_ERROR};
  for (size_t i = 0; i < sizeof types; i++) {
    char name[32];
    hvd_frame g = {types[i], 0, 10};
    hvd__frame_encode(&g, buf);
    snprintf(name, sizeof name, "type_%u", types[i]);
    seed("frame", name, NULL, 0, buf, HVD_FRAME_HDR_LEN);
  }
}

/* ---- what rank 0 sends rank 1 over TCP (fuzz_tcp) ---- */

static void tcp_seeds(void) {
  uint8_t buf[512], payload[64];
  size_t len = 0;
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i * 3);
  hvd_frame f = {HVD_FRAME_DATA, 1, 64};
  hvd__frame_encode(&f, buf);
  memcpy(buf + HVD_FRAME_HDR_LEN, payload, 64);
  len = HVD_FRAME_HDR_LEN + 64;
  f = (hvd_frame){HVD_FRAME_DATA, 2, 8};
  hvd__frame_encode(&f, buf + len);
  memcpy(buf + len + HVD_FRAME_HDR_LEN, payload, 8);
  seed("tcp", "two_frames", NULL, 0, buf, len + HVD_FRAME_HDR_LEN + 8);
  /* An ABORT instead: rank 0 lost rank 3, and why. */
  uint8_t reason[128];
  hvd_writer w = {reason, sizeof reason, 0, 0};
  hvd__put_u32(&w, 3);
  hvd__put_str(&w, "rank 3 lost: connection closed by peer");
  f = (hvd_frame){HVD_FRAME_ABORT, 0, w.len};
  hvd__frame_encode(&f, buf);
  memcpy(buf + HVD_FRAME_HDR_LEN, reason, w.len);
  seed("tcp", "abort", NULL, 0, buf, HVD_FRAME_HDR_LEN + w.len);
  /* The first frame, then an ABORT in place of the second. */
  f = (hvd_frame){HVD_FRAME_DATA, 1, 64};
  hvd__frame_encode(&f, buf);
  memcpy(buf + HVD_FRAME_HDR_LEN, payload, 64);
  f = (hvd_frame){HVD_FRAME_ABORT, 0, w.len};
  hvd__frame_encode(&f, buf + HVD_FRAME_HDR_LEN + 64);
  memcpy(buf + 2 * HVD_FRAME_HDR_LEN + 64, reason, w.len);
  seed("tcp", "data_then_abort", NULL, 0, buf, 2 * HVD_FRAME_HDR_LEN + 64 + w.len);
}

/* ---- auth ---- */

static void auth_seeds(void) {
  hvd_secret key;
  for (size_t i = 0; i < sizeof key.bytes; i++) key.bytes[i] = (uint8_t)(i * 37 + 11);
  hvd_auth_state sa, sc;
  uint8_t ch[HVD_AUTH_CHALLENGE_LEN], resp[HVD_AUTH_RESPONSE_LEN], proof[HVD_AUTH_PROOF_LEN];
  uint8_t zeros[HVD_AUTH_RESPONSE_LEN] = {0}, both[HVD_AUTH_CHALLENGE_LEN + HVD_AUTH_PROOF_LEN];
  if (hvd__auth_challenge(&sa, ch) < 0 ||
      hvd__auth_respond(&key, "data", 3, ch, &sc, resp) < 0 ||
      hvd__auth_verify_response(&key, "data", 7, resp, &sa, proof) < 0)
    die("auth seeds");
  seed("auth", "challenge", HEAD(0), ch, sizeof ch);
  seed("auth", "response", HEAD(1), resp, sizeof resp);
  seed("auth", "response_mask", HEAD(2), zeros, HVD_AUTH_RESPONSE_LEN);
  seed("auth", "proof", HEAD(3), proof, sizeof proof);
  seed("auth", "proof_mask", HEAD(4), zeros, HVD_AUTH_PROOF_LEN);
  memcpy(both, ch, sizeof ch);
  memcpy(both + sizeof ch, proof, sizeof proof);
  seed("auth", "connect", HEAD(5), both, sizeof both);
  seed("auth", "accept", HEAD(6), resp, sizeof resp);
  char text[HVD_SECRET_TEXT_MAX];
  if (hvd__secret_encode(&key, text, sizeof text) < 0) die("secret");
  seed("auth", "secret", HEAD(7), text, strlen(text));
}

/* ---- rendezvous ---- */

static hvd_rdzv_entry entry(uint32_t rank, uint32_t size) {
  hvd_rdzv_entry e;
  memset(&e, 0, sizeof e);
  e.rank = rank;
  e.size = size;
  snprintf(e.hostname, sizeof e.hostname, "host%u", rank / 2);
  snprintf(e.host_id, sizeof e.host_id, "node%u/5e2c-boot", rank / 2);
  snprintf(e.iface, sizeof e.iface, "eth0");
  snprintf(e.listen.addr, sizeof e.listen.addr, rank % 2 ? "::1" : "127.0.0.1");
  e.listen.port = 4000 + (int)rank;
  e.local_size = size < 2 ? size : 2;
  e.local_rank = rank % e.local_size;
  e.shm = 1;
  return e;
}

static void rdzv_seeds(void) {
  uint8_t buf[8192], frame[8192 + HVD_FRAME_HDR_LEN];
  hvd_rdzv_entry t[4];
  hvd_rdzv_entry me = entry(0, 2);
  int len = hvd__rdzv_encode_register(&me, buf, sizeof buf);
  if (len < 0) die("register");
  seed("rdzv_client", "register", HEAD(0, 2), buf, (size_t)len);
  for (uint32_t size = 1; size <= 4; size *= 2) {
    char name[32];
    for (uint32_t r = 0; r < size; r++) t[r] = entry(r, size);
    len = hvd__rdzv_encode_table(t, size, buf, sizeof buf);
    if (len < 0) die("table");
    snprintf(name, sizeof name, "table_%u", size);
    seed("rdzv_client", name, HEAD(1, (uint8_t)(size - 1)), buf, (size_t)len);
    snprintf(name, sizeof name, "reply_table_%u", size);
    seed("rdzv_client", name, HEAD(3, (uint8_t)(size - 1)), frame,
         framed(HVD_FRAME_RDZV_TABLE, buf, (size_t)len, frame));
  }
  len = hvd__rdzv_encode_error("rank 1 is already registered (from 127.0.0.1:5555)", buf,
                               sizeof buf);
  if (len < 0) die("error");
  seed("rdzv_client", "error", HEAD(2, 0), buf, (size_t)len);
  seed("rdzv_client", "reply_error", HEAD(3, 1), frame,
       framed(HVD_FRAME_RDZV_ERROR, buf, (size_t)len, frame));

  /* The server: flags (bit 0 authenticated, bits 1-2 size - 1), rank. */
  for (uint32_t size = 1; size <= 2; size++) {
    char name[32];
    hvd_rdzv_entry e = entry(size - 1, size);
    len = hvd__rdzv_encode_register(&e, buf, sizeof buf);
    if (len < 0) die("register");
    snprintf(name, sizeof name, "register_%u_of_%u", size - 1, size);
    seed("rdzv_server", name, HEAD((uint8_t)(1 | (size - 1) << 1), (uint8_t)(size - 1)), frame,
         framed(HVD_FRAME_RDZV_REGISTER, buf, (size_t)len, frame));
  }
  seed("rdzv_server", "wrong_size", HEAD(1 | 3 << 1, 0), frame,
       framed(HVD_FRAME_RDZV_REGISTER, buf, (size_t)len, frame));
  seed("rdzv_server", "stranger", HEAD(0, 0), "GET / HTTP/1.0\r\n\r\n", 18);
}

/* An elastic job's messages: the decoders (control byte 4-6), a worker's
 * NOTICE stream (7), a JOIN to an elastic server (flags bit 3). */
static void rdzv_elastic_seeds(void) {
  uint8_t buf[8192], frame[8192 + HVD_FRAME_HDR_LEN];
  hvd_rdzv_entry me = entry(0, 1), t[2] = {entry(0, 2), entry(1, 2)};
  int len = hvd__rdzv_encode_join(7, &me, buf, sizeof buf);
  if (len < 0) die("join");
  seed("rdzv_client", "join", HEAD(4, 0), buf, (size_t)len);
  seed("rdzv_server", "elastic_join", HEAD(1 | 8, 7), frame,
       framed(HVD_FRAME_RDZV_JOIN, buf, (size_t)len, frame));
  hvd_rdzv_place p = {3, 1, 2, 0, 1};
  len = hvd__rdzv_encode_place(&p, t, buf, sizeof buf);
  if (len < 0) die("place");
  seed("rdzv_client", "place", HEAD(5, 0), buf, (size_t)len);
  hvd_rdzv_notice n = {1764000000123ull, 1, 0};
  len = hvd__rdzv_encode_notice(&n, buf, sizeof buf);
  if (len < 0) die("notice");
  seed("rdzv_client", "notice", HEAD(6, 0), buf, (size_t)len);
  size_t one = framed(HVD_FRAME_RDZV_NOTICE, buf, (size_t)len, frame);
  n.stamp++, n.added = 0, n.removed = 1;
  len = hvd__rdzv_encode_notice(&n, buf, sizeof buf);
  if (len < 0) die("notice");
  size_t two = one + framed(HVD_FRAME_RDZV_NOTICE, buf, (size_t)len, frame + one);
  seed("rdzv_client", "notices", HEAD(7, 0), frame, two);
}

/* ---- negotiation messages ---- */

static hvd_request request(const char *name, int type, int dtype, uint64_t count) {
  hvd_request q;
  memset(&q, 0, sizeof q);
  snprintf(q.name, sizeof q.name, "%s", name);
  q.type = (uint8_t)type;
  q.dtype = (uint8_t)dtype;
  q.op = HVD_SUM;
  q.count = count;
  if (hvd__request_has_shape(type)) {
    q.ndims = 2;
    q.shape[0] = 2;
    q.shape[1] = (int64_t)count / 2;
  }
  q.prescale = 1.0;
  q.postscale = 0.5;
  return q;
}

static void message_seed(const char *name, const hvd_msg *m) {
  uint8_t *buf;
  size_t len;
  if (hvd__msg_encode(m, &buf, &len) < 0) die(name);
  seed("message", name, HEAD(0, 4), buf, len); /* capacity 1024 */
  free(buf);
}

static void message_seeds(void) {
  hvd_msg m = {0};
  message_seed("empty", &m);
  hvd_request reqs[4] = {request("grad.w1", HVD_REQ_ALLREDUCE, HVD_FLOAT32, 1024),
                         request("params", HVD_REQ_BROADCAST, HVD_FLOAT16, 8),
                         request("tokens", HVD_REQ_ALLGATHER, HVD_INT64, 0),
                         request("grad.group.0", HVD_REQ_REDUCESCATTER, HVD_BFLOAT16, 64)};
  reqs[1].root = 1;
  reqs[3].group_size = 2;
  reqs[3].process_set = 1;
  reqs[2].on_device = 1;
  char fails[1][HVD_NAME_MAX] = {"stalled"};
  m.flags = HVD_MSG_JOINED;
  m.reqs = reqs;
  m.nreq = 4;
  m.fails = fails;
  m.nfail = 1;
  for (uint32_t b = 0; b < 20; b += 3)
    if (hvd__msg_set_bit(&m, b) < 0) die("bits");
  message_seed("full", &m);
  free(m.bits);
}

/* ---- the shared-memory segment ---- */

#define GROUP 3
#define CAP 4096

/* A segment as rank 0 made it and the ranks use it: with rank 0's message
 * for rank 1 in its ring or not, and with rank 2's abort record or not. */
static void shm_seed(const char *name, int message, int abort_record) {
  size_t bytes = seg_bytes(GROUP, CAP);
  seg_hdr *h = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!h) die("segment");
  memset(h, 0, bytes);
  hvd__shm_seg_init(h, GROUP, CAP);
  seg_rank *ranks = seg_ranks(h);
  for (int r = 0; r < GROUP; r++) {
    atomic_store(&ranks[r].pid, 0); /* no process to check */
    atomic_store(&ranks[r].sync[1].reached, 1);
    ranks[r].sync[1].stamp = (hvd_sync_stamp){5, 1, 100};
    atomic_store(&ranks[r].beat_ms, 0);
  }
  /* Rank 0's message of 100 bytes for rank 1 (tag 5) in ring 0 -> 1. */
  uint8_t payload[100];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)i;
  hvd_ring_msg m;
  hvd__ring_msg_out(&m, 5, payload, sizeof payload);
  if (message &&
      hvd__ring_push(seg_ring(h, GROUP, CAP, 0, 1), CAP, &m) != (long)(16 + sizeof payload))
    die("ring");
  atomic_store(&ranks[0].waits_on, 2); /* a chain of waits: 1 -> 0 -> 2 */
  if (abort_record) { /* rank 2 gave up on rank 0 */
    ranks[2].lost = 0;
    snprintf(ranks[2].why, sizeof ranks[2].why, "timed out waiting for rank 10");
    atomic_store(&ranks[2].reported, 1);
    atomic_store(&h->reports, 1);
  }
  seed("shm_seg", name, NULL, 0, h, bytes);
  free(h);
}

/* ---- hvdrun and its agents ---- */

static void agent_seeds(void) {
  bytes q = {0};
  char *argv[] = {"/usr/bin/python3", "train.py", "--epochs", "1", NULL};
  char *env[] = {"HOROVOD_GLOO_TIMEOUT_SECONDS=30", "PATH=/usr/bin", NULL};
  char *vars0[] = {"HOROVOD_RANK=0", "HOROVOD_LOCAL_RANK=0", NULL};
  char *vars1[] = {"HOROVOD_RANK=1", NULL};
  agent_rank ranks[] = {{0, vars0, 2}, {1, vars1, 1}};
  agent_job job = {AGENT_PROTO_VERSION, "/home/user/job", argv, 4, env, 2, ranks, 2};
  agent_msg sig = {.type = AGENT_SIGNAL, .num = SIGTERM}, ping = {.type = AGENT_PING};
  if (agent_put_job(&q, &job) < 0 || agent_put_msg(&q, &sig) < 0 || agent_put_msg(&q, &ping) < 0)
    die("agent job");
  seed("agent_proto", "from_hvdrun", HEAD(1, 63), q.buf + q.off, q.len - q.off);
  bytes_free(&q);

  agent_msg hello = {.type = AGENT_HELLO, .num = AGENT_PROTO_VERSION};
  snprintf(hello.text, sizeof hello.text, "h1");
  const agent_msg msgs[] = {
      hello,
      {.type = AGENT_STARTED, .rank = 1, .num = 4242},
      {.type = AGENT_OUTPUT, .rank = 1, .stream = PROC_STDOUT, .data = (const uint8_t *)"hi\n",
       .len = 3},
      {.type = AGENT_CLOSED, .rank = 1, .stream = PROC_STDERR},
      {.type = AGENT_EXITED, .rank = 1, .exit = {PROC_KILLED, SIGKILL}},
      {.type = AGENT_PING},
  };
  for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
    if (agent_put_msg(&q, &msgs[i]) < 0) die("agent message");
  agent_msg err = {.type = AGENT_ERROR};
  snprintf(err.text, sizeof err.text, "cannot run /usr/bin/python3: No such file");
  if (agent_put_msg(&q, &err) < 0) die("agent error");
  seed("agent_proto", "from_agent", HEAD(0, 16), q.buf + q.off, q.len - q.off);
  bytes_free(&q);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  root = argv[1];
  if (mkdir(root, 0777) != 0 && errno != EEXIST) die(root);
  frame_seeds();
  tcp_seeds();
  auth_seeds();
  rdzv_seeds();
  rdzv_elastic_seeds();
  message_seeds();
  shm_seed("message_waiting", 1, 0);
  shm_seed("abort_record", 0, 1);
  shm_seed("silent_peers", 0, 0);
  agent_seeds();
  return 0;
}
