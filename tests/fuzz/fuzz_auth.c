/*
 * fuzz_auth.c -- the authentication handshake (wire/auth.h): what a
 * connector reads (the challenge, the proof), what an acceptor reads (the
 * response), the blocking handshakes over a socket, and the job secret as
 * read from the environment.
 *
 * Input: one byte choosing the case, then the peer's bytes.  Properties:
 *   - a malformed or forged message is refused with a message, never
 *     accepted: a valid response or proof changed in any byte the MAC
 *     covers fails, the unchanged one succeeds and proves its id;
 *   - the handshakes over a socket end (the peer's stream ends after its
 *     bytes) with an error or the peer's proven id;
 *   - a secret that decodes is exactly the canonical text of its bytes.
 */
#include "fuzz.h"
#include "wire/auth.h"

#define PURPOSE "data"
#define ID_ACCEPTOR 7u
#define ID_CONNECTOR 3u

static hvd_secret key;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  for (size_t i = 0; i < sizeof key.bytes; i++) key.bytes[i] = (uint8_t)(i * 37 + 11);
  return 0;
}

/* A message of exactly n bytes, or NULL. */
static const uint8_t *exactly(const fuzz_input *in, size_t n) { return in->n == n ? in->p : NULL; }

static int any_set(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 1;
  return 0;
}

/* A challenge from the acceptor: the connector answers or refuses. */
static void connector_reads_challenge(const fuzz_input *in) {
  const uint8_t *c = exactly(in, HVD_AUTH_CHALLENGE_LEN);
  if (!c) return;
  hvd_auth_state st;
  uint8_t out[HVD_AUTH_RESPONSE_LEN];
  int rc = hvd__auth_respond(&key, PURPOSE, ID_CONNECTOR, c, &st, out);
  if (rc < 0) FUZZ_CHECK_ERROR(rc);
}

/* A real exchange: the acceptor's challenge (sa), the connector's
 * response (sc, resp) and, if proof is given, the acceptor's proof. */
static void exchange(hvd_auth_state *sa, hvd_auth_state *sc, uint8_t *resp, uint8_t *proof) {
  uint8_t challenge[HVD_AUTH_CHALLENGE_LEN];
  FUZZ_CHECK(hvd__auth_challenge(sa, challenge) == 0);
  FUZZ_CHECK(hvd__auth_respond(&key, PURPOSE, ID_CONNECTOR, challenge, sc, resp) == 0);
  if (proof) {
    hvd_auth_state copy = *sa; /* sa stays as the challenge left it */
    FUZZ_CHECK(hvd__auth_verify_response(&key, PURPOSE, ID_ACCEPTOR, resp, &copy, proof) == 0);
  }
}

/* A response, as raw bytes or as a valid one with bits flipped by the
 * input (mask): it passes exactly when nothing was flipped. */
static void acceptor_reads_response(const fuzz_input *in, int masked) {
  const uint8_t *m = exactly(in, HVD_AUTH_RESPONSE_LEN);
  if (!m) return;
  hvd_auth_state sa, sc;
  uint8_t resp[HVD_AUTH_RESPONSE_LEN], proof[HVD_AUTH_PROOF_LEN];
  exchange(&sa, &sc, resp, NULL);
  for (size_t i = 0; i < sizeof resp; i++) resp[i] = masked ? resp[i] ^ m[i] : m[i];
  int rc = hvd__auth_verify_response(&key, PURPOSE, ID_ACCEPTOR, resp, &sa, proof);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    if (masked) FUZZ_CHECK(any_set(m, sizeof resp));
    return;
  }
  if (masked) FUZZ_CHECK(!any_set(m, sizeof resp) && sa.id_c == ID_CONNECTOR);
  /* The proof it made convinces the real connector. */
  uint32_t id = 0;
  FUZZ_CHECK(hvd__auth_verify_proof(&key, PURPOSE, proof, &sc, &id) == 0 || !masked);
}

/* A proof, raw or a valid one masked. */
static void connector_reads_proof(const fuzz_input *in, int masked) {
  const uint8_t *m = exactly(in, HVD_AUTH_PROOF_LEN);
  if (!m) return;
  hvd_auth_state sa, sc;
  uint8_t resp[HVD_AUTH_RESPONSE_LEN], proof[HVD_AUTH_PROOF_LEN];
  exchange(&sa, &sc, resp, proof);
  for (size_t i = 0; i < sizeof proof; i++) proof[i] = masked ? proof[i] ^ m[i] : m[i];
  uint32_t id = 0;
  int rc = hvd__auth_verify_proof(&key, PURPOSE, proof, &sc, &id);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    if (masked) FUZZ_CHECK(any_set(m, sizeof proof));
  } else if (masked) {
    FUZZ_CHECK(!any_set(m, sizeof proof) && id == ID_ACCEPTOR);
  }
}

/* The blocking handshake, either side, against a peer that says the
 * input's bytes and then ends its stream. */
static void handshake_over_socket(const fuzz_input *in, int accepting) {
  int fds[2];
  uint32_t peer = 0;
  fuzz_socketpair(fds);
  fuzz_peer_says(fds[1], in->p, in->n);
  uint64_t deadline = hvd__deadline_in(5000);
  int rc = accepting ? hvd__auth_accept(fds[0], &key, PURPOSE, ID_ACCEPTOR, deadline, &peer)
                     : hvd__auth_connect(fds[0], &key, PURPOSE, ID_CONNECTOR, deadline, &peer);
  if (rc < 0) FUZZ_CHECK_ERROR(rc);
  close(fds[0]);
  close(fds[1]);
}

/* _HOROVOD_SECRET_KEY as the environment gives it. */
static void secret_from_env(const fuzz_input *in) {
  char text[128], again[HVD_SECRET_TEXT_MAX];
  if (in->n >= sizeof text) return;
  memcpy(text, in->p, in->n);
  text[in->n] = '\0';
  hvd_secret s;
  int rc = hvd__secret_decode(text, &s);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  FUZZ_CHECK(hvd__secret_encode(&s, again, sizeof again) == 0);
  FUZZ_CHECK(strcmp(again, text) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, size};
  switch (fuzz_take_u8(&in) % 8) {
    case 0: connector_reads_challenge(&in); break;
    case 1: acceptor_reads_response(&in, 0); break;
    case 2: acceptor_reads_response(&in, 1); break;
    case 3: connector_reads_proof(&in, 0); break;
    case 4: connector_reads_proof(&in, 1); break;
    case 5: handshake_over_socket(&in, 0); break;
    case 6: handshake_over_socket(&in, 1); break;
    default: secret_from_env(&in); break;
  }
  return 0;
}
