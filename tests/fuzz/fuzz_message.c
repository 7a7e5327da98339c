/*
 * fuzz_message.c -- the engine's negotiation message (engine/message.h),
 * which every rank decodes from every other rank each cycle.
 *
 * Input: two bytes giving the cache capacity (max_bits), then the
 * message.  Properties:
 *   - a message that decodes re-encodes to the very same bytes (one
 *     message, one encoding), with no more cache bits than the capacity,
 *     and every request passes the checks the engine relies on;
 *   - one that does not decode leaves a message and an empty hvd_msg;
 *   - nothing is allocated in proportion to a count the bytes cannot
 *     back (libFuzzer's -malloc_limit_mb catches it).
 */
#include "engine/message.h"
#include "fuzz.h"
#include "reduce.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, size};
  uint32_t max_bits = fuzz_take_u8(&in);
  max_bits |= (uint32_t)fuzz_take_u8(&in) << 8;
  hvd_msg m;
  int rc = hvd__msg_decode(in.p, in.n, max_bits, &m);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    FUZZ_CHECK(!m.bits && !m.reqs && !m.fails && !m.nreq && !m.nfail && !m.nbits);
    return 0;
  }
  FUZZ_CHECK(m.nbits <= max_bits);
  for (uint32_t i = 0; i < m.nreq; i++) {
    const hvd_request *q = &m.reqs[i];
    FUZZ_CHECK(q->type < HVD_REQ__COUNT && hvd__dtype_valid(q->dtype) && hvd__op_valid(q->op));
    FUZZ_CHECK(q->ndims <= HVD_MAX_DIMS);
    FUZZ_CHECK(strnlen(q->name, HVD_NAME_MAX) < HVD_NAME_MAX && q->name[0]);
  }
  uint8_t *again = NULL;
  size_t len = 0;
  FUZZ_CHECK(hvd__msg_encode(&m, &again, &len) == 0);
  FUZZ_CHECK(len == in.n && memcmp(again, in.p, len) == 0);
  free(again);
  hvd__msg_free(&m);
  return 0;
}
