/*
 * request.c -- comparing what ranks said about one tensor, and saying
 * precisely how they disagree when they do.
 *
 * A mismatch is a bug in the user's program (rank 3 passed the wrong
 * count), so the message is the whole diagnosis: the tensor, the field,
 * and every rank's value.  Ranks that sent the same value are grouped
 * ("ranks 0-2,5 sent 10, rank 3 sent 12") so that a job of hundreds of
 * ranks still reads in one line, and the message is cut with "..." before
 * it outgrows the error buffer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/request.h"

static const char *const type_names[] = {
    [HVD_REQ_ALLREDUCE] = "allreduce", [HVD_REQ_BROADCAST] = "broadcast",
    [HVD_REQ_ALLGATHER] = "allgather", [HVD_REQ_ALLTOALL] = "alltoall",
    [HVD_REQ_REDUCESCATTER] = "reducescatter", [HVD_REQ_BARRIER] = "barrier",
    [HVD_REQ_PSET_ADD] = "add_process_set",     [HVD_REQ_PSET_REMOVE] = "remove_process_set",
};

const char *hvd__req_type_name(int type) {
  return (unsigned)type < HVD__ARRAY_LEN(type_names) ? type_names[type] : "unknown";
}

/* Scale factors are equal only when their bits are: == would call -0.0
 * and +0.0 equal although they scale to differently signed zeros (and
 * results must be bitwise identical on every rank), and would call a NaN
 * unequal to itself, so a request carrying one would never match its own
 * copy on another rank nor hit the cache. */
static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int same_shape(const hvd_request *a, const hvd_request *b) {
  return a->ndims == b->ndims && a->ndims <= HVD_MAX_DIMS &&
         memcmp(a->shape, b->shape, a->ndims * sizeof a->shape[0]) == 0;
}

int hvd__request_equal(const hvd_request *a, const hvd_request *b) {
  return strncmp(a->name, b->name, HVD_NAME_MAX) == 0 && a->type == b->type &&
         a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
         a->count == b->count && same_shape(a, b) && same_double(a->prescale, b->prescale) &&
         same_double(a->postscale, b->postscale) && a->process_set == b->process_set &&
         a->group_size == b->group_size && a->group_index == b->group_index &&
         a->on_device == b->on_device;
}

int hvd__request_has_shape(int type) {
  return type == HVD_REQ_ALLREDUCE || type == HVD_REQ_REDUCESCATTER ||
         type == HVD_REQ_BROADCAST;
}

int hvd__request_has_rows(int type) {
  return type == HVD_REQ_ALLGATHER || type == HVD_REQ_ALLTOALL;
}

int hvd__rows_check(const int64_t *shape, uint32_t ndims, char *why, size_t cap) {
  if (ndims == 0) return 0;
  if (ndims > HVD_MAX_DIMS) {
    snprintf(why, cap, "%u dimensions (0 to %d)", (unsigned)ndims, HVD_MAX_DIMS);
    return -1;
  }
  for (uint32_t d = 0; d < ndims; d++) {
    if (d == 0 ? shape[d] != 0 : shape[d] < 0) {
      snprintf(why, cap, "dimension %u is %lld", (unsigned)d, (long long)shape[d]);
      return -1;
    }
  }
  return 0;
}

int hvd__shape_check(const int64_t *shape, uint32_t ndims, uint64_t count, char *why,
                     size_t cap) {
  uint64_t product = 1;
  if (ndims < 1 || ndims > HVD_MAX_DIMS) {
    snprintf(why, cap, "%u dimensions (1 to %d)", (unsigned)ndims, HVD_MAX_DIMS);
    return -1;
  }
  for (uint32_t d = 0; d < ndims; d++) {
    if (shape[d] < 0) {
      snprintf(why, cap, "dimension %u is %lld", (unsigned)d, (long long)shape[d]);
      return -1;
    }
    if (shape[d] && product > UINT64_MAX / (uint64_t)shape[d]) {
      snprintf(why, cap, "the shape's size overflows");
      return -1;
    }
    product *= (uint64_t)shape[d];
  }
  if (product == count) return 0;
  char text[96];
  hvd__shape_print(shape, ndims, text, sizeof text);
  snprintf(why, cap, "shape %s holds %llu elements, not %llu", text,
           (unsigned long long)product, (unsigned long long)count);
  return -1;
}

