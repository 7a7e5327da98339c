/*
 * message.h -- the one message each rank contributes to a negotiation cycle.
 *
 * Every cycle each rank's engine sends what changed since the last one:
 *   flags      HVD_MSG_SHUTDOWN (this rank is shutting down),
 *              HVD_MSG_JOINED (this rank called hvd_join),
 *              HVD_MSG_JOIN_STALLED (rank 0 only: the ranks in hvd_join
 *              waited past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; every
 *              rank gives up in this cycle),
 *              HVD_MSG_BLOCKED (every thread of this rank that could still
 *              submit waits on hvd: engine/waits.h; in full exchanges),
 *              HVD_MSG_DESYNC (rank 0 only: a certain deadlock lasted
 *              HOROVOD_DESYNC_TIMEOUT_SECONDS; every rank that still finds
 *              it in this cycle's messages gives up: desync.c)
 *   cache bits one bit per response-cache entry this rank has newly
 *              enqueued with exactly the cached parameters: the cheap path
 *              for tensors seen before (Horovod's response cache)
 *   requests   full requests for everything else
 *   failures   (rank 0 only) names the stall inspector gave up on, so every
 *              rank fails them in the same cycle
 *   settings   (rank 0 only, HVD_MSG_SETTINGS) the autotuner's next fusion
 *              threshold, cycle time, response cache and hierarchical
 *              switch, which every rank applies in this cycle
 * The messages are allgathered and every rank runs the same deterministic
 * decision over them, so all ranks agree on what runs and in which order.
 *
 * Wire format (little-endian, frame.h's writer/reader):
 *   u32 flags, u32 nbits, ceil(nbits/8) bytes,
 *   u32 nreq, nreq x request, u32 nfail, nfail x str,
 *   with HVD_MSG_SETTINGS: u64 fusion threshold (bytes), u64 cycle time
 *   (ms, IEEE bits), u8 cache on, u8 hierarchical
 *   request: str name, u8 type, u8 dtype, u8 op, u32 root (as int32),
 *            u64 count, u8 ndims, ndims x u64 (the shape, as int64),
 *            u64 prescale (IEEE bits), u64 postscale,
 *            u32 process_set (as int32), u32 group_size, u32 group_index,
 *            u8 on_device (0 host memory, 1 device memory; 0 for
 *            barrier and process sets)
 * Decoding validates every field (enum ranges, name length and no NUL,
 * a shape of the count for the collectives that have one and none for the
 * others, device memory only for the collectives that move tensors, nbits <= the cache capacity, counts bounded by the bytes
 * present, settings in range, no trailing bytes) and fails with
 * HVD_E_PROTOCOL naming the first bad one.
 */
#ifndef HVD_MESSAGE_H
#define HVD_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

#include "request.h"

enum {
  HVD_MSG_SHUTDOWN = 1u << 0,
  HVD_MSG_JOINED = 1u << 1,
  HVD_MSG_SETTINGS = 1u << 2,
  HVD_MSG_JOIN_STALLED = 1u << 3,
  HVD_MSG_BLOCKED = 1u << 4,
  HVD_MSG_DESYNC = 1u << 5
};

/* The autotuner's settings (HVD_MSG_SETTINGS). */
typedef struct {
  uint64_t fusion_bytes; /* at most HVD_MSG_FUSION_MAX */
  double cycle_ms;       /* finite, 0 to HVD_MSG_CYCLE_MAX_MS */
  uint8_t cache_on, hierarchical; /* 0 or 1 */
} hvd_msg_settings;

#define HVD_MSG_FUSION_MAX (1ull << 40)
#define HVD_MSG_CYCLE_MAX_MS 10000.0

typedef struct {
  uint32_t flags;
  uint32_t nbits;     /* bits[] has (nbits + 7) / 8 bytes */
  uint8_t *bits;
  uint32_t nreq;
  hvd_request *reqs;
  uint32_t nfail;
  char (*fails)[HVD_NAME_MAX];
  hvd_msg_settings settings; /* with HVD_MSG_SETTINGS */
} hvd_msg;

/* Encodes into a malloc()ed buffer. */
int hvd__msg_encode(const hvd_msg *m, uint8_t **buf, size_t *len);

/* Decodes into m, whose arrays are malloc()ed (free with hvd__msg_free).
 * max_bits: the cache capacity; a message with more bits is refused. */
int hvd__msg_decode(const uint8_t *buf, size_t len, uint32_t max_bits, hvd_msg *m);

void hvd__msg_free(hvd_msg *m);

/* Bit helpers over m->bits. */
int hvd__msg_bit(const hvd_msg *m, uint32_t i);
/* Sets bit i, growing bits/nbits as needed (i < max). */
int hvd__msg_set_bit(hvd_msg *m, uint32_t i);

#endif /* HVD_MESSAGE_H */
