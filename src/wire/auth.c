/*
 * auth.c -- the job's secret and the mutual HMAC-SHA256 handshake (auth.h).
 *
 * The three messages have fixed sizes and each starts with its own magic,
 * so a stranger's bytes, or a message of the wrong kind, are recognised
 * before any MAC is computed.  The challenge carries the handshake
 * version; the response and the proof are tied to it through the MAC.
 *
 * Every MAC covers one unambiguous byte string:
 *
 *   role (1 byte: 'C' connector, 'A' acceptor) | version (u32)
 *   | purpose length (u32) | purpose | first nonce | second nonce | id (u32)
 *
 * Fixed-size fields and a length-prefixed purpose mean no two different
 * (role, purpose, nonces, id) tuples hash the same bytes; the role letter
 * stops a connector's MAC from being reflected back as an acceptor's
 * proof.  MACs are compared in constant time.
 */
#include "auth.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common.h"
#include "le.h"
#include "net.h"

#define AUTH_VERSION 1u
#define PURPOSE_MAX 64 /* "rdzv", "data": short labels, bounded for the MAC buffer */

static const uint8_t MAGIC_CHALLENGE[4] = {'H', 'V', 'D', 'C'};
static const uint8_t MAGIC_RESPONSE[4] = {'H', 'V', 'D', 'R'};
static const uint8_t MAGIC_PROOF[4] = {'H', 'V', 'D', 'P'};

static uint8_t *append(uint8_t *p, const void *src, size_t n) {
  memcpy(p, src, n);
  return p + n;
}

static uint8_t *append_u32(uint8_t *p, uint32_t v) {
  hvd__le_store32(p, v);
  return p + 4;
}

static int random_bytes(uint8_t *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = getrandom(buf + done, len - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return hvd__err_sys(HVD_E_SYSTEM, errno, "getrandom");
    }
    done += (size_t)n;
  }
  return 0;
}

static int check_purpose(const char *purpose) {
  if (!purpose || !purpose[0] || strlen(purpose) > PURPOSE_MAX)
    return hvd__err(HVD_E_INVALID, "auth: purpose must be 1 to %d characters", PURPOSE_MAX);
  return 0;
}

/* A message of the wrong kind, or not from hvd at all. */
static int check_magic(const uint8_t *msg, const uint8_t magic[4], const char *what) {
  if (memcmp(msg, magic, 4) == 0) return 0;
  return hvd__err(HVD_E_PROTOCOL,
                  "auth: expected a %s starting with \"%.4s\", got bytes %02x %02x %02x %02x "
                  "(not an hvd peer?)",
                  what, (const char *)magic, msg[0], msg[1], msg[2], msg[3]);
}

static int compute_mac(const hvd_secret *key, char role, const char *purpose,
                       const uint8_t first[HVD_NONCE_LEN],
                       const uint8_t second[HVD_NONCE_LEN], uint32_t id,
                       uint8_t out[HVD_MAC_LEN]) {
  uint8_t msg[1 + 4 + 4 + PURPOSE_MAX + 2 * HVD_NONCE_LEN + 4], *p = msg;
  size_t plen = strlen(purpose); /* <= PURPOSE_MAX: check_purpose */
  *p++ = (uint8_t)role;
  p = append_u32(p, AUTH_VERSION);
  p = append_u32(p, (uint32_t)plen);
  p = append(p, purpose, plen);
  p = append(p, first, HVD_NONCE_LEN);
  p = append(p, second, HVD_NONCE_LEN);
  p = append_u32(p, id);

  unsigned int out_len = 0;
  if (!HMAC(EVP_sha256(), key->bytes, HVD_SECRET_LEN, msg, (size_t)(p - msg), out, &out_len) ||
      out_len != HVD_MAC_LEN)
    return hvd__err(HVD_E_SYSTEM, "auth: HMAC-SHA256 failed in libcrypto");
  return 0;
}

/* Recomputes the MAC the other side should have sent and compares. */
static int check_mac(const hvd_secret *key, char role, const char *purpose,
                     const uint8_t first[HVD_NONCE_LEN], const uint8_t second[HVD_NONCE_LEN],
                     uint32_t id, const uint8_t got[HVD_MAC_LEN], const char *what) {
  uint8_t want[HVD_MAC_LEN];
  HVD__CHECK(compute_mac(key, role, purpose, first, second, id, want));
  if (CRYPTO_memcmp(want, got, HVD_MAC_LEN) != 0)
    return hvd__err(HVD_E_AUTH,
                    "auth: the peer's %s does not prove this job's secret key for \"%s\" "
                    "connections (a process of another job, or a stranger?)",
                    what, purpose);
  return 0;
}