void hvd__shape_print(const int64_t *shape, uint32_t ndims, char *out, size_t cap) {
  size_t len = 0;
  if (cap < 8) {
    if (cap) out[0] = '\0';
    return;
  }
  out[len++] = '[';
  for (uint32_t d = 0; d < ndims && d < HVD_MAX_DIMS; d++) {
    char dim[24];
    int n = snprintf(dim, sizeof dim, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (len + (size_t)n + 6 > cap) { /* room for "...]" and the NUL */
      memcpy(out + len, "...", 3);
      len += 3;
      break;
    }
    memcpy(out + len, dim, (size_t)n);
    len += (size_t)n;
  }
  out[len++] = ']';
  out[len] = '\0';
}

/* ---- the fields, in the order they are checked ---- */

#define ALL_TYPES ((1u << HVD_REQ__COUNT) - 1)
#define TYPE_BIT(t) (1u << (t))
#define REDUCING (TYPE_BIT(HVD_REQ_ALLREDUCE) | TYPE_BIT(HVD_REQ_REDUCESCATTER))
#define COUNTED (REDUCING | TYPE_BIT(HVD_REQ_BROADCAST))
/* The collectives that move tensors (barrier and process set changes
 * move none, so their dtype, scales and grouping mean nothing). */
#define ROWS (TYPE_BIT(HVD_REQ_ALLGATHER) | TYPE_BIT(HVD_REQ_ALLTOALL))
#define TENSORS (COUNTED | ROWS)

#define VALUE_MAX 256 /* one printed value (a shape of many dimensions is cut) */

typedef struct {
  const char *words;  /* "counts": the field in the message, plural */
  unsigned types;     /* TYPE_BITs of the collectives that negotiate it */
  int (*same)(const hvd_request *a, const hvd_request *b);
  void (*print)(const hvd_request *r, char *out, size_t cap);
} field;

static int same_type(const hvd_request *a, const hvd_request *b) { return a->type == b->type; }
static int same_dtype(const hvd_request *a, const hvd_request *b) { return a->dtype == b->dtype; }
static int same_count(const hvd_request *a, const hvd_request *b) { return a->count == b->count; }
static int same_op(const hvd_request *a, const hvd_request *b) { return a->op == b->op; }
static int same_root(const hvd_request *a, const hvd_request *b) { return a->root == b->root; }
static int same_set(const hvd_request *a, const hvd_request *b) {
  return a->process_set == b->process_set;
}
static int same_pre(const hvd_request *a, const hvd_request *b) {
  return same_double(a->prescale, b->prescale);
}
static int same_post(const hvd_request *a, const hvd_request *b) {
  return same_double(a->postscale, b->postscale);
}
static int same_group(const hvd_request *a, const hvd_request *b) {
  return a->group_size == b->group_size && a->group_index == b->group_index;
}

static int same_memory(const hvd_request *a, const hvd_request *b) {
  return a->on_device == b->on_device;
}

static void print_type(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "%s", hvd__req_type_name(r->type));
}
static void print_dtype(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "%s", hvd_dtype_name((hvd_dtype)r->dtype));
}
static void print_count(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "%llu", (unsigned long long)r->count);
}
static void print_shape(const hvd_request *r, char *out, size_t cap) {
  hvd__shape_print(r->shape, r->ndims, out, cap);
}
/* "[*, 10, 17]": the first dimension is each rank's own. */
static void print_rows(const hvd_request *r, char *out, size_t cap) {
  if (r->ndims == 0) {
    snprintf(out, cap, "no shape");
    return;
  }
  hvd__shape_print(r->shape, r->ndims, out, cap);
  if (cap > 2 && out[1] == '0') out[1] = '*';
}
static void print_op(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "%s", hvd_op_name((hvd_op)r->op));
}
static void print_root(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "%d", (int)r->root);
}
/* A process set add's root is the hash of its sorted ranks. */
static void print_hash(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "ranks hashing to 0x%08x", (unsigned)(uint32_t)r->root);
}
static void print_set(const hvd_request *r, char *out, size_t cap) {
  snprintf(out, cap, "%d", (int)r->process_set);
}

