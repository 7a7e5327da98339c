/*
 * rdzv_server_elastic.c -- the rendezvous server's side of an elastic job
 * (rdzv_elastic.h, rdzv_server.h), a layer over the plain server
 * (rdzv_server.c): workers JOIN with their ids, the owner places them in
 * jobs it forms, and announces host changes to those it placed.
 *
 * A worker's newest connection is the one that counts: when a worker
 * joins again (it left one job for the next), its older connections are
 * closed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rdzv_server_int.h"

static conn *joined_conn(hvd_rdzv_server *s, uint32_t worker, conn_state state) {
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->state == state && c->rank == worker) return c;
  }
  return NULL;
}

static void on_join(hvd_rdzv_server *s, conn *c) {
  uint32_t worker;
  hvd_rdzv_entry e;
  char why[160];
  if (hvd__rdzv_decode_join(c->in + HVD_FRAME_HDR_LEN, c->in_need - HVD_FRAME_HDR_LEN, &worker,
                            &e) < 0) {
    hvd__rdzv_conn_refuse(s, c, hvd_last_error());
    return;
  }
  if (worker != c->rank) {
    snprintf(why, sizeof why, "joined as worker %u but authenticated as worker %u", worker,
             c->rank);
    hvd__rdzv_conn_refuse(s, c, why);
    return;
  }
  /* Its earlier connections belong to jobs it left. */
  for (size_t i = 0; i < s->nconns; i++) {
    conn *old = s->conns[i];
    if (old != c && old->rank == c->rank && (old->state == C_JOINED || old->state == C_CONTROL))
      hvd__rdzv_conn_drop(s, old, old->state == C_JOINED ? "joined again" : NULL);
  }
  c->entry = e;
  c->state = C_JOINED;
  c->deadline = HVD__NEVER; /* the owner decides how long a worker may wait */
  hvd__rdzv_say(s, "worker %u joined (host %s, listens on %s:%d via %s)", worker, e.hostname,
                e.listen.addr, e.listen.port, e.iface[0] ? e.iface : "?");
  s->elastic->joined(s->elastic->arg, worker);
}

static void on_drop(hvd_rdzv_server *s, conn *c) {
  if (c->state != C_JOINED) return;
  c->state = C_DEAD; /* callers drop it; the owner must not place it meanwhile */
  s->elastic->left(s->elastic->arg, c->rank);
}

static const hvd_rdzv_admission joining = {HVD_FRAME_RDZV_JOIN, HVD_RDZV_JOIN_MAX, "JOIN",
                                           "worker", on_join, on_drop};

int hvd__rdzv_server_start_elastic(const hvd_rdzv_server_config *cfg,
                                   const hvd_rdzv_elastic_hooks *hooks, int *ports,
                                   hvd_rdzv_server **out) {
  HVD__CHECK(hvd__rdzv_server_start(cfg, ports, out));
  (*out)->elastic = hooks;
  (*out)->admit = &joining;
  return 0;
}

/* One member's PLACE: its place, then the whole table. */
static blob *place_frame(const hvd_rdzv_place *p, const hvd_rdzv_entry *table) {
  size_t cap = 20 + 4 + (size_t)p->size * HVD_RDZV_BODY_MAX;
  if (cap > HVD_FRAME_CONTROL_MAX) cap = HVD_FRAME_CONTROL_MAX;
  blob *b = hvd__rdzv_frame_new(HVD_FRAME_RDZV_PLACE, cap);
  if (!b) return NULL;
  int len = hvd__rdzv_encode_place(p, table, b->data + HVD_FRAME_HDR_LEN, cap);
  if (len < 0) {
    hvd__rdzv_blob_unref(b);
    return NULL;
  }
  hvd_frame f = {HVD_FRAME_RDZV_PLACE, 0, (uint64_t)len};
  hvd__frame_encode(&f, b->data);
  b->len = HVD_FRAME_HDR_LEN + (size_t)len;
  return b;
}

int hvd__rdzv_server_place(hvd_rdzv_server *s, uint32_t generation, const hvd_rdzv_member *m,
                           int n) {
  conn **cs = calloc((size_t)(n > 0 ? n : 1), sizeof *cs);
  hvd_rdzv_entry *table = calloc((size_t)(n > 0 ? n : 1), sizeof *table);
  int rc = cs && table ? 0 : hvd__err(HVD_E_NOMEM, "placing %d workers", n);
  for (int i = 0; rc == 0 && i < n; i++) {
    if (!(cs[i] = joined_conn(s, m[i].worker, C_JOINED))) {
      rc = hvd__err(HVD_E_INVALID, "worker %u has not joined", m[i].worker);
      break;
    }
    table[i] = cs[i]->entry;
    table[i].rank = (uint32_t)i;
    table[i].size = (uint32_t)n;
    table[i].local_rank = m[i].local_rank;
    table[i].local_size = m[i].local_size;
  }
  for (int i = 0; rc == 0 && i < n; i++) {
    hvd_rdzv_place p = {generation, (uint32_t)i, (uint32_t)n, m[i].cross_rank, m[i].cross_size};
    blob *b = place_frame(&p, table);
    if (!b) {
      rc = hvd_last_error()[0] ? HVD_E_INVALID : HVD_E_NOMEM;
      hvd__rdzv_conn_refuse(s, cs[i], "hvdrun could not build its place in the job");
      continue;
    }
    hvd__rdzv_conn_send(cs[i], b);
    cs[i]->state = C_CONTROL;
  }
  if (rc == 0)
    hvd__rdzv_say(s, "job %u formed: %d workers placed", generation, n);
  free(cs);
  free(table);
  return rc;
}

void hvd__rdzv_server_refuse(hvd_rdzv_server *s, uint32_t worker, const char *why) {
  conn *c = joined_conn(s, worker, C_JOINED);
  if (c) hvd__rdzv_conn_refuse(s, c, why);
}

void hvd__rdzv_server_notice(hvd_rdzv_server *s, uint64_t stamp, int added, int removed) {
  hvd_rdzv_notice n = {stamp, (uint8_t)(added != 0), (uint8_t)(removed != 0)};
  blob *b = hvd__rdzv_frame_new(HVD_FRAME_RDZV_NOTICE, HVD_RDZV_NOTICE_LEN);
  if (!b || hvd__rdzv_encode_notice(&n, b->data + HVD_FRAME_HDR_LEN, HVD_RDZV_NOTICE_LEN) < 0) {
    hvd__rdzv_blob_unref(b);
    hvd__rdzv_say(s, "cannot build a NOTICE: out of memory");
    return;
  }
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->state != C_CONTROL) continue;
    b->refs++;
    if (!c->out) {
      hvd__rdzv_conn_send(c, b);
    } else { /* behind the PLACE: the newest notice is the one that counts */
      hvd__rdzv_blob_unref(c->next);
      c->next = b;
    }
  }
  hvd__rdzv_blob_unref(b);
}
