/*
 * test_auth.c -- the job secret and the HMAC handshake (auth.h).
 *
 * The message functions are pure, so most tests play both sides in one
 * thread and then break one thing: the key, a byte of a message, the
 * nonce (replay), the purpose.  The blocking wrappers run over a
 * socketpair() with the acceptor in a second thread.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "wire/auth.h"

static hvd_secret key_a, key_b;

static int setup(void **state) {
  (void)state;
  if (hvd__secret_generate(&key_a) < 0 || hvd__secret_generate(&key_b) < 0) return -1;
  return 0;
}

/* A full exchange of messages; each side may use its own key and
 * purpose.  Returns the first failure, with *who naming the side that saw
 * it ('A' acceptor, 'C' connector). */
typedef struct {
  const hvd_secret *key_c, *key_a;
  const char *purpose_c, *purpose_a;
  uint32_t id_c, id_a;
} exchange;

static int run_exchange(const exchange *x, char *who, uint32_t *got_c, uint32_t *got_a) {
  hvd_auth_state sa, sc;
  uint8_t challenge[HVD_AUTH_CHALLENGE_LEN], response[HVD_AUTH_RESPONSE_LEN],
      proof[HVD_AUTH_PROOF_LEN];
  int rc;
  *who = 'A';
  if ((rc = hvd__auth_challenge(&sa, challenge)) < 0) return rc;
  *who = 'C';
  if ((rc = hvd__auth_respond(x->key_c, x->purpose_c, x->id_c, challenge, &sc, response)) < 0)
    return rc;
  *who = 'A';
  if ((rc = hvd__auth_verify_response(x->key_a, x->purpose_a, x->id_a, response, &sa, proof)) <
      0)
    return rc;
  *got_c = sa.id_c;
  *who = 'C';
  return hvd__auth_verify_proof(x->key_c, x->purpose_c, proof, &sc, got_a);
}

/* ---- the secret ---- */

static void test_secret_round_trip(void **state) {
  (void)state;
  char text[HVD_SECRET_TEXT_MAX];
  hvd_secret back;
  assert_int_equal(hvd__secret_encode(&key_a, text, sizeof text), 0);
  assert_int_equal(strlen(text), 44);
  assert_int_equal(hvd__secret_decode(text, &back), 0);
  assert_memory_equal(back.bytes, key_a.bytes, HVD_SECRET_LEN);
  assert_memory_not_equal(key_a.bytes, key_b.bytes, HVD_SECRET_LEN);
  assert_int_equal(hvd__secret_encode(&key_a, text, sizeof text - 1), HVD_E_INVALID);
}

static void expect_bad_secret(const char *text) {
  hvd_secret s;
  memset(&s, 0x5a, sizeof s);
  assert_int_equal(hvd__secret_decode(text, &s), HVD_E_ENV);
  for (int i = 0; i < HVD_SECRET_LEN; i++) assert_int_equal(s.bytes[i], 0x5a); /* untouched */
}

static void test_secret_rejects(void **state) {
  (void)state;
  char good[HVD_SECRET_TEXT_MAX], bad[2 * HVD_SECRET_TEXT_MAX];
  assert_int_equal(hvd__secret_encode(&key_a, good, sizeof good), 0);
  expect_bad_secret("");
  expect_bad_secret("c2VjcmV0");           /* valid base64, 6 bytes */
  snprintf(bad, sizeof bad, "%.43s", good); /* one character short */
  expect_bad_secret(bad);
  snprintf(bad, sizeof bad, "%sA", good); /* one too many */
  expect_bad_secret(bad);
  snprintf(bad, sizeof bad, "%s\n", good); /* a trailing newline from `echo` */
  expect_bad_secret(bad);
  snprintf(bad, sizeof bad, " %.43s", good); /* leading blank, right length */
  expect_bad_secret(bad);
  memcpy(bad, good, sizeof good);
  bad[10] = '!'; /* not in the alphabet */
  expect_bad_secret(bad);
  memcpy(bad, good, sizeof good);
  bad[42] = '='; /* "==" ends 31 bytes, not 32 */
  expect_bad_secret(bad);
  /* The last character before '=' carries 4 bits of data and 2 that must
   * be zero: flipping a padding bit keeps the length but is not canonical. */
  memcpy(bad, good, sizeof good);
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const char *pos = strchr(alphabet, bad[42]);
  assert_non_null(pos);
  bad[42] = alphabet[(pos - alphabet) ^ 1];
  expect_bad_secret(bad);
}

/* ---- the messages ---- */

static void test_handshake_ok(void **state) {
  (void)state;
  exchange x = {&key_a, &key_a, "data", "data", 5, 2};
  uint32_t got_c = 0, got_a = 0;
  char who;
  assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), 0);
  assert_int_equal(got_c, 5);
  assert_int_equal(got_a, 2);
  x.id_c = 0xFFFFFFFFu; /* the rendezvous server's id is a legal id too */
  assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), 0);
  assert_int_equal(got_c, 0xFFFFFFFFu);
}

