/*
 * hierarchical.c -- HOROVOD_HIERARCHICAL_ALLREDUCE: an allreduce that
 * crosses hosts with a fraction of the data; and the hosts' layout that
 * it and the hierarchical allgather (hier_allgather.c) run over.
 *
 * With C hosts of L ranks each (n = L * C), the buffer is cut into n
 * segments exactly as for the ring (the engine's fused layout keeps
 * working), and the L groups of C consecutive segments, group g =
 * segments g*C .. g*C+C-1, are what the ranks of a host share out:
 *
 *   1. ring reduce-scatter over the host (c->local), on the L groups:
 *      local rank l ends with group l reduced over its host;
 *   2. ring allreduce over c->cross (the C ranks of local rank l, one per
 *      host), on group l with its C segments as the ring's segments:
 *      cross rank h reduces segment l*C+h over every host and, for
 *      AVERAGE, divides it by n, then the cross allgather copies it;
 *   3. ring allgather over the host, on the L groups.
 *
 * Per rank that is (L-1)/L S + 2(C-1)/C S/L + (L-1)/L S = 2(n-1)/n S,
 * the flat ring's bytes, but only the 2(C-1)/C S/L of phase 2 leave the
 * host, against the flat ring's 2(n-1)/n S through each host boundary.
 *
 * Bits: each segment is finished on exactly one rank (phase 2's owner)
 * and copied everywhere else, so every rank ends with the same bits.  An
 * element of segment s is reduced first around the host ring in an
 * order fixed by its group s/C and L, then around the cross ring in an
 * order fixed by s%C and C: by its segment alone, never by the tensors
 * it is fused with, as the engine requires (see allreduce.c).
 *
 * Tags: the phases run on the sub-communicators' member lists but every
 * frame carries the global collective's tag, so a rank that runs another
 * collective is still caught at the first frame, as with the flat
 * algorithms.  Each phase also takes the next sequence number of its
 * sub-communicator, which counts the phases run there (and is the same
 * on all its ranks, since every rank runs every global allreduce).  A
 * failure breaks the global communicator (its caller), which aborts the
 * shared transport and with it every peer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "wire/frame.h"
#include "coll.h"

/* ---- the layout every rank read from its environment ---- */

