/*
 * read.c -- a timeline file into rp_timeline.
 *
 * The file is Chrome's trace-event JSON array as hvd writes it, one event
 * per line, but any JSON array of event objects reads the same: a small
 * strict JSON scanner keeps the fields the report uses and skips the
 * rest.  Speed matters (a long run leaves hundreds of MB of timelines):
 * the file is read whole, numbers are parsed in place, and strings are
 * decoded only when kept (tensor names).
 *
 * The events become records as they come (apply()): each row (pid) keeps
 * the phases open on it; NEGOTIATE_<OP> opens an operation (rp_occ), the
 * "rank N ready" ticks gather in the row until the negotiation ends, and
 * a collective's "B" events, one per tensor it carried and written one
 * after the other, become one rp_coll.
 *
 * A file a crash cut (an unterminated array, perhaps half an event) is
 * read up to the cut; any other syntax error fails naming the line.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define MAX_DEPTH 64
#define MAX_ARGS 24
#define MAX_OPEN 8 /* phases open on one row at once */

enum { CUT = 1 }; /* the file ended inside a value */

/* A JSON string's raw body, escapes and all. */
typedef struct {
  const char *s;
  size_t n;
} text;

typedef struct {
  text key;
  int is_str;
  text str;
  double num;
} arg;

typedef struct {
  text ph, name;
  double ts, dur;
  long pid;
  arg args[MAX_ARGS];
  int nargs;
} event;

typedef struct {
  const char *p, *end, *base, *path;
} scan;

enum { PH_NEG, PH_MEMCPY, PH_COLL };

typedef struct {
  int tensor; /* -1: not named */
  int open[MAX_OPEN];
  int depth;
  long cur;   /* its latest operation, -1 */
  rp_tick *ticks; /* of cur, until its negotiation ends */
  int nticks, cap;
} row;

typedef struct {
  rp_timeline *t;
  row *rows;
  size_t nrows;
  size_t cap_occ, cap_ticks, cap_colls, cap_waits, cap_names;
  int *map; /* open addressing: name -> index + 1 */
  size_t map_cap;
  long group;      /* the collective whose "B" events are coming in */
  int group_left;  /* rows of it still to come */
} reader;

/* ---- growing arrays ---- */

static int grow(void *pp, size_t *cap, size_t need, size_t elem) {
  void **p = pp;
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return rp_err("out of memory");
  *p = q;
  *cap = c;
  return 0;
}

/* ---- the scanner ---- */

static int line_of(const scan *sc, const char *at) {
  int line = 1;
  for (const char *q = sc->base; q < at; q++) line += *q == '\n';
  return line;
}

static int bad(const scan *sc, const char *what) {
  if (sc->p >= sc->end) return CUT;
  return rp_err("%s:%d: %s", sc->path, line_of(sc, sc->p), what);
}

static void ws(scan *sc) {
  while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\n' || *sc->p == '\t' || *sc->p == '\r'))
    sc->p++;
}

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int str(scan *sc, text *out) {
  const char *p = sc->p + 1; /* past the quote */
  out->s = p;
  for (;;) {
    if (p >= sc->end) return sc->p = p, CUT;
    unsigned char c = (unsigned char)*p;
    if (c == '"') break;
    if (c < 0x20) return sc->p = p, bad(sc, "a control character inside a string");
    if (c != '\\') {
      p++;
      continue;
    }
    if (p + 1 >= sc->end) return sc->p = p + 1, CUT;
    char e = p[1];
    if (e == 'u') {
      for (int i = 2; i < 6; i++) {
        if (p + i >= sc->end) return sc->p = p + i, CUT;
        if (!is_hex(p[i])) return sc->p = p + i, bad(sc, "a bad \\u escape");
      }
      p += 6;
    } else if (strchr("\"\\/bfnrt", e) && e) {
      p += 2;
    } else {
      return sc->p = p, bad(sc, "a bad escape in a string");
    }
  }
  out->n = (size_t)(p - out->s);
  sc->p = p + 1;
  return 0;
}

static const char *digits(const char *p, const char *end) {
  while (p < end && *p >= '0' && *p <= '9') p++;
  return p;
}