/* The shortest %g that reads back as the same bits: 0.1 prints "0.1",
 * yet two factors a rounding step apart never print alike. */
static void print_double(double v, char *out, size_t cap) {
  /* Never true; it tells gcc 12, whose UBSan null checks otherwise make up
   * a path with out == NULL, that there is none (-Wformat-truncation). */
  if (!out || cap == 0) return;
  for (int digits = 1; digits < 17; digits++) {
    snprintf(out, cap, "%.*g", digits, v);
    if (same_double(strtod(out, NULL), v)) return;
  }
  snprintf(out, cap, "%.17g", v);
}
static void print_pre(const hvd_request *r, char *out, size_t cap) {
  print_double(r->prescale, out, cap);
}
static void print_post(const hvd_request *r, char *out, size_t cap) {
  print_double(r->postscale, out, cap);
}

static void print_group(const hvd_request *r, char *out, size_t cap) {
  if (r->group_size == 0)
    snprintf(out, cap, "no group");
  else
    snprintf(out, cap, "tensor %u of a group of %u", (unsigned)r->group_index,
             (unsigned)r->group_size);
}

static void print_memory(const hvd_request *r, char *out, size_t cap) {
  static const char *const names[] = {"host memory", "device memory (staged)",
                                      "device memory (NCCL)"};
  snprintf(out, cap, "%s", r->on_device <= HVD_MEM_NCCL ? names[r->on_device] : "?");
}

/* A request field can mean different things to different collectives
 * (root is a broadcast's root rank, a process set's id...): one row per
 * meaning, each for its own collectives. */
static const field fields[] = {
    {"collectives", ALL_TYPES, same_type, print_type},
    {"dtypes", TENSORS, same_dtype, print_dtype},
    {"counts", COUNTED, same_count, print_count},
    {"shapes", COUNTED, same_shape, print_shape},
    {"dimensions after the first", ROWS, same_shape, print_rows},
    {"set sizes", TYPE_BIT(HVD_REQ_PSET_ADD), same_count, print_count},
    {"ops", REDUCING, same_op, print_op},
    {"root ranks", TYPE_BIT(HVD_REQ_BROADCAST), same_root, print_root},
    {"rank lists", TYPE_BIT(HVD_REQ_PSET_ADD), same_root, print_hash},
    {"process set ids", TYPE_BIT(HVD_REQ_PSET_REMOVE), same_root, print_root},
    {"prescale factors", TENSORS, same_pre, print_pre},
    {"postscale factors", TENSORS, same_post, print_post},
    {"process sets", ALL_TYPES, same_set, print_set},
    {"groups", TENSORS, same_group, print_group},
    {"memory", TENSORS, same_memory, print_memory},
};

int hvd__request_moves_tensors(int type) {
  return type >= 0 && type < HVD_REQ__COUNT && (TENSORS & TYPE_BIT(type)) != 0;
}

/* 1 if collectives of this type must agree on the field; an unknown
 * type (never decoded, but cheap to guard) checks every field. */
static int negotiated(const field *f, unsigned type) {
  return type >= HVD_REQ__COUNT || (f->types & TYPE_BIT(type)) != 0;
}

/* ---- the message ---- */

/* Kept well under the 1024-byte error buffer, leaving room for the
 * prefixes the engine and the API add on the way up. */