static void test_wrong_key(void **state) {
  (void)state;
  uint32_t got_c, got_a;
  char who;
  /* Either side with another key: the acceptor, which checks first, says so. */
  exchange x = {&key_b, &key_a, "data", "data", 1, 0};
  assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), HVD_E_AUTH);
  assert_int_equal(who, 'A');
  assert_non_null(strstr(hvd_last_error(), "secret key"));
  x = (exchange){&key_a, &key_b, "data", "data", 1, 0};
  assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), HVD_E_AUTH);
  assert_int_equal(who, 'A');

  /* An acceptor that got past that with a key the connector does not
   * share (an impostor that knows some other job's key) fails the proof. */
  hvd_auth_state sa, sc;
  uint8_t ch[HVD_AUTH_CHALLENGE_LEN], resp[HVD_AUTH_RESPONSE_LEN], proof[HVD_AUTH_PROOF_LEN];
  assert_int_equal(hvd__auth_challenge(&sa, ch), 0);
  assert_int_equal(hvd__auth_respond(&key_a, "data", 1, ch, &sc, resp), 0);
  assert_int_equal(hvd__auth_verify_response(&key_a, "data", 0, resp, &sa, proof), 0);
  assert_int_equal(hvd__auth_verify_proof(&key_b, "data", proof, &sc, &got_a), HVD_E_AUTH);
}

static void test_tampered(void **state) {
  (void)state;
  hvd_auth_state sa, sc, sa_copy;
  uint8_t ch[HVD_AUTH_CHALLENGE_LEN], resp[HVD_AUTH_RESPONSE_LEN], proof[HVD_AUTH_PROOF_LEN];
  uint32_t id;
  assert_int_equal(hvd__auth_challenge(&sa, ch), 0);
  assert_int_equal(hvd__auth_respond(&key_a, "data", 3, ch, &sc, resp), 0);
  sa_copy = sa;

  /* Any changed bit of the response: bad magic (PROTOCOL) or bad MAC (AUTH),
   * and never a proof. */
  for (size_t i = 0; i < sizeof resp; i++) {
    for (int bit = 0; bit < 8; bit += 3) {
      resp[i] ^= (uint8_t)(1u << bit);
      sa = sa_copy;
      int rc = hvd__auth_verify_response(&key_a, "data", 0, resp, &sa, proof);
      assert_true(i < 4 ? rc == HVD_E_PROTOCOL : rc == HVD_E_AUTH);
      resp[i] ^= (uint8_t)(1u << bit);
    }
  }
  sa = sa_copy;
  assert_int_equal(hvd__auth_verify_response(&key_a, "data", 0, resp, &sa, proof), 0);

  for (size_t i = 0; i < sizeof proof; i++) {
    proof[i] ^= 0x10;
    int rc = hvd__auth_verify_proof(&key_a, "data", proof, &sc, &id);
    assert_true(i < 4 ? rc == HVD_E_PROTOCOL : rc == HVD_E_AUTH);
    proof[i] ^= 0x10;
  }
  assert_int_equal(hvd__auth_verify_proof(&key_a, "data", proof, &sc, &id), 0);
  assert_int_equal(id, 0);
}

static void test_replay(void **state) {
  (void)state;
  hvd_auth_state sa, sc;
  uint8_t ch[HVD_AUTH_CHALLENGE_LEN], resp[HVD_AUTH_RESPONSE_LEN], proof[HVD_AUTH_PROOF_LEN];
  uint32_t id;
  assert_int_equal(hvd__auth_challenge(&sa, ch), 0);
  assert_int_equal(hvd__auth_respond(&key_a, "data", 1, ch, &sc, resp), 0);
  assert_int_equal(hvd__auth_verify_response(&key_a, "data", 0, resp, &sa, proof), 0);

  /* The same response, recorded, answers a new challenge: rejected. */
  hvd_auth_state sa2;
  uint8_t ch2[HVD_AUTH_CHALLENGE_LEN];
  assert_int_equal(hvd__auth_challenge(&sa2, ch2), 0);
  assert_memory_not_equal(ch + 8, ch2 + 8, HVD_NONCE_LEN);
  assert_int_equal(hvd__auth_verify_response(&key_a, "data", 0, resp, &sa2, proof), HVD_E_AUTH);

  /* A recorded proof shown to a connector with a fresh nonce: rejected. */
  uint8_t old_proof[HVD_AUTH_PROOF_LEN], resp2[HVD_AUTH_RESPONSE_LEN];
  hvd_auth_state sc2;
  assert_int_equal(hvd__auth_verify_response(&key_a, "data", 0, resp, &sa, old_proof), 0);
  assert_int_equal(hvd__auth_respond(&key_a, "data", 1, ch, &sc2, resp2), 0);
  assert_int_equal(hvd__auth_verify_proof(&key_a, "data", old_proof, &sc2, &id), HVD_E_AUTH);

  /* The connector's own MAC reflected back as a proof: rejected (role). */
  uint8_t reflected[HVD_AUTH_PROOF_LEN];
  memcpy(reflected, "HVDP", 4);
  memcpy(reflected + 4, resp + 4, 4);
  memcpy(reflected + 8, resp + 8 + HVD_NONCE_LEN, HVD_MAC_LEN);
  assert_int_equal(hvd__auth_verify_proof(&key_a, "data", reflected, &sc, &id), HVD_E_AUTH);
}