/* A JSON number, checked against the grammar; integers without strtod. */
static int num(scan *sc, double *out) {
  const char *s = sc->p, *p = s, *end = sc->end;
  int neg = p < end && *p == '-';
  p += neg;
  if (p >= end) return sc->p = p, CUT;
  if (*p < '0' || *p > '9') return sc->p = p, bad(sc, "a bad number");
  const char *int_end = *p == '0' ? p + 1 : digits(p, end);
  int simple = int_end - p <= 15;
  p = int_end;
  if (p < end && *p == '.') {
    const char *q = digits(p + 1, end);
    if (q == p + 1) return sc->p = q, bad(sc, "a number with nothing after its '.'");
    p = q, simple = 0;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p += p + 1 < end && (p[1] == '+' || p[1] == '-') ? 2 : 1;
    const char *q = digits(p, end);
    if (q == p) return sc->p = q, bad(sc, "a number with a bad exponent");
    p = q, simple = 0;
  }
  if (p >= end) return sc->p = p, CUT; /* it might have gone on */
  if (simple) {
    int64_t v = 0;
    for (const char *q = s + neg; q < int_end; q++) v = v * 10 + (*q - '0');
    *out = neg ? -(double)v : (double)v;
  } else {
    *out = strtod(s, NULL); /* the buffer ends in NUL: strtod stops in time */
  }
  sc->p = p;
  return 0;
}

static int literal(scan *sc) {
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if ((size_t)(sc->end - sc->p) < n) {
      if (memcmp(sc->p, words[i], (size_t)(sc->end - sc->p)) == 0) return sc->p = sc->end, CUT;
      continue;
    }
    if (memcmp(sc->p, words[i], n) == 0) {
      sc->p += n;
      return 0;
    }
  }
  return bad(sc, "an unexpected character");
}

static int skip_value(scan *sc, int depth);

/* The items of an array, skipped. */
static int skip_array(scan *sc, int depth) {
  sc->p++;
  ws(sc);
  if (sc->p < sc->end && *sc->p == ']') return sc->p++, 0;
  for (;;) {
    int rc = skip_value(sc, depth + 1);
    if (rc != 0) return rc;
    ws(sc);
    if (sc->p >= sc->end) return CUT;
    if (*sc->p == ']') return sc->p++, 0;
    if (*sc->p != ',') return bad(sc, "a missing ',' between values");
    sc->p++;
  }
}

/* Calls member(sc, key, ctx) for each member of the object at sc->p; the
 * callback consumes the value. */
typedef int (*member_fn)(scan *sc, text key, void *ctx);
static int object(scan *sc, member_fn member, void *ctx);

static int skip_member(scan *sc, text key, void *ctx) {
  (void)key;
  return skip_value(sc, *(int *)ctx + 1);
}

static int skip_value(scan *sc, int depth) {
  ws(sc);
  if (sc->p >= sc->end) return CUT;
  if (depth > MAX_DEPTH) return bad(sc, "values nested too deep");
  text t;
  double d;
  switch (*sc->p) {
    case '"': return str(sc, &t);
    case '{': return object(sc, skip_member, &depth);
    case '[': return skip_array(sc, depth);
    case 't':
    case 'f':
    case 'n': return literal(sc);
    default: return num(sc, &d);
  }
}

static int is(text t, const char *lit) {
  size_t n = strlen(lit);
  return t.n == n && memcmp(t.s, lit, n) == 0;
}

static int starts(text t, const char *lit) {
  size_t n = strlen(lit);
  return t.n >= n && memcmp(t.s, lit, n) == 0;
}

static int object(scan *sc, member_fn member, void *ctx) {
  sc->p++;
  ws(sc);
  if (sc->p < sc->end && *sc->p == '}') return sc->p++, 0;
  for (;;) {
    int rc;
    text k;
    ws(sc);
    if (sc->p >= sc->end) return CUT;
    if (*sc->p != '"') return bad(sc, "an object key that is not a string");
    if ((rc = str(sc, &k)) != 0) return rc;
    ws(sc);
    if (sc->p >= sc->end) return CUT;
    if (*sc->p != ':') return bad(sc, "a missing ':'");
    sc->p++;
    ws(sc);
    if ((rc = member(sc, k, ctx)) != 0) return rc;
    ws(sc);
    if (sc->p >= sc->end) return CUT;
    if (*sc->p == '}') return sc->p++, 0;
    if (*sc->p != ',') return bad(sc, "a missing ',' between members");
    sc->p++;
  }
}