/* ---- the secret ---- */

int hvd__secret_generate(hvd_secret *s) { return random_bytes(s->bytes, HVD_SECRET_LEN); }

int hvd__secret_derive(const hvd_secret *secret, const char *label, hvd_secret *out) {
  unsigned int out_len = 0;
  uint8_t mac[HVD_MAC_LEN];
  if (!HMAC(EVP_sha256(), secret->bytes, HVD_SECRET_LEN, (const unsigned char *)label,
            strlen(label), mac, &out_len) ||
      out_len != HVD_SECRET_LEN)
    return hvd__err(HVD_E_SYSTEM, "auth: HMAC-SHA256 failed in libcrypto");
  memcpy(out->bytes, mac, HVD_SECRET_LEN);
  return 0;
}

int hvd__secret_encode(const hvd_secret *s, char *out, size_t cap) {
  if (cap < HVD_SECRET_TEXT_MAX)
    return hvd__err(HVD_E_INVALID, "secret encode: need %d bytes of output, got %zu",
                    HVD_SECRET_TEXT_MAX, cap);
  EVP_EncodeBlock((unsigned char *)out, s->bytes, HVD_SECRET_LEN); /* NUL-terminates */
  return 0;
}

int hvd__secret_decode(const char *text, hvd_secret *s) {
  /* EVP_DecodeBlock skips blanks, keeps the padding as zero bytes and
   * accepts non-canonical trailing bits, so check the length first and,
   * after decoding, that encoding gives back exactly the text. */
  size_t len = text ? strlen(text) : 0;
  uint8_t raw[HVD_SECRET_LEN + 3];
  char again[HVD_SECRET_TEXT_MAX];
  if (len != HVD_SECRET_TEXT_MAX - 1)
    return hvd__err(HVD_E_ENV, "secret key: expected %d base64 characters (%d bytes), got %zu",
                    HVD_SECRET_TEXT_MAX - 1, HVD_SECRET_LEN, len);
  if (EVP_DecodeBlock(raw, (const unsigned char *)text, (int)len) != HVD_SECRET_LEN + 1)
    return hvd__err(HVD_E_ENV, "secret key: not valid base64");
  EVP_EncodeBlock((unsigned char *)again, raw, HVD_SECRET_LEN);
  if (memcmp(again, text, len) != 0)
    return hvd__err(HVD_E_ENV, "secret key: not the canonical base64 of %d bytes",
                    HVD_SECRET_LEN);
  memcpy(s->bytes, raw, HVD_SECRET_LEN);
  OPENSSL_cleanse(raw, sizeof raw);
  return 0;
}

/* ---- the handshake messages ---- */

int hvd__auth_challenge(hvd_auth_state *st, uint8_t out[HVD_AUTH_CHALLENGE_LEN]) {
  memset(st, 0, sizeof *st);
  HVD__CHECK(random_bytes(st->nonce_a, HVD_NONCE_LEN));
  memcpy(out, MAGIC_CHALLENGE, 4);
  hvd__le_store32(out + 4, AUTH_VERSION);
  memcpy(out + 8, st->nonce_a, HVD_NONCE_LEN);
  return 0;
}

int hvd__auth_respond(const hvd_secret *key, const char *purpose, uint32_t id_c,
                      const uint8_t challenge[HVD_AUTH_CHALLENGE_LEN], hvd_auth_state *st,
                      uint8_t out[HVD_AUTH_RESPONSE_LEN]) {
  HVD__CHECK(check_purpose(purpose));
  HVD__CHECK(check_magic(challenge, MAGIC_CHALLENGE, "challenge"));
  uint32_t version = hvd__le_load32(challenge + 4);
  if (version != AUTH_VERSION)
    return hvd__err(HVD_E_PROTOCOL,
                    "auth: the peer speaks handshake version %u, this hvd speaks %u "
                    "(mixed hvd versions in one job?)",
                    version, AUTH_VERSION);
  memset(st, 0, sizeof *st);
  memcpy(st->nonce_a, challenge + 8, HVD_NONCE_LEN);
  HVD__CHECK(random_bytes(st->nonce_c, HVD_NONCE_LEN));
  st->id_c = id_c;

  memcpy(out, MAGIC_RESPONSE, 4);
  hvd__le_store32(out + 4, id_c);
  memcpy(out + 8, st->nonce_c, HVD_NONCE_LEN);
  return compute_mac(key, 'C', purpose, st->nonce_a, st->nonce_c, id_c,
                     out + 8 + HVD_NONCE_LEN);
}