/* "ranks disagree on the hosts: rank R has VAR=GOT, expected ...". */
static int env_err(int r, const char *var, int got, const char *fmt, ...) HVD__PRINTF(4, 5);
static int env_err(int r, const char *var, int got, const char *fmt, ...) {
  char want[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(want, sizeof want, fmt, ap);
  va_end(ap);
  return hvd__err(HVD_E_ENV, "ranks disagree on the hosts: rank %d has %s=%d, expected %s", r,
                  var, got, want);
}

/* Values in the ranges the bootstrap enforces locally (they came over the
 * network, so they are checked again before they index anything). */
static int check_ranges(const hvd_place *all, int n) {
  for (int r = 0; r < n; r++) {
    const hvd_place *p = &all[r];
    if (p->local_size < 1 || p->local_size > n)
      return env_err(r, "HOROVOD_LOCAL_SIZE", p->local_size, "1 to %d (the job size)", n);
    if (p->cross_size < 1 || p->cross_size > n)
      return env_err(r, "HOROVOD_CROSS_SIZE", p->cross_size, "1 to %d (the job size)", n);
    if (p->local_rank < 0 || p->local_rank >= p->local_size)
      return env_err(r, "HOROVOD_LOCAL_RANK", p->local_rank, "0 to %d", p->local_size - 1);
    if (p->cross_rank < 0 || p->cross_rank >= p->cross_size)
      return env_err(r, "HOROVOD_CROSS_RANK", p->cross_rank, "0 to %d", p->cross_size - 1);
  }
  return 0;
}

/* with[l]: ranks of local rank l (the hosts that have one).  Each has
 * cross_size with[l] and a distinct cross rank; a host with a local rank
 * l > 0 has l - 1 too. */
static int check_cross(const hvd_place *all, int n, const int *with, int *slot) {
  for (int r = 0; r < n; r++) {
    int l = all[r].local_rank;
    if (all[r].cross_size != with[l])
      return env_err(r, "HOROVOD_CROSS_SIZE", all[r].cross_size,
                     "%d (the ranks with HOROVOD_LOCAL_RANK=%d)", with[l], l);
    if (l > 0 && with[l] > with[l - 1])
      return env_err(r, "HOROVOD_LOCAL_RANK", l,
                     "a value that no more ranks have (%d) than %d has (%d)", with[l], l - 1,
                     with[l - 1]);
  }
  /* Distinct (local rank, cross rank) pairs: slot[start of l + cross rank]. */
  int *start = slot + n;
  for (int l = 0, at = 0; l < n; at += with[l++]) start[l] = at;
  for (int i = 0; i < n; i++) slot[i] = -1;
  for (int r = 0; r < n; r++) {
    int *s = &slot[start[all[r].local_rank] + all[r].cross_rank];
    if (*s >= 0)
      return env_err(r, "HOROVOD_CROSS_RANK", all[r].cross_rank,
                     "a value other than rank %d's, which has the same HOROVOD_LOCAL_RANK=%d",
                     *s, all[r].local_rank);
    *s = r;
  }
  return 0;
}

/* A host of size L has one rank of each local rank 0..L-1, all saying L:
 * the ranks saying L are L times the local rank 0s saying L.  Of the
 * sizes that fail this, the one fewest ranks say is the likely mistake:
 * its first rank is named. */
static int check_local(const hvd_place *all, int n, int *count) {
  int *hosts = count + n + 1;
  memset(count, 0, 2 * ((size_t)n + 1) * sizeof *count);
  for (int r = 0; r < n; r++) {
    count[all[r].local_size]++;
    if (all[r].local_rank == 0) hosts[all[r].local_size]++;
  }
  int r = -1;
  for (int q = 0; q < n; q++) {
    int size = all[q].local_size;
    if (count[size] != size * hosts[size] && (r < 0 || count[size] < count[all[r].local_size]))
      r = q;
  }
  if (r >= 0) {
    int size = all[r].local_size;
    return env_err(r, "HOROVOD_LOCAL_SIZE", size,
                   "its host's size: %d rank(s) say %d, not the %d that %d host(s) of that "
                   "size (counted by HOROVOD_LOCAL_RANK=0) have", count[size], size,
                   size * hosts[size], hosts[size]);
  }
  return 0;
}

int hvd__hier_check(const hvd_place *all, int n) {
  HVD__CHECK(check_ranges(all, n));
  int *with = calloc(4 * (size_t)n + 2, sizeof *with); /* with[n], slot[2n] | count[2n+2] */
  if (!with) return hvd__err(HVD_E_NOMEM, "allocating the layout of %d ranks", n);
  for (int r = 0; r < n; r++) with[all[r].local_rank]++;
  int rc = check_cross(all, n, with, with + n);
  if (rc == 0) rc = check_local(all, n, with);
  free(with);
  return rc;
}

/* ---- building the sub-communicators ---- */

#define PLACE_BYTES 16

/* Every rank's place, in rank order (*all malloc()ed), in the wire codec
 * of wire/frame.h. */
static int exchange(hvd_comm *c, hvd_place **all) {
  uint8_t mine[PLACE_BYTES], *got = NULL;
  const hvd_place *p = &c->place;
  hvd_writer w = {.buf = mine, .cap = sizeof mine};
  hvd__put_u32(&w, (uint32_t)p->local_rank);
  hvd__put_u32(&w, (uint32_t)p->local_size);
  hvd__put_u32(&w, (uint32_t)p->cross_rank);
  hvd__put_u32(&w, (uint32_t)p->cross_size);
  size_t *counts = calloc((size_t)c->size, sizeof *counts);
  *all = calloc((size_t)c->size, sizeof **all);
  int rc = counts && *all ? hvd__allgather(c, mine, sizeof mine, 1, (void **)&got, counts)
                          : hvd__err(HVD_E_NOMEM, "allocating %d places", c->size);
  for (int r = 0; rc == 0 && r < c->size; r++) {
    if (counts[r] != PLACE_BYTES) {
      rc = hvd__err(HVD_E_PROTOCOL, "rank %d sent %zu bytes of host layout, not %d", r,
                    counts[r], PLACE_BYTES);
      break;
    }
    hvd_reader rd = {.buf = got + (size_t)r * PLACE_BYTES, .len = PLACE_BYTES};
    int v[4];
    for (int i = 0; i < 4; i++) v[i] = (int)(int32_t)hvd__get_u32(&rd);
    (*all)[r] = (hvd_place){v[0], v[1], v[2], v[3]};
  }
  free(got);
  free(counts);
  return rc;
}

/* A sub-communicator of c over ranks[0..k), ranks[i] its rank i. */
static int sub_new(hvd_comm *c, const int *ranks, int k, hvd_comm **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return hvd__err(HVD_E_NOMEM, "allocating a sub-communicator");
  return hvd__comm_init_subset(*out, c, ranks, k, c->rank);
}

/* The host's sub-communicator over ranks[0..L): straight over the host's
 * shared memory when the job's transport has it for exactly these ranks
 * in this order (hosts the launcher placed), else over the job's
 * transport like any subset. */
static int local_new(hvd_comm *c, const int *ranks, int L) {
  const int *members = NULL;
  hvd_transport *host = c->xport->ops->caps.host ? c->xport->ops->caps.host(c->xport, &members) : NULL;
  if (!host || host->size != L || memcmp(members, ranks, (size_t)L * sizeof *ranks) != 0)
    return sub_new(c, ranks, L, &c->local);
  c->local = calloc(1, sizeof *c->local);
  if (!c->local) return hvd__err(HVD_E_NOMEM, "allocating a sub-communicator");
  hvd__log(HVD_LOG_DEBUG, "hierarchical allreduce: within the host over %s", host->ops->name);
  return hvd__comm_init_over(c->local, c, host);
}

/* Hosts of L ranks each: by[l * C + h] is the rank of local rank l on host
 * (cross rank) h, a bijection hvd__hier_check has made sure of. */
static int build(hvd_comm *c, const hvd_place *all, int L) {
  int n = c->size, C = n / L, l = all[c->rank].local_rank, h = all[c->rank].cross_rank;
  int *by = malloc((size_t)n * sizeof *by), *ranks = malloc((size_t)n * sizeof *ranks);
  int rc = by && ranks ? 0 : hvd__err(HVD_E_NOMEM, "allocating the layout of %d ranks", n);
  for (int r = 0; rc == 0 && r < n; r++) by[all[r].local_rank * C + all[r].cross_rank] = r;
  for (int i = 0; rc == 0 && i < L; i++) ranks[i] = by[i * C + h];
  if (rc == 0) rc = local_new(c, ranks, L);
  for (int i = 0; rc == 0 && i < C; i++) ranks[i] = by[l * C + i];
  if (rc == 0) rc = sub_new(c, ranks, C, &c->cross);
  if (rc == 0) c->hier_rank = by; /* the hierarchical allgather's order */
  else free(by);
  free(ranks);
  return rc;
}

/* The hosts' common size, or 0 when they differ (then *other is another). */
static int common_size(const hvd_place *all, int n, int *other) {
  for (int r = 1; r < n; r++)
    if (all[r].local_size != all[0].local_size) return *other = all[r].local_size, 0;
  return all[0].local_size;
}

/* The switch the user set, for the messages. */
static const char *knob(const hvd_comm *c) {
  return c->hierarchical || !c->hier_allgather ? "HOROVOD_HIERARCHICAL_ALLREDUCE"
                                               : "HOROVOD_HIERARCHICAL_ALLGATHER";
}

static int decide(hvd_comm *c, const hvd_place *all) {
  int other = 0, L = common_size(all, c->size, &other);
  if (L == 0) {
    if (c->rank == 0 && (c->hierarchical || c->hier_allgather))
      hvd__log(HVD_LOG_WARNING, "%s: the hosts have different numbers of ranks (%d and %d); "
               "the flat collectives run instead", knob(c), all[0].local_size, other);
    return 0;
  }
  if (L == 1 || L == c->size) {
    hvd__log(HVD_LOG_DEBUG, "%s: %s; the flat collectives run", knob(c),
             L == 1 ? "one rank per host" : "one host");
    return 0;
  }
  hvd__log(HVD_LOG_DEBUG, "hierarchical allreduce: %d hosts of %d ranks", c->size / L, L);
  return build(c, all, L);
}

int hvd__hier_setup(hvd_comm *c) {
  if (!(c->hierarchical || c->hier_tunable || c->hier_allgather) || c->size < 2) return 0;
  hvd_place *all = NULL;
  int rc = exchange(c, &all);
  if (rc == 0) rc = hvd__hier_check(all, c->size);
  if (rc == 0) rc = decide(c, all);
  free(all);
  return rc;
}

/* ---- the allreduce ---- */

/* The three phases over the groups (see the top of the file). */
static int phases(hvd_comm *c, uint32_t tag, const hvd_pieces *segs, const hvd_pieces *groups,
                  hvd_dtype dtype, hvd_op op) {
  hvd_comm *local = c->local, *cross = c->cross;
  const hvd_pieces *mine = segs + local->rank * cross->size; /* group l's segments */
  uint32_t seq;
  HVD__CHECK(hvd__comm_begin(local, &seq));
  HVD__CHECK(hvd__ring_reduce_scatter(local, tag, groups, dtype, op, 0));
  HVD__CHECK(hvd__comm_begin(cross, &seq));
  HVD__CHECK(hvd__ring_reduce_scatter(cross, tag, mine, dtype, op, c->size));
  HVD__CHECK(hvd__ring_allgather(cross, tag, mine));
  HVD__CHECK(hvd__comm_begin(local, &seq));
  return hvd__ring_allgather(local, tag, groups);
}

int hvd__hierarchical(hvd_comm *c, uint32_t tag, const hvd_pieces *segs, hvd_dtype dtype,
                      hvd_op op) {
  int L = c->local->size, C = c->cross->size;
  if (L * C != c->size)
    return hvd__err(HVD_E_INVALID, "hierarchical allreduce: %d x %d ranks, not %d", L, C,
                    c->size);
  hvd_piece *flat = NULL;
  hvd_pieces all, *groups = malloc((size_t)L * sizeof *groups);
  int rc = groups ? hvd__pieces_concat(segs, c->size, &flat, &all)
                  : hvd__err(HVD_E_NOMEM, "allocating %d groups", L);
  /* Group g: the pieces of segments g*C .. g*C+C-1, consecutive in flat. */
  for (int g = 0, at = 0; rc == 0 && g < L; g++) {
    int k = 0;
    for (int s = g * C; s < (g + 1) * C; s++) k += segs[s].n;
    groups[g] = (hvd_pieces){flat + at, k};
    at += k;
  }
  if (rc == 0) rc = phases(c, tag, segs, groups, dtype, op);
  free(flat);
  free(groups);
  return rc;
}