static int arg_member(scan *sc, text key, void *ctx) {
  event *e = ctx;
  if (e->nargs == MAX_ARGS || (*sc->p != '"' && *sc->p != '-' && (*sc->p < '0' || *sc->p > '9')))
    return skip_value(sc, 2);
  arg *a = &e->args[e->nargs++];
  a->key = key;
  a->is_str = *sc->p == '"';
  return a->is_str ? str(sc, &a->str) : num(sc, &a->num);
}

/* A string member, or anything else skipped (left empty). */
static int want_str(scan *sc, text *out) {
  if (*sc->p == '"') return str(sc, out);
  return skip_value(sc, 1);
}

static int want_num(scan *sc, double *out) {
  if (*sc->p == '-' || (*sc->p >= '0' && *sc->p <= '9')) return num(sc, out);
  return skip_value(sc, 1);
}

static int event_member(scan *sc, text key, void *ctx) {
  event *e = ctx;
  double pid;
  int rc;
  if (is(key, "ph")) return want_str(sc, &e->ph);
  if (is(key, "name")) return want_str(sc, &e->name);
  if (is(key, "ts")) return want_num(sc, &e->ts);
  if (is(key, "dur")) return want_num(sc, &e->dur);
  if (is(key, "pid")) {
    pid = -1;
    if ((rc = want_num(sc, &pid)) == 0) e->pid = pid >= 0 && pid < 1e7 ? (long)pid : -1;
    return rc;
  }
  if (is(key, "args") && *sc->p == '{') return object(sc, arg_member, e);
  return skip_value(sc, 1);
}

/* ---- strings kept: tensor names ---- */