static void test_purpose(void **state) {
  (void)state;
  uint32_t got_c, got_a;
  char who;
  exchange x = {&key_a, &key_a, "rdzv", "data", 1, 0};
  assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), HVD_E_AUTH);
  assert_int_equal(who, 'A');
  /* A prefix of the other purpose is a different purpose too. */
  x = (exchange){&key_a, &key_a, "dat", "data", 1, 0};
  assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), HVD_E_AUTH);

  char long_purpose[100];
  memset(long_purpose, 'p', sizeof long_purpose - 1);
  long_purpose[sizeof long_purpose - 1] = '\0';
  const char *bad[] = {NULL, "", long_purpose};
  for (size_t i = 0; i < HVD__ARRAY_LEN(bad); i++) {
    x = (exchange){&key_a, &key_a, bad[i], "data", 1, 0};
    assert_int_equal(run_exchange(&x, &who, &got_c, &got_a), HVD_E_INVALID);
  }
}

static void test_bad_challenge(void **state) {
  (void)state;
  hvd_auth_state sa, sc;
  uint8_t ch[HVD_AUTH_CHALLENGE_LEN], resp[HVD_AUTH_RESPONSE_LEN];
  assert_int_equal(hvd__auth_challenge(&sa, ch), 0);
  assert_memory_equal(ch, "HVDC", 4);
  ch[4] ^= 0x02; /* another version */
  assert_int_equal(hvd__auth_respond(&key_a, "data", 1, ch, &sc, resp), HVD_E_PROTOCOL);
  assert_non_null(strstr(hvd_last_error(), "version"));
  ch[4] ^= 0x02;
  memcpy(ch, "GET ", 4); /* someone speaking HTTP at us */
  assert_int_equal(hvd__auth_respond(&key_a, "data", 1, ch, &sc, resp), HVD_E_PROTOCOL);
  /* Each message kind has its own magic: a response is not a challenge. */
  memcpy(ch, "HVDR", 4);
  assert_int_equal(hvd__auth_respond(&key_a, "data", 1, ch, &sc, resp), HVD_E_PROTOCOL);
}

/* ---- the blocking wrappers over a socketpair ---- */

typedef struct {
  int fd;
  const hvd_secret *key;
  int delay_ms; /* >= 0: say nothing for this long, then hang up */
  int rc;
  uint32_t peer;
} acceptor_arg;

static void *acceptor_main(void *p) {
  acceptor_arg *a = p;
  if (a->delay_ms >= 0)
    usleep((useconds_t)a->delay_ms * 1000);
  else
    a->rc = hvd__auth_accept(a->fd, a->key, "data", 0, hvd__deadline_in(5000), &a->peer);
  close(a->fd); /* as an acceptor does with a connection it rejects */
  return NULL;
}

/* Connector in this thread, acceptor in another. */
static int wrapped(const hvd_secret *key_c, acceptor_arg *a, int deadline_ms, uint32_t *peer) {
  int sv[2];
  pthread_t th;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  a->fd = sv[1];
  assert_int_equal(pthread_create(&th, NULL, acceptor_main, a), 0);
  int rc = hvd__auth_connect(sv[0], key_c, "data", 7, hvd__deadline_in(deadline_ms), peer);
  assert_int_equal(pthread_join(th, NULL), 0);
  close(sv[0]);
  return rc;
}

static void test_wrappers(void **state) {
  (void)state;
  uint32_t peer = 99;
  acceptor_arg a = {.key = &key_a, .delay_ms = -1};
  assert_int_equal(wrapped(&key_a, &a, 5000, &peer), 0);
  assert_int_equal(a.rc, 0);
  assert_int_equal(a.peer, 7);
  assert_int_equal(peer, 0);

  /* Wrong key: the acceptor says HVD_E_AUTH; the connector sees it hang up. */
  a = (acceptor_arg){.key = &key_b, .delay_ms = -1};
  int rc = wrapped(&key_a, &a, 5000, &peer);
  assert_int_equal(a.rc, HVD_E_AUTH);
  assert_int_equal(rc, HVD_E_PEER_LOST);
  assert_non_null(strstr(hvd_last_error(), "hung up after our response"));

  /* A silent acceptor: the connector gives up at its deadline. */
  a = (acceptor_arg){.key = &key_a, .delay_ms = 600};
  uint64_t start = hvd__now_ms();
  rc = wrapped(&key_a, &a, 200, &peer);
  assert_int_equal(rc, HVD_E_TIMEOUT);
  assert_true(hvd__now_ms() - start < 2000);
  assert_non_null(strstr(hvd_last_error(), "timed out"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_secret_round_trip), cmocka_unit_test(test_secret_rejects),
      cmocka_unit_test(test_handshake_ok),      cmocka_unit_test(test_wrong_key),
      cmocka_unit_test(test_tampered),          cmocka_unit_test(test_replay),
      cmocka_unit_test(test_purpose),           cmocka_unit_test(test_bad_challenge),
      cmocka_unit_test(test_wrappers),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
