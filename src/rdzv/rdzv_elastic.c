/*
 * rdzv_elastic.c -- the elastic rendezvous (rdzv_elastic.h): codecs for
 * JOIN, PLACE and NOTICE, and a worker's side of them.
 *
 * As in rdzv.c, every byte decoded came from the network and is checked
 * before it is trusted; the encoders run the same checks.
 */
#include "rdzv_elastic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* A JOIN's body as the checks of rdzv.c see it: rank 0 of a job of 1,
 * the only place a rank without one can be checked in. */
static int join_body_check(const hvd_rdzv_entry *e, uint32_t worker, int code) {
  hvd_rdzv_entry c = *e;
  c.rank = 0;
  c.size = 1;
  c.local_rank = 0;
  c.local_size = 1;
  int rc = hvd__rdzv_body_check(&c, code, "rendezvous JOIN");
  if (rc < 0) return hvd__err_prefix(rc, "worker %u", worker);
  return 0;
}

/* ---- JOIN: u32 worker id, body ---- */

int hvd__rdzv_encode_join(uint32_t worker, const hvd_rdzv_entry *e, uint8_t *buf, size_t cap) {
  HVD__CHECK(join_body_check(e, worker, HVD_E_INVALID));
  hvd_writer w = {buf, cap, 0, 0};
  hvd_rdzv_entry body = *e;
  body.local_rank = 0;
  body.local_size = 1;
  hvd__put_u32(&w, worker);
  hvd__rdzv_put_body(&w, &body);
  return hvd__rdzv_writer_result(&w, "rendezvous JOIN");
}

int hvd__rdzv_decode_join(const uint8_t *buf, size_t len, uint32_t *worker, hvd_rdzv_entry *e) {
  static const char what[] = "rendezvous JOIN";
  HVD__CHECK(hvd__rdzv_check_len(what, len));
  memset(e, 0, sizeof *e);
  hvd_reader r = {buf, len, 0, 0};
  *worker = hvd__get_u32(&r);
  if (r.failed) return hvd__rdzv_field_error(what, "worker");
  HVD__CHECK(hvd__rdzv_get_body(&r, e, what));
  HVD__CHECK(hvd__rdzv_check_done(&r, what));
  if (e->local_rank != 0 || e->local_size != 1)
    return hvd__err(HVD_E_PROTOCOL, "%s: worker %u sent local rank %u of %u, not 0 of 1", what,
                    *worker, e->local_rank, e->local_size);
  return join_body_check(e, *worker, HVD_E_PROTOCOL);
}

/* ---- PLACE: generation, rank, size, cross rank and size, TABLE ---- */

static int place_check(const hvd_rdzv_place *p, int code, const char *what) {
  if (p->size < 1 || p->rank >= p->size)
    return hvd__err(code, "%s: rank %u of %u", what, p->rank, p->size);
  if (p->cross_size < 1 || p->cross_size > p->size || p->cross_rank >= p->cross_size)
    return hvd__err(code, "%s: cross rank %u of %u in a job of %u", what, p->cross_rank,
                    p->cross_size, p->size);
  if (p->generation < 1) return hvd__err(code, "%s: generation 0", what);
  return 0;
}

int hvd__rdzv_encode_place(const hvd_rdzv_place *p, const hvd_rdzv_entry *table, uint8_t *buf,
                           size_t cap) {
  static const char what[] = "rendezvous PLACE";
  HVD__CHECK(place_check(p, HVD_E_INVALID, what));
  if (cap < 20) return hvd__err(HVD_E_INVALID, "%s: does not fit in %zu bytes", what, cap);
  hvd_writer w = {buf, 20, 0, 0};
  hvd__put_u32(&w, p->generation);
  hvd__put_u32(&w, p->rank);
  hvd__put_u32(&w, p->size);
  hvd__put_u32(&w, p->cross_rank);
  hvd__put_u32(&w, p->cross_size);
  int n = hvd__rdzv_encode_table(table, p->size, buf + 20, cap - 20);
  return n < 0 ? n : 20 + n;
}

