/*
 * rdzv_elastic.h -- the rendezvous of an elastic job (hvdrun's elastic
 * driver and its workers).
 *
 * A worker of an elastic job does not know its rank: hvdrun gives it one
 * per job (generation).  It connects and authenticates as in rdzv.h with
 * its worker id (HOROVOD_ELASTIC_WORKER_ID) as the connector id, then:
 *
 *   JOIN    worker -> hvdrun:  u32 worker id, then an entry's body (rdzv.h)
 *           whose local rank and size mean nothing yet (0 and 1)
 *   PLACE   hvdrun -> worker, once the job is formed:
 *             u32 generation, u32 rank, u32 size, u32 cross rank,
 *             u32 cross size, then a TABLE payload (rdzv.h) of `size`
 *             entries whose local ranks and sizes are the job's
 *   ERROR   hvdrun -> worker instead: str reason (not wanted, job over)
 *   NOTICE  hvdrun -> worker, any time after PLACE, while the connection
 *           stays open: u64 stamp, u8 added, u8 removed -- hosts changed;
 *           stamps grow
 *
 * The connection stays open after PLACE as the channel of NOTICEs, until
 * the worker leaves the job (hvd_shutdown, or the next join).
 */
#ifndef HVD_RDZV_ELASTIC_H
#define HVD_RDZV_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv.h"

/* The largest JOIN payload; PLACE is bounded by HVD_FRAME_CONTROL_MAX. */
#define HVD_RDZV_JOIN_MAX (4 + HVD_RDZV_BODY_MAX)
#define HVD_RDZV_NOTICE_LEN (8 + 1 + 1)

typedef struct {
  uint32_t generation, rank, size, cross_rank, cross_size;
} hvd_rdzv_place;

typedef struct {
  uint64_t stamp;
  uint8_t added, removed;
} hvd_rdzv_notice;

/* Codecs: encoders return the length or a negative HVD_E_*; decoders
 * validate every field (HVD_E_PROTOCOL naming the bad one).  The PLACE
 * decoder allocates *table (place->size entries). */
int hvd__rdzv_encode_join(uint32_t worker, const hvd_rdzv_entry *e, uint8_t *buf, size_t cap);
int hvd__rdzv_decode_join(const uint8_t *buf, size_t len, uint32_t *worker, hvd_rdzv_entry *e);
int hvd__rdzv_encode_place(const hvd_rdzv_place *p, const hvd_rdzv_entry *table, uint8_t *buf,
                           size_t cap);
int hvd__rdzv_decode_place(const uint8_t *buf, size_t len, hvd_rdzv_place *p,
                           hvd_rdzv_entry **table);
int hvd__rdzv_encode_notice(const hvd_rdzv_notice *n, uint8_t *buf, size_t cap);
int hvd__rdzv_decode_notice(const uint8_t *buf, size_t len, hvd_rdzv_notice *n);

/* Client: sends JOIN on an authenticated connection (hvd__rdzv_connect
 * with the worker id) and waits for PLACE (the table in *table, to free)
 * or ERROR (HVD_E_ENV with hvdrun's reason). */
int hvd__rdzv_join(int fd, uint32_t worker, const hvd_rdzv_entry *me, uint64_t deadline,
                   hvd_rdzv_place *place, hvd_rdzv_entry **table);

/* The NOTICEs that arrived on the connection after PLACE, read without
 * waiting.  Bytes of a frame not yet complete stay in the reader. */
typedef struct {
  int fd; /* -1 once closed */
  uint8_t buf[HVD_FRAME_HDR_LEN + HVD_RDZV_NOTICE_LEN];
  size_t len;
  hvd_rdzv_notice last; /* the newest notice */
  int added, removed;   /* any notice said so */
} hvd_rdzv_notices;

void hvd__rdzv_notices_init(hvd_rdzv_notices *n, int fd);
/* Reads what is there.  0, or HVD_E_PROTOCOL for anything but NOTICEs
 * (the channel is then closed; so it is when hvdrun closes it). */
int hvd__rdzv_notices_poll(hvd_rdzv_notices *n);
void hvd__rdzv_notices_close(hvd_rdzv_notices *n);

#endif /* HVD_RDZV_ELASTIC_H */
