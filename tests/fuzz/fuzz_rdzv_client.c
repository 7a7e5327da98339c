/*
 * fuzz_rdzv_client.c -- the rendezvous messages (rdzv/rdzv.h and
 * rdzv_elastic.h): the payload decoders (REGISTER, TABLE, ERROR; an
 * elastic job's JOIN, PLACE, NOTICE), the client a rank runs in hvd_init
 * reading hvdrun's reply from a socket, and an elastic worker's reader of
 * NOTICEs.
 *
 * Input: a byte choosing the case, a byte giving the job size (1..8),
 * then the payload (or, for the client, the whole reply stream: frame
 * header and payload).  Properties:
 *   - what decodes re-encodes to the very same bytes (REGISTER, TABLE,
 *     JOIN, PLACE, NOTICE), and every entry it yields passes the encoder's
 *     own checks;
 *   - an ERROR's reason comes out NUL-terminated and printable;
 *   - the client ends with the table or an error, never waits, and the
 *     table it returns lists this rank where it registered;
 *   - the NOTICE reader takes any stream without waiting, closes one it
 *     cannot read, and never holds more than one frame.
 */
#include "rdzv/rdzv.h"
#include "rdzv/rdzv_elastic.h"
#include "fuzz.h"

#define SIZE_MAX_FUZZ 8

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  return 0;
}

/* What an encoder wrote back (len bytes or an error) is the input. */
static void check_same(int len, const uint8_t *again, const fuzz_input *in) {
  FUZZ_CHECK(len >= 0 && (size_t)len == in->n && memcmp(again, in->p, in->n) == 0);
}

static void decode_register(const fuzz_input *in) {
  hvd_rdzv_entry e;
  uint8_t again[HVD_RDZV_REGISTER_MAX];
  int rc = hvd__rdzv_decode_register(in->p, in->n, &e);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  int len = hvd__rdzv_encode_register(&e, again, sizeof again);
  check_same(len, again, in);
}

static void decode_table(const fuzz_input *in, uint32_t size) {
  hvd_rdzv_entry t[SIZE_MAX_FUZZ];
  uint8_t again[4 + SIZE_MAX_FUZZ * HVD_RDZV_BODY_MAX];
  int rc = hvd__rdzv_decode_table(in->p, in->n, size, t);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  int len = hvd__rdzv_encode_table(t, size, again, sizeof again);
  check_same(len, again, in);
}

static void decode_error(const fuzz_input *in) {
  char reason[512];
  int rc = hvd__rdzv_decode_error(in->p, in->n, reason, sizeof reason);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  size_t n = strnlen(reason, sizeof reason);
  FUZZ_CHECK(n < sizeof reason);
  for (size_t i = 0; i < n; i++)
    FUZZ_CHECK((unsigned char)reason[i] >= 0x20 && reason[i] != 0x7f);
}

static void decode_join(const fuzz_input *in) {
  hvd_rdzv_entry e;
  uint32_t worker = 0;
  uint8_t again[HVD_RDZV_JOIN_MAX];
  int rc = hvd__rdzv_decode_join(in->p, in->n, &worker, &e);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  int len = hvd__rdzv_encode_join(worker, &e, again, sizeof again);
  check_same(len, again, in);
}

static void decode_place(const fuzz_input *in) {
  hvd_rdzv_place p;
  hvd_rdzv_entry *t = NULL;
  int rc = hvd__rdzv_decode_place(in->p, in->n, &p, &t);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    FUZZ_CHECK(t == NULL);
    return;
  }
  uint8_t *again = malloc(in->n);
  FUZZ_CHECK(again != NULL);
  int len = hvd__rdzv_encode_place(&p, t, again, in->n);
  check_same(len, again, in);
  free(again);
  free(t);
}

static void decode_notice(const fuzz_input *in) {
  hvd_rdzv_notice n;
  uint8_t again[HVD_RDZV_NOTICE_LEN];
  int rc = hvd__rdzv_decode_notice(in->p, in->n, &n);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return;
  }
  int len = hvd__rdzv_encode_notice(&n, again, sizeof again);
  check_same(len, again, in);
}

/* A placed worker reads the input as what hvdrun sent after PLACE. */
static void notices(const fuzz_input *in) {
  int fds[2];
  hvd_rdzv_notices n;
  fuzz_socketpair(fds);
  fuzz_peer_says(fds[1], in->p, in->n);
  hvd__rdzv_notices_init(&n, fds[0]);
  int rc = 0;
  for (int i = 0; i < 4 && rc == 0 && n.fd >= 0; i++) rc = hvd__rdzv_notices_poll(&n);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    FUZZ_CHECK(n.fd < 0); /* a stream it cannot read is closed */
  }
  FUZZ_CHECK(n.len <= sizeof n.buf);
  FUZZ_CHECK(n.last.added <= 1 && n.last.removed <= 1);
  hvd__rdzv_notices_close(&n);
  close(fds[1]);
}

/* Rank 0 of `size` registers and reads the input as hvdrun's reply. */
static void client(const fuzz_input *in, uint32_t size) {
  hvd_rdzv_entry me, t[SIZE_MAX_FUZZ];
  memset(&me, 0, sizeof me);
  me.size = size;
  snprintf(me.hostname, sizeof me.hostname, "h0");
  snprintf(me.host_id, sizeof me.host_id, "h0/boot");
  snprintf(me.iface, sizeof me.iface, "lo");
  snprintf(me.listen.addr, sizeof me.listen.addr, "127.0.0.1");
  me.listen.port = 4000;
  me.local_size = 1;
  int fds[2];
  fuzz_socketpair(fds);
  fuzz_peer_says(fds[1], in->p, in->n);
  int rc = hvd__rdzv_register(fds[0], &me, hvd__deadline_in(5000), t);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
  } else {
    FUZZ_CHECK(t[0].listen.port == me.listen.port);
    FUZZ_CHECK(strcmp(t[0].listen.addr, me.listen.addr) == 0);
  }
  close(fds[0]);
  close(fds[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, size};
  uint8_t which = fuzz_take_u8(&in);
  uint32_t job = 1 + fuzz_take_u8(&in) % SIZE_MAX_FUZZ;
  switch (which % 8) {
    case 0: decode_register(&in); break;
    case 1: decode_table(&in, job); break;
    case 2: decode_error(&in); break;
    case 3: client(&in, job); break;
    case 4: decode_join(&in); break;
    case 5: decode_place(&in); break;
    case 6: decode_notice(&in); break;
    default: notices(&in); break;
  }
  return 0;
}