int hvd__rdzv_decode_place(const uint8_t *buf, size_t len, hvd_rdzv_place *p,
                           hvd_rdzv_entry **table) {
  static const char what[] = "rendezvous PLACE";
  *table = NULL;
  HVD__CHECK(hvd__rdzv_check_len(what, len));
  hvd_reader r = {buf, len, 0, 0};
  p->generation = hvd__get_u32(&r);
  p->rank = hvd__get_u32(&r);
  p->size = hvd__get_u32(&r);
  p->cross_rank = hvd__get_u32(&r);
  p->cross_size = hvd__get_u32(&r);
  if (r.failed) return hvd__rdzv_field_error(what, "generation/rank/size/cross");
  HVD__CHECK(place_check(p, HVD_E_PROTOCOL, what));
  /* Every entry takes more than 16 bytes: a size the payload cannot
   * hold is refused before anything is allocated for it. */
  if ((uint64_t)p->size * 16 > len)
    return hvd__err(HVD_E_PROTOCOL, "%s: %u ranks cannot fit in %zu bytes", what, p->size, len);
  hvd_rdzv_entry *t = calloc(p->size, sizeof *t);
  if (!t) return hvd__err(HVD_E_NOMEM, "%s: a table of %u ranks", what, p->size);
  int rc = hvd__rdzv_decode_table(buf + 20, len - 20, p->size, t);
  if (rc < 0) {
    free(t);
    return rc;
  }
  *table = t;
  return 0;
}

/* ---- NOTICE: u64 stamp, u8 added, u8 removed ---- */

int hvd__rdzv_encode_notice(const hvd_rdzv_notice *n, uint8_t *buf, size_t cap) {
  hvd_writer w = {buf, cap, 0, 0};
  hvd__put_u64(&w, n->stamp);
  hvd__put_u8(&w, n->added ? 1 : 0);
  hvd__put_u8(&w, n->removed ? 1 : 0);
  return hvd__rdzv_writer_result(&w, "rendezvous NOTICE");
}

int hvd__rdzv_decode_notice(const uint8_t *buf, size_t len, hvd_rdzv_notice *n) {
  static const char what[] = "rendezvous NOTICE";
  hvd_reader r = {buf, len, 0, 0};
  n->stamp = hvd__get_u64(&r);
  n->added = hvd__get_u8(&r);
  n->removed = hvd__get_u8(&r);
  if (r.failed) return hvd__rdzv_field_error(what, "stamp/added/removed");
  HVD__CHECK(hvd__rdzv_check_done(&r, what));
  if (n->added > 1 || n->removed > 1)
    return hvd__err(HVD_E_PROTOCOL, "%s: flags %u/%u", what, n->added, n->removed);
  return 0;
}

/* ---- the worker's side ---- */

static int send_join(int fd, uint32_t worker, const hvd_rdzv_entry *me, uint64_t deadline) {
  uint8_t msg[HVD_FRAME_HDR_LEN + HVD_RDZV_JOIN_MAX];
  int len = hvd__rdzv_encode_join(worker, me, msg + HVD_FRAME_HDR_LEN,
                                  sizeof msg - HVD_FRAME_HDR_LEN);
  if (len < 0) return len;
  hvd_frame f = {HVD_FRAME_RDZV_JOIN, 0, (uint64_t)len};
  hvd__frame_encode(&f, msg);
  return hvd__net_write_all(fd, msg, HVD_FRAME_HDR_LEN + (size_t)len, deadline);
}

