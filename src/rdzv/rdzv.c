/*
 * rdzv.c -- the rendezvous protocol (rdzv.h): payload codecs shared by
 * libhvd and hvdrun, and the client side that a rank runs in hvd_init().
 *
 * Every byte decoded here came from the network, so the decoders check
 * each field before it is trusted (ranks in range, ports in 1..65535,
 * numeric addresses, bounded printable strings, no trailing bytes) and
 * name the first bad field in the error.  The encoders run the same
 * checks, so neither side can put on the wire what the other would refuse.
 */
#include "rdzv.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---- validation shared by encoders and decoders ---- */

/* A name is 1..cap-1 visible ASCII characters (0.. when it may be
 * empty): it is printed in error messages, so no control bytes or spaces
 * get through. */
static int name_ok(const char *s, size_t cap, int may_be_empty) {
  size_t n = strnlen(s, cap);
  if ((n == 0 && !may_be_empty) || n >= cap) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return 0;
  return 1;
}

/* Numeric IPv4 or IPv6 only: a name would make the peer resolve DNS on
 * whatever a stranger sent. */
static int addr_ok(const char *s) {
  unsigned char bin[sizeof(struct in6_addr)];
  if (strnlen(s, HVD_NET_ADDR_MAX) >= HVD_NET_ADDR_MAX) return 0;
  return inet_pton(AF_INET, s, bin) == 1 || inet_pton(AF_INET6, s, bin) == 1;
}

/* The fields of an entry's body, and where they are placed; `code` is
 * what a failure returns (HVD_E_INVALID for what we are about to send,
 * HVD_E_PROTOCOL for what we received). */
int hvd__rdzv_body_check(const hvd_rdzv_entry *e, int code, const char *what) {
  if (!name_ok(e->hostname, sizeof e->hostname, 0))
    return hvd__err(code, "%s: rank %u: hostname is empty, too long or not printable", what,
                    e->rank);
  if (!name_ok(e->host_id, sizeof e->host_id, 0))
    return hvd__err(code, "%s: rank %u: host id is empty, too long or not printable", what,
                    e->rank);
  if (!name_ok(e->iface, sizeof e->iface, 1))
    return hvd__err(code, "%s: rank %u: interface name is too long or not printable", what,
                    e->rank);
  if (!addr_ok(e->listen.addr))
    return hvd__err(code, "%s: rank %u: address '%.*s' is not a numeric IPv4/IPv6 address",
                    what, e->rank, HVD_NET_ADDR_MAX, e->listen.addr);
  if (e->listen.port < 1 || e->listen.port > 65535)
    return hvd__err(code, "%s: rank %u: port %d is not in 1..65535", what, e->rank,
                    e->listen.port);
  if (e->local_size < 1 || e->local_size > e->size || e->local_rank >= e->local_size)
    return hvd__err(code, "%s: rank %u: local rank %u of %u does not fit a job of %u", what,
                    e->rank, e->local_rank, e->local_size, e->size);
  if (e->shm > 1) return hvd__err(code, "%s: rank %u: shm flag %u", what, e->rank, e->shm);
  return 0;
}

static int entry_check(const hvd_rdzv_entry *e, int code, const char *what) {
  if (e->size < 1) return hvd__err(code, "%s: job size 0", what);
  if (e->rank >= e->size)
    return hvd__err(code, "%s: rank %u is not below the job size %u", what, e->rank,
                    e->size);
  return hvd__rdzv_body_check(e, code, what);
}

/* The error a decoder returns when the reader ran out or a string field
 * was too long or held a NUL. */
int hvd__rdzv_field_error(const char *what, const char *field) {
  return hvd__err(HVD_E_PROTOCOL, "%s: field '%s' is truncated, too long or holds a NUL byte",
                  what, field);
}

int hvd__rdzv_check_len(const char *what, size_t len) {
  if (len > HVD_FRAME_CONTROL_MAX)
    return hvd__err(HVD_E_PROTOCOL, "%s: payload of %zu bytes exceeds the %u-byte limit", what,
                    len, HVD_FRAME_CONTROL_MAX);
  return 0;
}

int hvd__rdzv_check_done(const hvd_reader *r, const char *what) {
  if (hvd__reader_done(r)) return 0;
  return hvd__err(HVD_E_PROTOCOL, "%s: %zu trailing bytes after the last field", what,
                  r->len - r->pos);
}

int hvd__rdzv_writer_result(const hvd_writer *w, const char *what) {
  if (w->failed || w->len > INT32_MAX)
    return hvd__err(HVD_E_INVALID, "%s: does not fit in a %zu-byte buffer", what, w->cap);
  return (int)w->len;
}

/* ---- an entry's body: what REGISTER and TABLE both carry ---- */