#define MESSAGE_MAX 900
#define ELLIPSIS "..."

/* Appends whole pieces to buf; the first piece that does not fit (with
 * room left for the ellipsis) is dropped, "..." ends the text and every
 * later append is a no-op. */
typedef struct {
  char buf[MESSAGE_MAX];
  size_t len;
  int full;
} text;

static void append(text *t, const char *fmt, ...) HVD__PRINTF(2, 3);
static void append(text *t, const char *fmt, ...) {
  if (t->full) return;
  size_t room = sizeof t->buf - sizeof ELLIPSIS - t->len;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, room + 1, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n <= room) {
    t->len += (size_t)n;
    return;
  }
  memcpy(t->buf + t->len, ELLIPSIS, sizeof ELLIPSIS);
  t->len += sizeof ELLIPSIS - 1;
  t->full = 1;
}

/* 1 if some request before reqs[i] has its value (so it was printed). */
static int seen_before(const field *f, const hvd_request *const *reqs, int i) {
  for (int j = 0; j < i; j++)
    if (f->same(reqs[j], reqs[i])) return 1;
  return 0;
}

/* One run of ranks, after `lead` ("ranks " before the first, "," later):
 * one piece, so a cut never leaves "rank ..." without a number. */
static void append_run(text *t, const char *lead, int start, int end) {
  if (start == end)
    append(t, "%s%d", lead, start);
  else
    append(t, "%s%d-%d", lead, start, end);
}

/* "rank 3" or "ranks 0-2,5": every rank from i on whose request has
 * reqs[i]'s value, in the caller's order, consecutive ranks as ranges. */
static void append_ranks(text *t, const field *f, const hvd_request *const *reqs,
                         const int *ranks, int i, int n) {
  int members = 0;
  for (int j = i; j < n; j++) members += f->same(reqs[j], reqs[i]);
  const char *lead = members == 1 ? "rank " : "ranks ";

  int start = ranks[i], end = ranks[i]; /* the run being collected */
  for (int j = i + 1; j < n; j++) {
    if (!f->same(reqs[j], reqs[i])) continue;
    if ((long long)ranks[j] == (long long)end + 1) {
      end = ranks[j];
      continue;
    }
    append_run(t, lead, start, end);
    lead = ",";
    start = end = ranks[j];
  }
  append_run(t, lead, start, end);
}

static int mismatch(const field *f, const hvd_request *const *reqs, const int *ranks, int n) {
  text t = {.len = 0};
  int type = reqs[0]->type;
  if (f->same == same_type) /* no one collective to name */
    append(&t, "Mismatched %s for '%s': ", f->words, reqs[0]->name);
  else
    append(&t, "Mismatched %s%s %s for '%s': ", hvd__req_type_name(type),
           hvd__request_moves_tensors(type) ? " tensor" : "", f->words, reqs[0]->name);

  const char *sep = "";
  for (int i = 0; i < n && !t.full; i++) {
    if (seen_before(f, reqs, i)) continue;
    char value[VALUE_MAX];
    f->print(reqs[i], value, sizeof value);
    append(&t, "%s", sep);
    append_ranks(&t, f, reqs, ranks, i, n);
    append(&t, " sent %s", value);
    sep = ", ";
  }
  return hvd__err(HVD_E_MISMATCH, "%s", t.buf);
}

int hvd__requests_check(const hvd_request *const *reqs, const int *ranks, int n) {
  if (n < 2) return 0;
  for (size_t k = 0; k < HVD__ARRAY_LEN(fields); k++) {
    const field *f = &fields[k];
    /* Earlier fields agree, so reqs[0]'s type is everyone's (the type
     * field itself applies to every type). */
    if (!negotiated(f, reqs[0]->type)) continue;
    for (int i = 1; i < n; i++)
      if (!f->same(reqs[0], reqs[i])) return mismatch(f, reqs, ranks, n);
  }
  return 0;
}
