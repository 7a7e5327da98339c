/*
 * auth.h -- proving, on every connection, that both ends belong to the job.
 *
 * hvdrun makes a random 32-byte secret per job and hands it to the ranks in
 * _HOROVOD_SECRET_KEY (base64, as Horovod does).  The secret never crosses
 * the wire.  Instead a mutual HMAC-SHA256 challenge:
 *
 *   acceptor  -> connector   CHALLENGE  magic, version, nonce_a
 *   connector -> acceptor    RESPONSE   magic, id_c, nonce_c,
 *                                       mac("C", purpose, nonce_a, nonce_c, id_c)
 *   acceptor  -> connector   PROOF      magic, id_a,
 *                                       mac("A", purpose, nonce_c, nonce_a, id_a)
 *
 * Fresh nonces on both sides stop replay; `purpose` ("rdzv", "data") keeps a
 * message made for one kind of connection from being accepted by another;
 * ids (ranks) are covered by the MAC so a peer cannot claim another rank.
 *
 * The message functions are pure (no I/O) so that an event loop (hvdrun's
 * rendezvous server, the transport's accept loop) can run many handshakes at
 * once; hvd__auth_connect/accept are blocking wrappers for the simple case.
 */
#ifndef HVD_AUTH_H
#define HVD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define HVD_SECRET_LEN 32
#define HVD_NONCE_LEN 32
#define HVD_MAC_LEN 32
#define HVD_SECRET_TEXT_MAX 45 /* base64 of a secret (44 characters) and its NUL */

#define HVD_AUTH_CHALLENGE_LEN (4 + 4 + HVD_NONCE_LEN)               /* 40 */
#define HVD_AUTH_RESPONSE_LEN (4 + 4 + HVD_NONCE_LEN + HVD_MAC_LEN)  /* 72 */
#define HVD_AUTH_PROOF_LEN (4 + 4 + HVD_MAC_LEN)                     /* 40 */

typedef struct {
  uint8_t bytes[HVD_SECRET_LEN];
} hvd_secret;

/* State one side keeps between messages. */
typedef struct {
  uint8_t nonce_a[HVD_NONCE_LEN];
  uint8_t nonce_c[HVD_NONCE_LEN];
  uint32_t id_c; /* the connector's id, known after the response */
} hvd_auth_state;

/* A fresh random secret (getrandom). */
int hvd__secret_generate(hvd_secret *s);

/* HMAC-SHA256(secret, label): a key for one use of the secret (one SLURM
 * step, say), from which the secret cannot be recovered. */
int hvd__secret_derive(const hvd_secret *secret, const char *label, hvd_secret *out);
/* Base64 text <-> secret.  Encoding needs cap >= HVD_SECRET_TEXT_MAX
 * (else HVD_E_INVALID) and writes 44 characters and a NUL.  Decoding rejects anything that is not exactly
 * HVD_SECRET_LEN bytes of valid base64 with HVD_E_ENV. */
int hvd__secret_encode(const hvd_secret *s, char *out, size_t cap);
int hvd__secret_decode(const char *text, hvd_secret *s);

/* Acceptor: make the challenge (fills st->nonce_a). */
int hvd__auth_challenge(hvd_auth_state *st, uint8_t out[HVD_AUTH_CHALLENGE_LEN]);
/* Connector: answer a challenge as id_c.  Fills st (nonce_a, nonce_c, id_c).
 * HVD_E_PROTOCOL on a malformed challenge. */
int hvd__auth_respond(const hvd_secret *key, const char *purpose, uint32_t id_c,
                      const uint8_t challenge[HVD_AUTH_CHALLENGE_LEN], hvd_auth_state *st,
                      uint8_t out[HVD_AUTH_RESPONSE_LEN]);
/* Acceptor: check the response (HVD_E_AUTH on a bad MAC, HVD_E_PROTOCOL on
 * bad framing), then make the proof as id_a.  On success st->id_c is the
 * connector's proven id. */
int hvd__auth_verify_response(const hvd_secret *key, const char *purpose, uint32_t id_a,
                              const uint8_t response[HVD_AUTH_RESPONSE_LEN],
                              hvd_auth_state *st, uint8_t out[HVD_AUTH_PROOF_LEN]);
/* Connector: check the acceptor's proof; *id_a receives its proven id. */
int hvd__auth_verify_proof(const hvd_secret *key, const char *purpose,
                           const uint8_t proof[HVD_AUTH_PROOF_LEN], const hvd_auth_state *st,
                           uint32_t *id_a);

/* Blocking wrappers over a connected socket. */
int hvd__auth_connect(int fd, const hvd_secret *key, const char *purpose, uint32_t my_id,
                      uint64_t deadline, uint32_t *peer_id);
int hvd__auth_accept(int fd, const hvd_secret *key, const char *purpose, uint32_t my_id,
                     uint64_t deadline, uint32_t *peer_id);

#endif /* HVD_AUTH_H */
