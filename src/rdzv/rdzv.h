/*
 * rdzv.h -- the rendezvous: how the ranks of a job find each other.
 *
 * hvdrun runs the rendezvous service and tells each rank where it is
 * (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, Horovod's names).  Each rank:
 *
 *   1. connects and authenticates (auth.h, purpose "rdzv", connector id =
 *      its rank, acceptor id = HVD_RDZV_SERVER_ID);
 *   2. sends one REGISTER frame (frame.h, tag 0):
 *        u32 rank, u32 size, then the entry's body:
 *        str hostname, str host_id, str iface, str addr, u16 port,
 *        u32 local_rank, u32 local_size, u8 shm
 *      where addr:port is where the rank listens for its peers (on
 *      interface iface), hostname the launcher's name for its host,
 *      host_id where it really runs, and shm whether it wants shared
 *      memory with the other ranks of its host;
 *   3. receives, once every rank has registered, one TABLE frame:
 *        u32 size, then for each rank r in order the body of r's entry,
 *      or one ERROR frame: str reason (bad rank, wrong size, duplicate rank).
 *
 * The server closes the connection after the reply.  Both sides validate
 * everything they decode: ranks in range, size equal to the job's, ports in
 * 1..65535, addresses numeric (inet_pton), local rank below local size
 * below the job size, shm 0 or 1, names bounded, printable and without
 * NUL, no trailing bytes, payload no larger than HVD_FRAME_CONTROL_MAX.
 */
#ifndef HVD_RDZV_H
#define HVD_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "wire/auth.h"
#include "wire/frame.h"
#include "wire/net.h"

#define HVD_RDZV_SERVER_ID 0xFFFFFFFFu
#define HVD_RDZV_PURPOSE "rdzv"
#define HVD_HOSTNAME_MAX 256
/* "nodename/boot-id": a host name (at most 64 bytes on Linux) and 36. */
#define HVD_HOST_ID_MAX 128
#define HVD_IFACE_NAME_MAX 16 /* IF_NAMESIZE */
/* The largest entry body and REGISTER payload, every string at its limit. */
#define HVD_RDZV_BODY_MAX                                                        \
  (2 + (HVD_HOSTNAME_MAX - 1) + 2 + (HVD_HOST_ID_MAX - 1) + 2 +                  \
   (HVD_IFACE_NAME_MAX - 1) + 2 + (HVD_NET_ADDR_MAX - 1) + 2 + 4 + 4 + 1)
#define HVD_RDZV_REGISTER_MAX (4 + 4 + HVD_RDZV_BODY_MAX)

/* One rank's registration. */
typedef struct {
  uint32_t rank, size;
  char hostname[HVD_HOSTNAME_MAX];   /* the launcher's name of its host */
  char host_id[HVD_HOST_ID_MAX];     /* where it really runs (bootstrap.h) */
  char iface[HVD_IFACE_NAME_MAX];    /* the interface it listens on, for logs */
  hvd_peer_addr listen;
  uint32_t local_rank, local_size;   /* as its launcher placed it */
  uint8_t shm;                       /* wants shared memory with its host's ranks */
} hvd_rdzv_entry;

/* Payload codecs shared by the client (libhvd) and the server (hvdrun).
 * The encoders return the payload length or a negative HVD_E_*; the
 * decoders validate as described above and return HVD_E_PROTOCOL with a
 * message naming the bad field. */
int hvd__rdzv_encode_register(const hvd_rdzv_entry *e, uint8_t *buf, size_t cap);
int hvd__rdzv_decode_register(const uint8_t *buf, size_t len, hvd_rdzv_entry *e);
int hvd__rdzv_encode_table(const hvd_rdzv_entry *entries, uint32_t size, uint8_t *buf,
                           size_t cap);
/* entries has `size` slots; the table must say exactly that size. */
int hvd__rdzv_decode_table(const uint8_t *buf, size_t len, uint32_t size,
                           hvd_rdzv_entry *entries);
/* ERROR payload.  The decoder NUL-terminates the reason into cap bytes and
 * replaces control characters (it is printed). */
int hvd__rdzv_encode_error(const char *reason, uint8_t *buf, size_t cap);
int hvd__rdzv_decode_error(const uint8_t *buf, size_t len, char *reason, size_t cap);

/* Client side (libhvd): connect + authenticate within the deadline. */
int hvd__rdzv_connect(const char *addr, int port, const hvd_secret *key, uint32_t rank,
                      uint64_t deadline, int *fd);
/* Client side: register `me` and wait for the table (size entries) or an
 * error from the server (HVD_E_ENV with the server's reason). */
int hvd__rdzv_register(int fd, const hvd_rdzv_entry *me, uint64_t deadline,
                       hvd_rdzv_entry *table);

/* ---- pieces the elastic protocol (rdzv_elastic.c) shares ---- */

/* An entry's body (what REGISTER and TABLE carry per rank) to and from
 * the wire; the check of its fields, failing with `code` naming `what`. */
void hvd__rdzv_put_body(hvd_writer *w, const hvd_rdzv_entry *e);
int hvd__rdzv_get_body(hvd_reader *r, hvd_rdzv_entry *e, const char *what);
int hvd__rdzv_body_check(const hvd_rdzv_entry *e, int code, const char *what);
/* HVD_E_PROTOCOL: a field that did not decode; a payload over
 * HVD_FRAME_CONTROL_MAX; bytes after the last field. */
int hvd__rdzv_field_error(const char *what, const char *field);
int hvd__rdzv_check_len(const char *what, size_t len);
int hvd__rdzv_check_done(const hvd_reader *r, const char *what);
/* The encoded length, or HVD_E_INVALID when it did not fit. */
int hvd__rdzv_writer_result(const hvd_writer *w, const char *what);
/* An ERROR payload as HVD_E_ENV "hvdrun refused the registration: ...". */
int hvd__rdzv_refused(const uint8_t *payload, size_t len);

#endif /* HVD_RDZV_H */
