/*
 * rdzv.h -- the rendezvous: how the ranks of a job find each other.
 *
 * hvdrun runs the rendezvous service and tells each rank where it is
 * (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, Horovod's names).  Each rank:
 *
 *   1. connects and authenticates (auth.h, purpose "rdzv", connector id =
 *      its rank, acceptor id = HVD_RDZV_SERVER_ID);
 *   2. sends one REGISTER frame (frame.h, tag 0):
 *        u32 rank, u32 size, str hostname, str addr, u16 port
 *      where addr:port is where the rank listens for its peers;
 *   3. receives, once every rank has registered, one TABLE frame:
 *        u32 size, then for each rank r in order: str addr, u16 port, str hostname
 *      or one ERROR frame: str reason (bad rank, wrong size, duplicate rank).
 *
 * The server closes the connection after the reply.  Both sides validate
 * everything they decode: ranks in range, size equal to the job's, ports in
 * 1..65535, addresses numeric (inet_pton), strings bounded and without NUL,
 * no trailing bytes, payload no larger than HVD_FRAME_CONTROL_MAX.
 */
#ifndef HVD_RDZV_H
#define HVD_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "../transport/auth.h"
#include "../transport/frame.h"
#include "../transport/net.h"
#include "../transport/transport.h"

#define HVD_RDZV_SERVER_ID 0xFFFFFFFFu
#define HVD_RDZV_PURPOSE "rdzv"
#define HVD_HOSTNAME_MAX 256
/* The largest REGISTER payload: two u32, two strings at their limits, a u16. */
#define HVD_RDZV_REGISTER_MAX \
  (4 + 4 + 2 + (HVD_HOSTNAME_MAX - 1) + 2 + (HVD_NET_ADDR_MAX - 1) + 2)

/* One rank's registration. */
typedef struct {
  uint32_t rank, size;
  char hostname[HVD_HOSTNAME_MAX];
  hvd_peer_addr listen;
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

#endif /* HVD_RDZV_H */