void hvd__rdzv_put_body(hvd_writer *w, const hvd_rdzv_entry *e) {
  hvd__put_str(w, e->hostname);
  hvd__put_str(w, e->host_id);
  hvd__put_str(w, e->iface);
  hvd__put_str(w, e->listen.addr);
  hvd__put_u16(w, (uint16_t)e->listen.port);
  hvd__put_u32(w, e->local_rank);
  hvd__put_u32(w, e->local_size);
  hvd__put_u8(w, e->shm);
}

/* Reads the body into e, naming the first field that does not decode. */
int hvd__rdzv_get_body(hvd_reader *r, hvd_rdzv_entry *e, const char *what) {
  hvd__get_str(r, e->hostname, sizeof e->hostname);
  if (r->failed) return hvd__rdzv_field_error(what, "hostname");
  hvd__get_str(r, e->host_id, sizeof e->host_id);
  if (r->failed) return hvd__rdzv_field_error(what, "host_id");
  hvd__get_str(r, e->iface, sizeof e->iface);
  if (r->failed) return hvd__rdzv_field_error(what, "iface");
  hvd__get_str(r, e->listen.addr, sizeof e->listen.addr);
  if (r->failed) return hvd__rdzv_field_error(what, "addr");
  e->listen.port = hvd__get_u16(r);
  e->local_rank = hvd__get_u32(r);
  e->local_size = hvd__get_u32(r);
  e->shm = hvd__get_u8(r);
  if (r->failed) return hvd__rdzv_field_error(what, "port/local rank/local size/shm");
  return 0;
}

/* ---- REGISTER: u32 rank, u32 size, body ---- */

int hvd__rdzv_encode_register(const hvd_rdzv_entry *e, uint8_t *buf, size_t cap) {
  HVD__CHECK(entry_check(e, HVD_E_INVALID, "rendezvous REGISTER"));
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_u32(&w, e->rank);
  hvd__put_u32(&w, e->size);
  hvd__rdzv_put_body(&w, e);
  return hvd__rdzv_writer_result(&w, "rendezvous REGISTER");
}

int hvd__rdzv_decode_register(const uint8_t *buf, size_t len, hvd_rdzv_entry *e) {
  static const char what[] = "rendezvous REGISTER";
  HVD__CHECK(hvd__rdzv_check_len(what, len));
  memset(e, 0, sizeof *e);
  hvd_reader r = {buf, len, 0, 0};
  e->rank = hvd__get_u32(&r);
  e->size = hvd__get_u32(&r);
  if (r.failed) return hvd__rdzv_field_error(what, "rank/size");
  HVD__CHECK(hvd__rdzv_get_body(&r, e, what));
  HVD__CHECK(hvd__rdzv_check_done(&r, what));
  return entry_check(e, HVD_E_PROTOCOL, what);
}

/* ---- TABLE: u32 size, then every rank's body in rank order ---- */

int hvd__rdzv_encode_table(const hvd_rdzv_entry *entries, uint32_t size, uint8_t *buf,
                           size_t cap) {
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_u32(&w, size);
  for (uint32_t r = 0; r < size; r++) {
    const hvd_rdzv_entry *e = &entries[r];
    if (e->rank != r || e->size != size)
      return hvd__err(HVD_E_INVALID, "rendezvous TABLE: slot %u holds rank %u of %u", r,
                      e->rank, e->size);
    HVD__CHECK(entry_check(e, HVD_E_INVALID, "rendezvous TABLE"));
    hvd__rdzv_put_body(&w, e);
  }
  return hvd__rdzv_writer_result(&w, "rendezvous TABLE");
}

int hvd__rdzv_decode_table(const uint8_t *buf, size_t len, uint32_t size,
                           hvd_rdzv_entry *entries) {
  static const char what[] = "rendezvous TABLE";
  HVD__CHECK(hvd__rdzv_check_len(what, len));
  hvd_reader r = {buf, len, 0, 0};
  uint32_t n = hvd__get_u32(&r);
  if (r.failed) return hvd__rdzv_field_error(what, "size");
  if (n != size)
    return hvd__err(HVD_E_PROTOCOL, "%s: lists %u ranks, this job has %u", what, n, size);
  for (uint32_t i = 0; i < size; i++) {
    hvd_rdzv_entry *e = &entries[i];
    memset(e, 0, sizeof *e);
    e->rank = i;
    e->size = size;
    HVD__CHECK(hvd__rdzv_get_body(&r, e, what));
    HVD__CHECK(entry_check(e, HVD_E_PROTOCOL, what));
  }
  return hvd__rdzv_check_done(&r, what);
}

/* ---- ERROR: str reason ---- */

int hvd__rdzv_encode_error(const char *reason, uint8_t *buf, size_t cap) {
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_str(&w, reason);
  return hvd__rdzv_writer_result(&w, "rendezvous ERROR");
}