int hvd__rdzv_join(int fd, uint32_t worker, const hvd_rdzv_entry *me, uint64_t deadline,
                   hvd_rdzv_place *place, hvd_rdzv_entry **table) {
  uint8_t hdr[HVD_FRAME_HDR_LEN];
  hvd_frame f;
  *table = NULL;
  HVD__CHECK(send_join(fd, worker, me, deadline));
  HVD__CHECK(hvd__net_read_all(fd, hdr, sizeof hdr, deadline));
  HVD__CHECK(hvd__frame_decode(hdr, &f));
  if ((f.type != HVD_FRAME_RDZV_PLACE && f.type != HVD_FRAME_RDZV_ERROR) || f.tag != 0)
    return hvd__err(HVD_E_PROTOCOL, "hvdrun answered JOIN with frame type %u tag %u", f.type,
                    f.tag);
  HVD__CHECK(hvd__rdzv_check_len("rendezvous reply", f.len));
  uint8_t *payload = malloc(f.len ? (size_t)f.len : 1);
  if (!payload) return hvd__err(HVD_E_NOMEM, "%llu bytes of PLACE", (unsigned long long)f.len);
  int rc = hvd__net_read_all(fd, payload, (size_t)f.len, deadline);
  if (rc == 0 && f.type == HVD_FRAME_RDZV_ERROR) rc = hvd__rdzv_refused(payload, (size_t)f.len);
  if (rc == 0) rc = hvd__rdzv_decode_place(payload, (size_t)f.len, place, table);
  free(payload);
  return rc;
}

void hvd__rdzv_notices_init(hvd_rdzv_notices *n, int fd) {
  memset(n, 0, sizeof *n);
  n->fd = fd;
}

void hvd__rdzv_notices_close(hvd_rdzv_notices *n) {
  if (n->fd >= 0) close(n->fd);
  n->fd = -1;
}

/* One complete frame in n->buf: check it, take its notice. */
static int take_frame(hvd_rdzv_notices *n) {
  hvd_frame f;
  hvd_rdzv_notice got;
  HVD__CHECK(hvd__frame_decode(n->buf, &f));
  if (f.type != HVD_FRAME_RDZV_NOTICE || f.tag != 0 || f.len != HVD_RDZV_NOTICE_LEN)
    return hvd__err(HVD_E_PROTOCOL, "hvdrun sent frame type %u (%llu bytes), not a NOTICE",
                    f.type, (unsigned long long)f.len);
  HVD__CHECK(hvd__rdzv_decode_notice(n->buf + HVD_FRAME_HDR_LEN, HVD_RDZV_NOTICE_LEN, &got));
  if (got.stamp > n->last.stamp) n->last = got;
  n->added |= got.added;
  n->removed |= got.removed;
  n->len = 0;
  return 0;
}

int hvd__rdzv_notices_poll(hvd_rdzv_notices *n) {
  while (n->fd >= 0) {
    /* A header first (it may be garbage: decoded before more is read),
     * then exactly one NOTICE's payload. */
    size_t want = n->len < HVD_FRAME_HDR_LEN ? HVD_FRAME_HDR_LEN : sizeof n->buf;
    ssize_t got = recv(n->fd, n->buf + n->len, want - n->len, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (got <= 0) { /* hvdrun closed it (or it broke): no more notices */
      hvd__rdzv_notices_close(n);
      return 0;
    }
    n->len += (size_t)got;
    int rc = 0;
    if (n->len == HVD_FRAME_HDR_LEN) {
      hvd_frame f;
      rc = hvd__frame_decode(n->buf, &f);
      if (rc == 0 && (f.type != HVD_FRAME_RDZV_NOTICE || f.len != HVD_RDZV_NOTICE_LEN))
        rc = hvd__err(HVD_E_PROTOCOL, "hvdrun sent frame type %u (%llu bytes), not a NOTICE",
                      f.type, (unsigned long long)f.len);
    } else if (n->len == sizeof n->buf) {
      rc = take_frame(n);
    }
    if (rc < 0) {
      hvd__rdzv_notices_close(n);
      return rc;
    }
  }
  return 0;
}