int hvd__auth_verify_response(const hvd_secret *key, const char *purpose, uint32_t id_a,
                              const uint8_t response[HVD_AUTH_RESPONSE_LEN],
                              hvd_auth_state *st, uint8_t out[HVD_AUTH_PROOF_LEN]) {
  HVD__CHECK(check_purpose(purpose));
  HVD__CHECK(check_magic(response, MAGIC_RESPONSE, "response"));
  uint32_t id_c = hvd__le_load32(response + 4);
  const uint8_t *nonce_c = response + 8;
  HVD__CHECK(check_mac(key, 'C', purpose, st->nonce_a, nonce_c, id_c,
                       response + 8 + HVD_NONCE_LEN, "response"));
  memcpy(st->nonce_c, nonce_c, HVD_NONCE_LEN);
  st->id_c = id_c;

  memcpy(out, MAGIC_PROOF, 4);
  hvd__le_store32(out + 4, id_a);
  return compute_mac(key, 'A', purpose, st->nonce_c, st->nonce_a, id_a, out + 8);
}

int hvd__auth_verify_proof(const hvd_secret *key, const char *purpose,
                           const uint8_t proof[HVD_AUTH_PROOF_LEN], const hvd_auth_state *st,
                           uint32_t *id_a) {
  HVD__CHECK(check_purpose(purpose));
  HVD__CHECK(check_magic(proof, MAGIC_PROOF, "proof"));
  uint32_t id = hvd__le_load32(proof + 4);
  HVD__CHECK(check_mac(key, 'A', purpose, st->nonce_c, st->nonce_a, id, proof + 8, "proof"));
  *id_a = id;
  return 0;
}

/* ---- blocking wrappers ---- */

int hvd__auth_connect(int fd, const hvd_secret *key, const char *purpose, uint32_t my_id,
                      uint64_t deadline, uint32_t *peer_id) {
  hvd_auth_state st;
  uint8_t challenge[HVD_AUTH_CHALLENGE_LEN], response[HVD_AUTH_RESPONSE_LEN],
      proof[HVD_AUTH_PROOF_LEN];
  HVD__CHECK(hvd__net_read_all(fd, challenge, sizeof challenge, deadline));
  HVD__CHECK(hvd__auth_respond(key, purpose, my_id, challenge, &st, response));
  HVD__CHECK(hvd__net_write_all(fd, response, sizeof response, deadline));
  int rc = hvd__net_read_all(fd, proof, sizeof proof, deadline);
  if (rc == HVD_E_PEER_LOST) /* what an acceptor does to a response it rejects */
    return hvd__err_prefix(rc, "auth: the peer hung up after our response (is its secret key "
                               "this job's?)");
  if (rc < 0) return rc;
  return hvd__auth_verify_proof(key, purpose, proof, &st, peer_id);
}

int hvd__auth_accept(int fd, const hvd_secret *key, const char *purpose, uint32_t my_id,
                     uint64_t deadline, uint32_t *peer_id) {
  hvd_auth_state st;
  uint8_t challenge[HVD_AUTH_CHALLENGE_LEN], response[HVD_AUTH_RESPONSE_LEN],
      proof[HVD_AUTH_PROOF_LEN];
  HVD__CHECK(check_purpose(purpose));
  HVD__CHECK(hvd__auth_challenge(&st, challenge));
  HVD__CHECK(hvd__net_write_all(fd, challenge, sizeof challenge, deadline));
  HVD__CHECK(hvd__net_read_all(fd, response, sizeof response, deadline));
  HVD__CHECK(hvd__auth_verify_response(key, purpose, my_id, response, &st, proof));
  HVD__CHECK(hvd__net_write_all(fd, proof, sizeof proof, deadline));
  *peer_id = st.id_c;
  return 0;
}