int hvd__rdzv_decode_error(const uint8_t *buf, size_t len, char *reason, size_t cap) {
  static const char what[] = "rendezvous ERROR";
  HVD__CHECK(hvd__rdzv_check_len(what, len));
  hvd_reader r = {buf, len, 0, 0};
  hvd__get_str(&r, reason, cap);
  if (r.failed) return hvd__rdzv_field_error(what, "reason");
  HVD__CHECK(hvd__rdzv_check_done(&r, what));
  for (char *p = reason; *p; p++) /* it is printed: keep the terminal sane */
    if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) *p = '?';
  return 0;
}

/* ---- client ---- */

int hvd__rdzv_connect(const char *addr, int port, const hvd_secret *key, uint32_t rank,
                      uint64_t deadline, int *fd) {
  uint32_t server_id = 0;
  HVD__CHECK(hvd__net_connect(addr, port, deadline, fd));
  int rc = hvd__auth_connect(*fd, key, HVD_RDZV_PURPOSE, rank, deadline, &server_id);
  if (rc == 0 && server_id != HVD_RDZV_SERVER_ID)
    rc = hvd__err(HVD_E_AUTH, "the peer proved id %u, not the rendezvous server's", server_id);
  if (rc < 0) hvd__net_close(fd);
  return rc;
}

static int send_register(int fd, const hvd_rdzv_entry *me, uint64_t deadline) {
  uint8_t msg[HVD_FRAME_HDR_LEN + HVD_RDZV_REGISTER_MAX];
  int len = hvd__rdzv_encode_register(me, msg + HVD_FRAME_HDR_LEN,
                                      sizeof msg - HVD_FRAME_HDR_LEN);
  if (len < 0) return len;
  hvd_frame f = {HVD_FRAME_RDZV_REGISTER, 0, (uint64_t)len};
  hvd__frame_encode(&f, msg);
  return hvd__net_write_all(fd, msg, HVD_FRAME_HDR_LEN + (size_t)len, deadline);
}

/* Reads the reply header: a TABLE or an ERROR, tag 0, bounded length. */
static int recv_reply_header(int fd, uint64_t deadline, hvd_frame *f) {
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  HVD__CHECK(hvd__net_read_all(fd, hdr, sizeof hdr, deadline));
  HVD__CHECK(hvd__frame_decode(hdr, f));
  if (f->type != HVD_FRAME_RDZV_TABLE && f->type != HVD_FRAME_RDZV_ERROR)
    return hvd__err(HVD_E_PROTOCOL, "the server replied with frame type %u, not a TABLE",
                    f->type);
  if (f->tag != 0) return hvd__err(HVD_E_PROTOCOL, "the server's reply has tag %u", f->tag);
  return hvd__rdzv_check_len("rendezvous reply", f->len);
}

/* The server's ERROR frame becomes HVD_E_ENV: a misconfigured job. */
int hvd__rdzv_refused(const uint8_t *payload, size_t len) {
  char reason[512];
  HVD__CHECK(hvd__rdzv_decode_error(payload, len, reason, sizeof reason));
  return hvd__err(HVD_E_ENV, "hvdrun refused the registration: %s", reason);
}

/* The table must list this rank where it registered. */
static int check_self(const hvd_rdzv_entry *me, const hvd_rdzv_entry *table) {
  const hvd_rdzv_entry *t = &table[me->rank];
  if (t->listen.port == me->listen.port && strcmp(t->listen.addr, me->listen.addr) == 0)
    return 0;
  return hvd__err(HVD_E_PROTOCOL, "the table lists rank %u at %s:%d, it registered %s:%d",
                  me->rank, t->listen.addr, t->listen.port, me->listen.addr, me->listen.port);
}

int hvd__rdzv_register(int fd, const hvd_rdzv_entry *me, uint64_t deadline,
                       hvd_rdzv_entry *table) {
  hvd_frame f;
  HVD__CHECK(send_register(fd, me, deadline));
  HVD__CHECK(recv_reply_header(fd, deadline, &f));
  uint8_t *payload = malloc(f.len ? (size_t)f.len : 1);
  if (!payload) return hvd__err(HVD_E_NOMEM, "allocating %llu bytes for the rendezvous reply",
                                (unsigned long long)f.len);
  int rc = hvd__net_read_all(fd, payload, (size_t)f.len, deadline);
  if (rc == 0 && f.type == HVD_FRAME_RDZV_ERROR) rc = hvd__rdzv_refused(payload, (size_t)f.len);
  if (rc == 0) rc = hvd__rdzv_decode_table(payload, (size_t)f.len, me->size, table);
  if (rc == 0) rc = check_self(me, table);
  free(payload);
  return rc;
}