static unsigned hex4(const char *p) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v = v << 4 | (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

static size_t put_utf8(char *d, unsigned cp) {
  if (cp < 0x80) return d[0] = (char)cp, 1;
  if (cp < 0x800) return d[0] = (char)(0xc0 | cp >> 6), d[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000) {
    d[0] = (char)(0xe0 | cp >> 12);
    d[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    d[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  d[0] = (char)(0xf0 | cp >> 18);
  d[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  d[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  d[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* The string's bytes, escapes decoded (the scanner checked them). */
static char *decode(text t) {
  char *out = malloc(t.n + 1), *d = out;
  if (!out) return NULL;
  for (size_t i = 0; i < t.n; i++) {
    if (t.s[i] != '\\') {
      *d++ = t.s[i];
      continue;
    }
    char e = t.s[++i];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    if (e != 'u') {
      *d++ = to[strchr(from, e) - from];
      continue;
    }
    unsigned cp = hex4(t.s + i + 1);
    i += 4;
    if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < t.n && t.s[i + 1] == '\\' && t.s[i + 2] == 'u') {
      unsigned lo = hex4(t.s + i + 3);
      if (lo >= 0xdc00 && lo < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00), i += 6;
    }
    d += put_utf8(d, cp);
  }
  *d = '\0';
  return out;
}

/* ---- events into records ---- */

const char *rp_op_name(int op) {
  static const char *const names[] = {"allreduce", "broadcast", "allgather", "alltoall",
                                      "reducescatter", "other"};
  return op >= 0 && op < RP__NOPS ? names[op] : "other";
}

static int op_of(text t) {
  static const char *const names[] = {"ALLREDUCE", "BROADCAST", "ALLGATHER", "ALLTOALL",
                                      "REDUCESCATTER"};
  for (int i = 0; i < 5; i++)
    if (is(t, names[i])) return i;
  return RP_OTHER_OP;
}

static const arg *arg_of(const event *e, const char *key) {
  for (int i = 0; i < e->nargs; i++)
    if (is(e->args[i].key, key)) return &e->args[i];
  return NULL;
}

static double arg_num(const event *e, const char *key, double dflt) {
  const arg *a = arg_of(e, key);
  return a && !a->is_str ? a->num : dflt;
}

static void arg_str(const event *e, const char *key, char *buf, size_t cap) {
  const arg *a = arg_of(e, key);
  size_t n = a && a->is_str ? (a->str.n < cap ? a->str.n : cap - 1) : 0;
  memcpy(buf, n ? a->str.s : "", n);
  buf[n] = '\0';
}

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

static int rehash(reader *rd) {
  size_t cap = rd->map_cap ? 2 * rd->map_cap : 256;
  int *map = calloc(cap, sizeof *map);
  if (!map) return rp_err("out of memory");
  for (int i = 0; i < rd->t->nnames; i++) {
    size_t h = (size_t)hash(rd->t->names[i]) & (cap - 1);
    while (map[h]) h = (h + 1) & (cap - 1);
    map[h] = i + 1;
  }
  free(rd->map);
  rd->map = map;
  rd->map_cap = cap;
  return 0;
}

/* The index of tensor name (taken over), adding it on first sight. */
static int intern(reader *rd, char *name) {
  rp_timeline *t = rd->t;
  if (2 * ((size_t)t->nnames + 1) > rd->map_cap && rehash(rd) < 0) return free(name), -1;
  size_t h = (size_t)hash(name) & (rd->map_cap - 1);
  for (; rd->map[h]; h = (h + 1) & (rd->map_cap - 1))
    if (strcmp(t->names[rd->map[h] - 1], name) == 0) return free(name), rd->map[h] - 1;
  if (grow(&t->names, &rd->cap_names, (size_t)t->nnames + 1, sizeof *t->names) < 0)
    return free(name), -1;
  t->names[t->nnames] = name;
  rd->map[h] = ++t->nnames;
  return t->nnames - 1;
}

static row *row_of(reader *rd, long pid) {
  if (pid < 0) return NULL;
  if ((size_t)pid >= rd->nrows) {
    size_t n = rd->nrows ? rd->nrows : 64;
    while (n <= (size_t)pid) n *= 2;
    row *rows = realloc(rd->rows, n * sizeof *rows);
    if (!rows) return rp_err("out of memory"), NULL;
    for (size_t i = rd->nrows; i < n; i++) rows[i] = (row){.tensor = -1, .cur = -1};
    rd->rows = rows;
    rd->nrows = n;
  }
  return &rd->rows[pid];
}

/* The ticks gathered for r's operation become its own. */
static int settle_ticks(reader *rd, row *r) {
  rp_timeline *t = rd->t;
  if (r->cur < 0 || r->nticks == 0) return 0;
  if (grow(&t->ticks, &rd->cap_ticks, t->nticks + (size_t)r->nticks, sizeof *t->ticks) < 0)
    return -1;
  memcpy(t->ticks + t->nticks, r->ticks, (size_t)r->nticks * sizeof *r->ticks);
  t->occ[r->cur].tick0 = t->nticks;
  t->occ[r->cur].nticks = r->nticks;
  t->nticks += (size_t)r->nticks;
  r->nticks = 0;
  return 0;
}

static int on_metadata(reader *rd, const event *e) {
  rp_timeline *t = rd->t;
  if (is(e->name, "process_name")) {
    const arg *a = arg_of(e, "name");
    row *r = row_of(rd, e->pid);
    if (!a || !a->is_str || !r) return r ? 0 : -1;
    char *name = decode(a->str);
    if (!name) return rp_err("out of memory");
    return (r->tensor = intern(rd, name)) < 0 ? -1 : 0;
  }
  if (is(e->name, "hvd_job")) {
    rp_job *j = &t->job;
    t->has_job = 1;
    j->rank = (int)arg_num(e, "rank", -1);
    j->size = (int)arg_num(e, "size", -1);
    j->local_size = (int)arg_num(e, "local_size", -1);
    j->cross_size = (int)arg_num(e, "cross_size", -1);
    j->fusion_threshold = arg_num(e, "fusion_threshold", -1);
    j->cycle_ms = arg_num(e, "cycle_time_ms", -1);
    arg_str(e, "transport", j->transport, sizeof j->transport);
  } else if (is(e->name, "hvd_end")) {
    t->ended = 1;
  } else if (is(e->name, "hvd_truncated")) {
    t->truncated = 1;
    t->max_bytes = arg_num(e, "max_bytes", -1);
  }
  return 0;
}

static int begin_negotiation(reader *rd, row *r, const event *e) {
  rp_timeline *t = rd->t;
  if (settle_ticks(rd, r) < 0 || grow(&t->occ, &rd->cap_occ, t->nocc + 1, sizeof *t->occ) < 0)
    return -1;
  text op = {e->name.s + 10, e->name.n - 10}; /* after "NEGOTIATE_" */
  t->occ[t->nocc] = (rp_occ){.tensor = r->tensor, .op = op_of(op), .neg_begin = e->ts,
                             .neg_end = -1, .cycle = -1, .own_ready = -1, .coll = -1};
  r->cur = (long)t->nocc++;
  return 0;
}

/* A collective's "B" on one of its rows: the first starts an rp_coll,
 * the rest (written right after it, same args) join it. */
static int begin_collective(reader *rd, row *r, const event *e) {
  rp_timeline *t = rd->t;
  int tensors = (int)arg_num(e, "tensors", 1);
  double bytes = arg_num(e, "bytes", -1);
  int op = op_of(e->name);
  rp_coll *g = rd->group_left > 0 ? &t->colls[rd->group] : NULL;
  if (g && g->op == op && g->tensors == tensors && g->bytes == bytes) {
    rd->group_left--;
  } else {
    if (grow(&t->colls, &rd->cap_colls, t->ncolls + 1, sizeof *t->colls) < 0) return -1;
    g = &t->colls[t->ncolls];
    *g = (rp_coll){.op = op, .tensors = tensors < 1 ? 1 : tensors, .bytes = bytes,
                   .begin = e->ts, .end = -1, .planned = e->ts};
    arg_str(e, "dtype", g->dtype, sizeof g->dtype);
    if (r->cur >= 0 && t->occ[r->cur].neg_end >= 0) g->planned = t->occ[r->cur].neg_end;
    rd->group = (long)t->ncolls++;
    rd->group_left = g->tensors - 1;
  }
  if (r->cur >= 0 && t->occ[r->cur].coll < 0) t->occ[r->cur].coll = rd->group;
  return 0;
}

static int on_begin(reader *rd, row *r, const event *e) {
  int phase = starts(e->name, "NEGOTIATE_")             ? PH_NEG
              : is(e->name, "MEMCPY_IN_FUSION_BUFFER") ? PH_MEMCPY
                                                        : PH_COLL;
  if (r->depth < MAX_OPEN) r->open[r->depth] = phase;
  r->depth++;
  if (phase == PH_NEG) return begin_negotiation(rd, r, e);
  if (phase == PH_COLL) return begin_collective(rd, r, e);
  return 0;
}

static int on_end(reader *rd, row *r, const event *e) {
  rp_timeline *t = rd->t;
  if (r->depth == 0) return 0; /* an end without its begin: nothing to close */
  int phase = --r->depth < MAX_OPEN ? r->open[r->depth] : PH_MEMCPY;
  if (r->cur < 0) return 0;
  rp_occ *o = &t->occ[r->cur];
  if (phase == PH_NEG) {
    double cycle = arg_num(e, "cycle", -1);
    o->neg_end = e->ts;
    o->cycle = cycle >= 0 && cycle < 9e18 ? (long)cycle : -1;
    return settle_ticks(rd, r);
  }
  if (phase == PH_COLL && o->coll >= 0 && e->ts > t->colls[o->coll].end)
    t->colls[o->coll].end = e->ts;
  return 0;
}

/* "rank N ready": N's tick on the row's operation. */
static int on_ready(reader *rd, row *r, const event *e) {
  const char *p = e->name.s + 5, *end = e->name.s + e->name.n;
  long rank = 0;
  if (r->cur < 0 || p >= end || *p < '0' || *p > '9') return 0;
  for (; p < end && *p >= '0' && *p <= '9' && rank < 1000000; p++) rank = rank * 10 + (*p - '0');
  if (r->nticks == r->cap) {
    int cap = r->cap ? 2 * r->cap : 8;
    rp_tick *ticks = realloc(r->ticks, (size_t)cap * sizeof *ticks);
    if (!ticks) return rp_err("out of memory");
    r->ticks = ticks;
    r->cap = cap;
  }
  r->ticks[r->nticks++] = (rp_tick){(int)rank, e->ts};
  rp_occ *o = &rd->t->occ[r->cur];
  if (rd->t->has_job && rank == rd->t->job.rank && o->own_ready < 0) o->own_ready = e->ts;
  return 0;
}

static int apply(reader *rd, const event *e) {
  rp_timeline *t = rd->t;
  if (e->ph.n != 1) return 0;
  char ph = e->ph.s[0];
  if (ph != 'B') rd->group_left = 0; /* a collective's "B" events come together */
  if (ph == 'M') return on_metadata(rd, e);
  if (e->ts > t->last_ts) t->last_ts = e->ts;
  if (ph == 'X') {
    if (!is(e->name, "WAIT") || e->dur < 0) return 0;
    if (grow(&t->waits, &rd->cap_waits, t->nwaits + 1, sizeof *t->waits) < 0) return -1;
    t->waits[t->nwaits++] = (rp_span){e->ts, e->ts + e->dur};
    return 0;
  }
  if ((ph == 'i' || ph == 'I') && is(e->name, "CYCLE_START")) return t->cycles++, 0;
  row *r = row_of(rd, e->pid);
  if (!r) return e->pid < 0 ? 0 : -1;
  switch (ph) {
    case 'B': return on_begin(rd, r, e);
    case 'E': return on_end(rd, r, e);
    case 'i':
    case 'I': return starts(e->name, "rank ") ? on_ready(rd, r, e) : 0;
    default: return 0;
  }
}

/* One event object at sc->p into the records. */
static int read_event(scan *sc, reader *rd) {
  event e;
  memset(&e, 0, sizeof e);
  e.pid = -1;
  int rc = object(sc, event_member, &e);
  return rc != 0 ? rc : apply(rd, &e);
}

static int read_array(scan *sc, reader *rd) {
  ws(sc);
  if (sc->p >= sc->end) return rp_err("%s: empty file", sc->path);
  if (*sc->p != '[') return bad(sc, "not a JSON array of trace events (no '[')");
  sc->p++;
  for (;;) {
    ws(sc);
    if (sc->p >= sc->end) return CUT; /* unterminated: a crash */
    if (*sc->p == ']') break;
    if (*sc->p != '{') return bad(sc, "an array item that is not an event object");
    int rc = read_event(sc, rd);
    if (rc != 0) return rc;
    ws(sc);
    if (sc->p < sc->end && *sc->p == ',') {
      sc->p++;
      continue;
    }
    if (sc->p < sc->end && *sc->p != ']') return bad(sc, "a missing ',' between events");
  }
  sc->p++;
  ws(sc);
  return sc->p < sc->end ? bad(sc, "text after the array") : 0;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return rp_err("%s: %s", path, strerror(errno)), NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (cap - n < 65536) {
      cap = cap ? 2 * cap : 1 << 20;
      char *b = realloc(buf, cap + 1);
      if (!b) {
        free(buf);
        fclose(f);
        return rp_err("%s: out of memory", path), NULL;
      }
      buf = b;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) return free(buf), rp_err("%s: read error", path), NULL;
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int by_begin(const void *a, const void *b) {
  double x = ((const rp_span *)a)->begin, y = ((const rp_span *)b)->begin;
  return (x > y) - (x < y);
}

int rp_read(const char *path, rp_timeline *t) {
  memset(t, 0, sizeof *t);
  t->job = (rp_job){-1, -1, -1, -1, -1, -1, ""};
  t->path = strdup(path);
  size_t len = 0;
  char *buf = t->path ? slurp(path, &len) : NULL;
  if (!buf) return t->path ? -1 : rp_err("out of memory");
  t->file_bytes = len;
  reader rd = {.t = t};
  scan sc = {buf, buf + len, buf, path};
  int rc = read_array(&sc, &rd);
  if (rc == CUT) {
    t->cut_mid_event = 1; /* an unterminated array; perhaps half an event */
    rc = 0;
  }
  for (size_t i = 0; rc == 0 && i < rd.nrows; i++) rc = settle_ticks(&rd, &rd.rows[i]);
  for (size_t i = 0; i < rd.nrows; i++) free(rd.rows[i].ticks);
  free(rd.rows);
  free(rd.map);
  free(buf);
  if (rc == 0 && t->nwaits > 1) qsort(t->waits, t->nwaits, sizeof *t->waits, by_begin);
  return rc < 0 ? -1 : 0;
}

void rp_timeline_free(rp_timeline *t) {
  for (int i = 0; i < t->nnames; i++) free(t->names[i]);
  free(t->names);
  free(t->occ);
  free(t->ticks);
  free(t->colls);
  free(t->waits);
  free(t->path);
  memset(t, 0, sizeof *t);
}
