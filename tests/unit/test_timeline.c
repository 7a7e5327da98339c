/*
 * test_timeline.c -- the timeline file: valid JSON when closed, a valid
 * prefix when the process dies, one named row per tensor, balanced
 * phases, names escaped, write errors that stop tracing with one warning;
 * the per-rank path forms (%r, a directory), the size bound that ends the
 * file as complete JSON, the job's settings and the waits row.
 *
 * The file is read back with a small JSON parser written here, strict as
 * the grammar (RFC 8259), so escaping mistakes cannot hide behind a
 * lenient library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "engine/timeline.h"

/* ---- A strict JSON parser into a small tree ---- */

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jval {
  enum jtype type;
  double num;
  int is_int;          /* J_NUM without fraction or exponent */
  char *str;           /* J_STR: the decoded bytes */
  size_t n;            /* J_ARR, J_OBJ: how many items */
  char **keys;         /* J_OBJ: decoded keys */
  struct jval *items;  /* J_ARR, J_OBJ: the values */
} jval;

typedef struct {
  const char *p, *end;
  int depth;
} jparser;

#define JSON_MAX_DEPTH 64

static int parse_value(jparser *j, jval *v);

static void skip_ws(jparser *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static int hex4(jparser *j, unsigned *out) {
  if (j->end - j->p < 4) return -1;
  *out = 0;
  for (int i = 0; i < 4; i++) {
    char c = *j->p++;
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
               : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
               : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
    if (d == 16) return -1;
    *out = *out << 4 | d;
  }
  return 0;
}

static size_t put_utf8(char *dst, unsigned cp) {
  if (cp < 0x80) { dst[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    dst[0] = (char)(0xc0 | cp >> 6);
    dst[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    dst[0] = (char)(0xe0 | cp >> 12);
    dst[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    dst[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  dst[0] = (char)(0xf0 | cp >> 18);
  dst[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  dst[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  dst[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* \uXXXX, with a surrogate pair joined into one code point. */
static int parse_unicode(jparser *j, unsigned *cp) {
  if (hex4(j, cp) < 0) return -1;
  if (*cp >= 0xdc00 && *cp <= 0xdfff) return -1;
  if (*cp < 0xd800 || *cp > 0xdbff) return 0;
  unsigned lo;
  if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') return -1;
  j->p += 2;
  if (hex4(j, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) return -1;
  *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
  return 0;
}

static int parse_string(jparser *j, char **out) {
  if (j->p >= j->end || *j->p != '"') return -1;
  j->p++;
  /* Decoding never lengthens: every escape is at least as long as its
   * bytes, so the raw span up to the closing quote is room enough. */
  const char *q = j->p;
  while (q < j->end && *q != '"') q += *q == '\\' ? 2 : 1;
  char *s = malloc((size_t)(q - j->p) + 1);
  size_t n = 0;
  assert_non_null(s);
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p++;
    if (c < 0x20) goto bad; /* raw control characters are not JSON */
    if (c != '\\') {
      s[n++] = (char)c;
      continue;
    }
    if (j->p >= j->end) goto bad;
    unsigned cp;
    switch (*j->p++) {
      case '"': s[n++] = '"'; break;
      case '\\': s[n++] = '\\'; break;
      case '/': s[n++] = '/'; break;
      case 'b': s[n++] = '\b'; break;
      case 'f': s[n++] = '\f'; break;
      case 'n': s[n++] = '\n'; break;
      case 'r': s[n++] = '\r'; break;
      case 't': s[n++] = '\t'; break;
      case 'u':
        if (parse_unicode(j, &cp) < 0) goto bad;
        n += put_utf8(s + n, cp);
        break;
      default: goto bad;
    }
  }
  if (j->p >= j->end) goto bad;
  j->p++;
  s[n] = '\0';
  *out = s;
  return 0;
bad:
  free(s);
  return -1;
}

static int digits(jparser *j) {
  const char *start = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  return j->p > start ? 0 : -1;
}

static int parse_number(jparser *j, jval *v) {
  const char *start = j->p;
  v->type = J_NUM;
  v->is_int = 1;
  if (j->p < j->end && *j->p == '-') j->p++;
  if (j->p < j->end && *j->p == '0')
    j->p++;
  else if (digits(j) < 0)
    return -1;
  if (j->p < j->end && *j->p == '.') {
    j->p++;
    v->is_int = 0;
    if (digits(j) < 0) return -1;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    v->is_int = 0;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    if (digits(j) < 0) return -1;
  }
  char tmp[64];
  size_t len = (size_t)(j->p - start);
  if (len >= sizeof tmp) return -1;
  memcpy(tmp, start, len);
  tmp[len] = '\0';
  v->num = strtod(tmp, NULL);
  return 0;
}

static int parse_literal(jparser *j, const char *word, enum jtype type, jval *v) {
  size_t n = strlen(word);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return -1;
  j->p += n;
  v->type = type;
  return 0;
}

/* The items of an array or object, between open and close: values, each
 * preceded by a "key": when keyed. */
static int parse_items(jparser *j, jval *v, char close, int keyed) {
  j->p++;
  skip_ws(j);
  if (j->p < j->end && *j->p == close) {
    j->p++;
    return 0;
  }
  for (;;) {
    v->items = realloc(v->items, (v->n + 1) * sizeof *v->items);
    assert_non_null(v->items);
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (keyed) {
      v->keys = realloc(v->keys, (v->n + 1) * sizeof *v->keys);
      assert_non_null(v->keys);
      v->keys[v->n] = NULL;
    }
    v->n++;
    skip_ws(j);
    if (keyed) {
      if (parse_string(j, &v->keys[v->n - 1]) < 0) return -1;
      skip_ws(j);
      if (j->p >= j->end || *j->p++ != ':') return -1;
    }
    if (parse_value(j, &v->items[v->n - 1]) < 0) return -1;
    skip_ws(j);
    if (j->p >= j->end) return -1;
    char c = *j->p++;
    if (c == close) return 0;
    if (c != ',') return -1;
  }
}

static int parse_value(jparser *j, jval *v) {
  memset(v, 0, sizeof *v);
  skip_ws(j);
  if (j->p >= j->end) return -1;
  int rc;
  switch (*j->p) {
    case '{':
    case '[':
      if (++j->depth > JSON_MAX_DEPTH) return -1;
      v->type = *j->p == '{' ? J_OBJ : J_ARR;
      rc = parse_items(j, v, v->type == J_OBJ ? '}' : ']', v->type == J_OBJ);
      j->depth--;
      return rc;
    case '"': v->type = J_STR; return parse_string(j, &v->str);
    case 't': return parse_literal(j, "true", J_TRUE, v);
    case 'f': return parse_literal(j, "false", J_FALSE, v);
    case 'n': return parse_literal(j, "null", J_NULL, v);
    default: return parse_number(j, v);
  }
}

static void json_free(jval *v) {
  free(v->str);
  for (size_t i = 0; i < v->n; i++) {
    json_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
}

/* Parses all of text as one JSON value; -1 (v freed) if it is not. */
static int json_parse(const char *text, size_t len, jval *v) {
  jparser j = {text, text + len, 0};
  if (parse_value(&j, v) == 0) {
    skip_ws(&j);
    if (j.p == j.end) return 0;
  }
  json_free(v);
  return -1;
}

static const jval *json_get(const jval *obj, const char *key) {
  if (obj->type != J_OBJ) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
  return NULL;
}

static const char *json_str(const jval *obj, const char *key) {
  const jval *v = json_get(obj, key);
  return v != NULL && v->type == J_STR ? v->str : NULL;
}

/* An integer member; fails the test if it is missing or not an integer. */
static long json_int(const jval *obj, const char *key) {
  const jval *v = json_get(obj, key);
  assert_non_null(v);
  assert_int_equal(v->type, J_NUM);
  assert_true(v->is_int);
  return (long)v->num;
}

static int json_accepts(const char *text) {
  jval v;
  if (json_parse(text, strlen(text), &v) < 0) return 0;
  json_free(&v);
  return 1;
}

/* The parser is the judge, so first it is judged. */
static void test_json_parser(void **state) {
  (void)state;
  static const char *good[] = {
      "[]", " {} ", "[1,-0,2.5e+3,0.1,true,false,null]", "{\"a\":{\"b\":[\"\\u00e9\\\"\\\\\\n\"]}}",
      "\"\\ud83d\\ude00\"", "[\"\xc3\xa9\"]",
  };
  static const char *bad[] = {
      "", "[", "[1,]", "{\"a\"1}", "{\"a\":1,}", "[01]", "[1.]", "[.5]", "[\"\x01\"]", "[\"\\x\"]",
      "[\"\\u00g0\"]", "[\"\\udc00\"]", "[tru]", "[1] [2]", "{1:2}", "[\"abc]", "[-]",
  };
  for (size_t i = 0; i < HVD__ARRAY_LEN(good); i++) assert_true(json_accepts(good[i]));
  for (size_t i = 0; i < HVD__ARRAY_LEN(bad); i++) assert_false(json_accepts(bad[i]));
  char deep[2 * JSON_MAX_DEPTH + 8];
  memset(deep, '[', JSON_MAX_DEPTH + 1);
  memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
  deep[2 * JSON_MAX_DEPTH + 2] = '\0';
  assert_false(json_accepts(deep));
}

/* ---- Reading a timeline back ---- */

#define MAX_ROWS 2048

/* What a timeline says, after check_trace has verified its structure. */
typedef struct {
  jval root;
  int nrows;
  const char *names[MAX_ROWS + 1]; /* by pid */
  int depth[MAX_ROWS + 1];         /* open phases by pid */
  int nbegin, nend, ninstant, nwaits;
  const jval *job, *end, *truncated; /* hvd_job, hvd_end, hvd_truncated's args */
} trace;

static char tmpdir[64];

static char *temp_path(const char *name) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return path;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *text = NULL;
  size_t cap = 0;
  *len = 0;
  for (;;) {
    if (cap - *len < 4096) {
      cap = cap ? 2 * cap : 65536;
      text = realloc(text, cap + 2); /* room for "]" and a NUL */
      assert_non_null(text);
    }
    size_t n = fread(text + *len, 1, cap - *len, f);
    *len += n;
    if (n == 0) break;
  }
  fclose(f);
  text[*len] = '\0';
  return text;
}

/* The file's lines: "[", events each ending in ",", and, once closed, one
 * last event without it and "]". */
static void check_lines(const char *text, int closed) {
  assert_memory_equal(text, "[\n", 2);
  const char *line = text + 2, *nl;
  int last_event = 0;
  while ((nl = strchr(line, '\n')) != NULL) {
    size_t n = (size_t)(nl - line);
    if (closed && n == 1 && line[0] == ']') {
      assert_string_equal(nl + 1, "");
      return;
    }
    assert_false(last_event);
    assert_true(n >= 2 && line[0] == '{');
    if (line[n - 1] != ',') {
      assert_true(closed);
      assert_int_equal(line[n - 1], '}');
      last_event = 1;
    } else {
      assert_int_equal(line[n - 2], '}');
    }
    line = nl + 1;
  }
  assert_false(closed); /* a closed file ends in "]\n" */
  assert_string_equal(line, "");
}

/* hvd's own metadata, on pid 0 which no row uses; each at most once. */
static void check_hvd_metadata(trace *t, const char *what, const jval *args) {
  const jval **slot = strcmp(what, "hvd_job") == 0 ? &t->job
                      : strcmp(what, "hvd_end") == 0 ? &t->end
                      : strcmp(what, "hvd_truncated") == 0 ? &t->truncated : NULL;
  if (slot == NULL) fail_msg("unexpected metadata %s on pid 0", what);
  assert_null(*slot);
  *slot = args;
  if (slot != &t->job) assert_true(json_int(args, "ts") >= 0);
}

static void check_metadata(trace *t, const jval *e) {
  const char *what = json_str(e, "name");
  long pid = json_int(e, "pid");
  const jval *args = json_get(e, "args");
  assert_non_null(what);
  assert_non_null(args);
  if (pid == 0) {
    check_hvd_metadata(t, what, args);
    return;
  }
  if (strcmp(what, "process_sort_index") == 0) {
    assert_true(pid >= 1 && pid <= t->nrows);
    assert_int_equal(json_int(args, "sort_index"), pid);
    return;
  }
  assert_string_equal(what, "process_name");
  /* Rows are numbered in order of first appearance, one per name. */
  assert_int_equal(pid, t->nrows + 1);
  assert_true(pid <= MAX_ROWS);
  const char *name = json_str(args, "name");
  assert_non_null(name);
  for (int i = 1; i <= t->nrows; i++) assert_string_not_equal(t->names[i], name);
  t->names[++t->nrows] = name;
}

static void check_event(trace *t, const jval *e, long *last_ts) {
  const char *ph = json_str(e, "ph");
  long pid = json_int(e, "pid"), ts = json_int(e, "ts");
  assert_true(pid >= 1 && pid <= t->nrows); /* on a row named before */
  assert_int_equal(json_int(e, "tid"), pid);
  if (ph[0] == 'X') { /* waits are written after the fact, on their own row */
    assert_string_equal(json_str(e, "name"), "WAIT");
    assert_string_equal(t->names[pid], "waits");
    assert_true(ts >= 0 && json_int(e, "dur") >= 0);
    t->nwaits++;
    return;
  }
  assert_true(ts >= *last_ts);
  *last_ts = ts;
  switch (ph[0]) {
    case 'B':
      assert_non_null(json_str(e, "name"));
      t->depth[pid]++;
      t->nbegin++;
      break;
    case 'E':
      assert_true(t->depth[pid] > 0);
      t->depth[pid]--;
      t->nend++;
      break;
    case 'i':
      assert_non_null(json_str(e, "name"));
      assert_string_equal(json_str(e, "s"), "p");
      t->ninstant++;
      break;
    default: fail_msg("unexpected event phase %s", ph);
  }
}

/* Parses text as a trace and checks every event: metadata names each row
 * before it is used, B/E never close what is not open, timestamps are
 * integers that never go back. */
static void check_trace(trace *t, const char *text, size_t len) {
  memset(t, 0, sizeof *t);
  if (json_parse(text, len, &t->root) < 0) fail_msg("not JSON:\n%s", text);
  assert_int_equal(t->root.type, J_ARR);
  long last_ts = 0;
  for (size_t i = 0; i < t->root.n; i++) {
    const jval *e = &t->root.items[i];
    const char *ph = json_str(e, "ph");
    assert_non_null(ph);
    assert_int_equal(strlen(ph), 1);
    if (ph[0] == 'M')
      check_metadata(t, e);
    else
      check_event(t, e, &last_ts);
  }
}

/* Reads a closed timeline: valid JSON, line by line as promised. */
static void read_closed(trace *t, const char *path) {
  size_t len;
  char *text = read_file(path, &len);
  check_lines(text, 1);
  check_trace(t, text, len);
  free(text);
}

/* Reads a timeline still open (or left by a crash): a prefix that becomes
 * valid JSON once its final "," is replaced by "]". */
static void read_unclosed(trace *t, const char *path) {
  size_t len;
  char *text = read_file(path, &len);
  check_lines(text, 0);
  while (len > 0 && text[len - 1] == '\n') len--;
  if (text[len - 1] == ',') len--;
  text[len++] = ']';
  text[len] = '\0';
  check_trace(t, text, len);
  free(text);
}

static int row_named(const trace *t, const char *name) {
  for (int pid = 1; pid <= t->nrows; pid++)
    if (strcmp(t->names[pid], name) == 0) return pid;
  return 0;
}

/* The first B event named phase, or NULL. */
static const jval *find_begin(const trace *t, const char *phase) {
  for (size_t i = 0; i < t->root.n; i++) {
    const jval *e = &t->root.items[i];
    if (strcmp(json_str(e, "ph"), "B") == 0 && strcmp(json_str(e, "name"), phase) == 0) return e;
  }
  return NULL;
}

/* Opens with a bound far beyond what a test writes. */
static int open_tl(const char *path, int mark_cycles, hvd_timeline **tl) {
  hvd_timeline_opts o = {mark_cycles, 1u << 30};
  return hvd__timeline_open(path, &o, tl);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* ---- Tests ---- */

/* Quotes, backslash, newline, control bytes, DEL and UTF-8 (é). */
static const char weird[] = "a\"b\\c\nd\x01\x1f\x7f \xc3\xa9/";

static void test_closed_trace(void **state) {
  (void)state;
  const char *path = temp_path("closed.json");
  hvd_timeline *tl;
  assert_int_equal(open_tl(path, 1, &tl), 0);
  const char *tensors[] = {"grad/0", weird, "grad/1"};
  hvd__timeline_cycle(tl);
  for (int i = 0; i < 3; i++) {
    hvd__timeline_begin(tl, tensors[i], "NEGOTIATE_ALLREDUCE", NULL);
    hvd__timeline_instant(tl, tensors[i], "rank 0 ready");
    hvd__timeline_instant(tl, tensors[i], "rank \"1\"\tready");
  }
  hvd__timeline_cycle(tl);
  for (int i = 0; i < 3; i++) {
    hvd__timeline_end(tl, tensors[i]);
    hvd__timeline_begin(tl, tensors[i], "ALLREDUCE", "{\"fused\":3}");
    hvd__timeline_begin(tl, tensors[i], weird, NULL); /* a nested phase */
    hvd__timeline_end(tl, tensors[i]);
    hvd__timeline_end(tl, tensors[i]);
  }
  hvd__timeline_tick(tl);
  hvd__timeline_close(tl);

  trace t;
  read_closed(&t, path);
  assert_int_equal(t.nrows, 4);
  assert_string_equal(t.names[1], "cycles");
  assert_string_equal(t.names[2], "grad/0");
  assert_string_equal(t.names[3], weird);
  assert_string_equal(t.names[4], "grad/1");
  for (int pid = 1; pid <= t.nrows; pid++) assert_int_equal(t.depth[pid], 0);
  assert_int_equal(t.nbegin, 9);
  assert_int_equal(t.nend, 9);
  assert_int_equal(t.ninstant, 2 + 6);
  const jval *allreduce = find_begin(&t, "ALLREDUCE");
  assert_non_null(allreduce);
  assert_int_equal(json_int(json_get(allreduce, "args"), "fused"), 3);
  assert_non_null(find_begin(&t, weird));
  assert_non_null(t.end); /* closed on purpose, and when */
  assert_null(t.truncated);
  json_free(&t.root);
  unlink(path);
}

static void test_no_cycle_row_without_marks(void **state) {
  (void)state;
  const char *path = temp_path("nomarks.json");
  hvd_timeline *tl;
  assert_int_equal(open_tl(path, 0, &tl), 0);
  hvd__timeline_cycle(tl);
  hvd__timeline_begin(tl, "w", "BROADCAST", NULL);
  hvd__timeline_end(tl, "w");
  hvd__timeline_close(tl);
  trace t;
  read_closed(&t, path);
  assert_int_equal(t.nrows, 1);
  assert_string_equal(t.names[1], "w");
  assert_int_equal(t.ninstant, 0);
  json_free(&t.root);
  unlink(path);
}

static void test_empty_trace(void **state) {
  (void)state;
  const char *path = temp_path("empty.json");
  hvd_timeline *tl;
  assert_int_equal(open_tl(path, 0, &tl), 0);
  hvd__timeline_close(tl);
  size_t len;
  char *text = read_file(path, &len);
  assert_string_equal(text, "[\n]\n");
  free(text);
  unlink(path);
}

/* Many rows: the name map grows and still finds every tensor's row. */
static void test_many_tensors(void **state) {
  (void)state;
  const char *path = temp_path("many.json");
  enum { N = 1000 };
  char name[32];
  hvd_timeline *tl;
  assert_int_equal(open_tl(path, 0, &tl), 0);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "layer%d.weight", i);
    hvd__timeline_begin(tl, name, "ALLREDUCE", NULL);
  }
  for (int i = N - 1; i >= 0; i--) {
    snprintf(name, sizeof name, "layer%d.weight", i);
    hvd__timeline_end(tl, name);
    hvd__timeline_tick(tl);
  }
  hvd__timeline_close(tl);
  trace t;
  read_closed(&t, path);
  assert_int_equal(t.nrows, N); /* check_trace saw every row named once */
  assert_int_equal(t.nend, N);
  for (int pid = 1; pid <= N; pid++) assert_int_equal(t.depth[pid], 0);
  assert_int_equal(row_named(&t, "layer999.weight"), N);
  json_free(&t.root);
  unlink(path);
}

/* Past 64 KiB, tick writes everything at once; what follows stays in
 * memory until the next write, and the file is always a valid prefix. */
static void test_tick_writes_full_buffer(void **state) {
  (void)state;
  const char *path = temp_path("bytes.json");
  hvd_timeline *tl;
  uint64_t start = hvd__now_ms();
  assert_int_equal(open_tl(path, 0, &tl), 0);
  hvd__timeline_begin(tl, "small", "ALLREDUCE", NULL);
  hvd__timeline_tick(tl);
  size_t len;
  char *text = read_file(path, &len);
  if (hvd__now_ms() - start < 100) assert_int_equal(len, 0); /* too soon, too small */
  free(text);

  char label[96];
  for (int i = 0; i < 1000; i++) {
    snprintf(label, sizeof label, "step %d %040d", i, i);
    hvd__timeline_instant(tl, "small", label); /* ~100 bytes each */
  }
  hvd__timeline_tick(tl);
  hvd__timeline_begin(tl, "after", "BROADCAST", NULL);

  trace t;
  read_unclosed(&t, path);
  assert_int_equal(t.ninstant, 1000);
  assert_int_equal(t.depth[1], 1);
  assert_int_equal(row_named(&t, "after"), 0); /* not written yet */
  json_free(&t.root);

  hvd__timeline_close(tl);
  read_closed(&t, path);
  assert_int_equal(row_named(&t, "after"), 2);
  json_free(&t.root);
  unlink(path);
}

/* A process that dies without closing leaves an unterminated array
 * holding everything up to the last write, which tick made once 100 ms
 * had passed. */
static void test_crash_leaves_valid_prefix(void **state) {
  (void)state;
  const char *path = temp_path("crash.json");
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    hvd_timeline *tl;
    if (open_tl(path, 1, &tl) < 0) _exit(1);
    hvd__timeline_cycle(tl);
    hvd__timeline_begin(tl, "grad", "NEGOTIATE_ALLREDUCE", NULL);
    hvd__timeline_instant(tl, "grad", weird);
    sleep_ms(110);
    hvd__timeline_tick(tl);
    hvd__timeline_begin(tl, "lost", "ALLREDUCE", NULL); /* never written */
    _exit(0);
  }
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  trace t;
  read_unclosed(&t, path);
  assert_int_equal(t.nrows, 2);
  assert_string_equal(t.names[2], "grad");
  assert_int_equal(t.nbegin, 1);
  assert_int_equal(t.ninstant, 2);
  assert_int_equal(row_named(&t, "lost"), 0);
  json_free(&t.root);
  unlink(path);
}

static void test_open_fails_naming_path(void **state) {
  (void)state;
  const char *path = "/nonexistent-hvd-dir/timeline.json";
  static char sentinel;
  hvd_timeline *tl = (hvd_timeline *)&sentinel;
  assert_int_equal(open_tl(path, 0, &tl), HVD_E_SYSTEM);
  assert_null(tl);
  assert_non_null(strstr(hvd_last_error(), path));
  assert_non_null(strstr(hvd_last_error(), strerror(ENOENT)));
}

static void test_null_is_noop(void **state) {
  (void)state;
  hvd__timeline_begin(NULL, "t", "ALLREDUCE", "{}");
  hvd__timeline_instant(NULL, "t", "x");
  hvd__timeline_end(NULL, "t");
  hvd__timeline_cycle(NULL);
  hvd__timeline_tick(NULL);
  hvd__timeline_close(NULL);
}

/* Runs fn with stderr going to a file; returns what it wrote. */
static char *capture_stderr(void (*fn)(void)) {
  const char *path = temp_path("stderr.txt");
  FILE *f = fopen(path, "w+");
  assert_non_null(f);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
  fn();
  fflush(stderr);
  assert_true(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  fclose(f);
  size_t len;
  char *text = read_file(path, &len);
  unlink(path);
  return text;
}

static void write_to_full_disk(void) {
  hvd_timeline *tl;
  assert_int_equal(open_tl("/dev/full", 1, &tl), 0);
  for (int i = 0; i < 3; i++) {
    hvd__timeline_cycle(tl);
    for (int k = 0; k < 1000; k++) hvd__timeline_begin(tl, "grad", "ALLREDUCE", "{\"k\":1}");
    hvd__timeline_tick(tl); /* over 64 KiB: writes, fails the first time */
  }
  hvd__timeline_end(tl, "grad");
  hvd__timeline_close(tl);
}

/* A full disk costs the trace, never the engine: one warning naming the
 * file and the error, then silence. */
static void test_write_error_warns_once(void **state) {
  (void)state;
  if (access("/dev/full", W_OK) != 0) skip();
  char *err = capture_stderr(write_to_full_disk);
  const char *warning = strstr(err, "WARNING: timeline /dev/full: write failed: ");
  assert_non_null(warning);
  assert_non_null(strstr(warning, strerror(ENOSPC)));
  assert_string_equal(strchr(err, '\n'), "\n"); /* and nothing else */
  free(err);
}

/* ---- Where each rank writes ---- */

static void test_path_forms(void **state) {
  (void)state;
  char buf[512], want[512];
  /* "%r": every rank, each "%r" replaced. */
  assert_int_equal(hvd__timeline_path("/x/tl.%r.json", 3, buf, sizeof buf), 1);
  assert_string_equal(buf, "/x/tl.3.json");
  assert_int_equal(hvd__timeline_path("/x/%r/tl.%r", 12, buf, sizeof buf), 1);
  assert_string_equal(buf, "/x/12/tl.12");
  assert_int_equal(hvd__timeline_path("/x/50%/%r", 0, buf, sizeof buf), 1);
  assert_string_equal(buf, "/x/50%/0");
  /* A plain path: rank 0 alone, Horovod's default. */
  assert_int_equal(hvd__timeline_path("/x/tl.json", 0, buf, sizeof buf), 1);
  assert_string_equal(buf, "/x/tl.json");
  assert_int_equal(hvd__timeline_path("/x/tl.json", 1, buf, sizeof buf), 0);
  /* An existing directory, with or without its '/'. */
  snprintf(want, sizeof want, "%s/rank.2.json", tmpdir);
  assert_int_equal(hvd__timeline_path(tmpdir, 2, buf, sizeof buf), 1);
  assert_string_equal(buf, want);
  char spec[256];
  snprintf(spec, sizeof spec, "%s/", tmpdir);
  assert_int_equal(hvd__timeline_path(spec, 2, buf, sizeof buf), 1);
  assert_string_equal(buf, want);
  /* A missing one ending in '/' is made, however deep. */
  snprintf(spec, sizeof spec, "%s/a/b/", tmpdir);
  assert_int_equal(hvd__timeline_path(spec, 1, buf, sizeof buf), 1);
  snprintf(want, sizeof want, "%s/a/b/rank.1.json", tmpdir);
  assert_string_equal(buf, want);
  struct stat st;
  assert_int_equal(stat(spec, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(hvd__timeline_path(spec, 0, buf, sizeof buf), 1); /* made already: fine */
  assert_int_equal(rmdir(spec), 0);
  snprintf(spec, sizeof spec, "%s/a", tmpdir);
  assert_int_equal(rmdir(spec), 0);
}

static void test_path_errors(void **state) {
  (void)state;
  char buf[512], spec[256];
  assert_int_equal(hvd__timeline_path("", 0, buf, sizeof buf), HVD_E_INVALID);
  assert_non_null(strstr(hvd_last_error(), "empty"));
  assert_int_equal(hvd__timeline_path("/x/tl.%r.json", 5, buf, 8), HVD_E_INVALID);
  assert_non_null(strstr(hvd_last_error(), "/x/tl.%r.json"));
  /* A directory that cannot be made: its parent is a file. */
  snprintf(spec, sizeof spec, "%s/file", tmpdir);
  FILE *f = fopen(spec, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(spec, sizeof spec, "%s/file/sub/", tmpdir);
  assert_int_equal(hvd__timeline_path(spec, 0, buf, sizeof buf), HVD_E_SYSTEM);
  assert_non_null(strstr(hvd_last_error(), "/file/sub"));
  assert_non_null(strstr(hvd_last_error(), strerror(ENOTDIR)));
  snprintf(spec, sizeof spec, "%s/file", tmpdir);
  unlink(spec);
}

/* HOROVOD_TIMELINE_MAX_MB is validated; a rank without a file gets none. */
static void test_open_for_rank(void **state) {
  (void)state;
  hvd_timeline *tl;
  char spec[256], path[256];
  setenv("HOROVOD_TIMELINE_MAX_MB", "0", 1);
  assert_int_equal(hvd__timeline_open_for_rank("/x/tl.json", 0, 0, &tl), HVD_E_ENV);
  assert_non_null(strstr(hvd_last_error(), "HOROVOD_TIMELINE_MAX_MB"));
  assert_null(tl);
  setenv("HOROVOD_TIMELINE_MAX_MB", "2", 1);
  assert_int_equal(hvd__timeline_open_for_rank("/nonexistent-hvd/tl.json", 1, 0, &tl), 0);
  assert_null(tl);
  snprintf(spec, sizeof spec, "%s/t.%%r.json", tmpdir);
  assert_int_equal(hvd__timeline_open_for_rank(spec, 4, 1, &tl), 0);
  assert_non_null(tl);
  hvd__timeline_close(tl);
  snprintf(path, sizeof path, "%s/t.4.json", tmpdir);
  trace t;
  read_closed(&t, path);
  assert_string_equal(t.names[1], "cycles");
  json_free(&t.root);
  unlink(path);
  unsetenv("HOROVOD_TIMELINE_MAX_MB");
}

/* ---- The bound ---- */

enum { BOUND = 8192, BOUND_EVENTS = 400 };

/* Writes BOUND_EVENTS begin/end pairs (~70 bytes each) into a timeline
 * bounded by BOUND bytes, writing out once past 64 KiB (tick) or only at
 * close; returns how many bytes the file holds. */
static long write_past_bound(const char *path, int tick) {
  hvd_timeline *tl;
  hvd_timeline_opts o = {0, BOUND};
  assert_int_equal(hvd__timeline_open(path, &o, &tl), 0);
  hvd__timeline_job(tl, "{\"rank\":0}");
  for (int k = 0; k < BOUND_EVENTS; k++) {
    hvd__timeline_begin(tl, "grad", "ALLREDUCE", "{\"tensors\":1,\"bytes\":4}");
    hvd__timeline_end(tl, "grad");
  }
  for (int k = 0; tick && k < 1000; k++) hvd__timeline_instant(tl, "grad", "filler to pass 64 KiB");
  if (tick) hvd__timeline_tick(tl);
  hvd__timeline_begin(tl, "late", "BROADCAST", NULL); /* after the bound: never written */
  hvd__timeline_close(tl);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (long)st.st_size;
}

/* Not temp_path(): capture_stderr holds its static buffer. */
static void bound_at(const char *name, int tick) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  write_past_bound(path, tick);
}
static void bound_at_tick(void) { bound_at("bound-tick.json", 1); }
static void bound_at_close(void) { bound_at("bound-close.json", 0); }

/* Past the bound the file ends as complete JSON with the whole events
 * that fit and an hvd_truncated note, with one warning, whether the bound
 * is passed while running or only by what close writes. */
static void test_bound_ends_file(void **state) {
  (void)state;
  const char *names[] = {"bound-tick.json", "bound-close.json"};
  void (*writers[])(void) = {bound_at_tick, bound_at_close};
  for (int i = 0; i < 2; i++) {
    char paths[2][128];
    snprintf(paths[i], sizeof paths[i], "%s/%s", tmpdir, names[i]);
    char *err = capture_stderr(writers[i]);
    if (!strstr(err, "reached its bound of 8192 bytes")) fail_msg("stderr: %s", err);
    assert_string_equal(strchr(err, '\n'), "\n"); /* one warning */
    free(err);
    struct stat st;
    assert_int_equal(stat(paths[i], &st), 0);
    assert_true(st.st_size <= BOUND && st.st_size > BOUND / 2);
    trace t;
    read_closed(&t, paths[i]);
    assert_non_null(t.truncated);
    assert_int_equal(json_int(t.truncated, "max_bytes"), BOUND);
    assert_null(t.end);
    assert_non_null(t.job);
    assert_true(t.nbegin > 10 && t.nbegin < BOUND_EVENTS);
    assert_int_equal(row_named(&t, "late"), 0);
    json_free(&t.root);
    unlink(paths[i]);
  }
}

/* ---- The job's settings and the waits ---- */

static uint64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void test_job_and_waits(void **state) {
  (void)state;
  const char *path = temp_path("waits.json");
  hvd_timeline *tl;
  uint64_t before = mono_us();
  assert_int_equal(open_tl(path, 0, &tl), 0);
  hvd__timeline_job(tl, "{\"rank\":3,\"size\":4,\"transport\":\"shm\"}");
  hvd__timeline_begin(tl, "grad", "ALLREDUCE", NULL);
  uint64_t start = mono_us();
  sleep_ms(2);
  hvd__timeline_end(tl, "grad");
  hvd__timeline_wait(tl, start, start + 1234);         /* written after later events */
  hvd__timeline_wait(tl, before - 10000, before - 5000); /* before the timeline: at 0 */
  hvd__timeline_close(tl);
  trace t;
  read_closed(&t, path);
  assert_non_null(t.job);
  assert_int_equal(json_int(t.job, "rank"), 3);
  assert_string_equal(json_str(t.job, "transport"), "shm");
  assert_int_equal(t.nwaits, 2);
  int waits = row_named(&t, "waits"), n = 0;
  assert_int_equal(waits, 2);
  for (size_t i = 0; i < t.root.n; i++) {
    const jval *e = &t.root.items[i];
    if (strcmp(json_str(e, "ph"), "X") != 0) continue;
    assert_int_equal(json_int(e, "pid"), waits);
    long dur = json_int(e, "dur"), ts = json_int(e, "ts");
    if (n++ == 0) {
      assert_int_equal(dur, 1234);
      assert_true(ts >= 0 && (uint64_t)ts <= start - before);
    } else {
      assert_int_equal(dur, 0);
      assert_int_equal(ts, 0);
    }
  }
  json_free(&t.root);
  unlink(path);
}

/* What the engine learns after the fact (the fast path's own ready
 * tick: when this rank began holding the tensor) is written at that
 * moment; a negotiation's end carries its cycle. */
static void test_events_at_earlier_moments(void **state) {
  (void)state;
  const char *path = temp_path("at.json");
  hvd_timeline *tl;
  assert_int_equal(open_tl(path, 0, &tl), 0);
  uint64_t held = mono_us();
  sleep_ms(3);
  hvd__timeline_begin_at(tl, "grad", "NEGOTIATE_ALLREDUCE", NULL, held);
  hvd__timeline_instant_at(tl, "grad", "rank 2 ready", held);
  hvd__timeline_end_args(tl, "grad", "{\"cycle\":17}");
  hvd__timeline_close(tl);
  trace t;
  read_closed(&t, path);
  long at[3] = {-1, -1, -1};
  const jval *end = NULL;
  for (size_t i = 0; i < t.root.n; i++) {
    const jval *e = &t.root.items[i];
    const char *ph = json_str(e, "ph");
    int k = strcmp(ph, "B") == 0 ? 0 : strcmp(ph, "i") == 0 ? 1 : strcmp(ph, "E") == 0 ? 2 : -1;
    if (k < 0) continue;
    at[k] = json_int(e, "ts");
    if (k == 2) end = e;
  }
  assert_true(at[0] >= 0 && at[0] == at[1]);
  assert_true(at[2] - at[0] >= 3000); /* the end is now, 3 ms later */
  assert_non_null(end);
  assert_int_equal(json_int(json_get(end, "args"), "cycle"), 17);
  json_free(&t.root);
  unlink(path);
}

static int make_tmpdir(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hvd-timeline-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
  (void)state;
  return rmdir(tmpdir);
}

int main(void) {
  /* The warning test reads the log: make sure warnings are on. */
  setenv("HOROVOD_LOG_LEVEL", "WARNING", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_parser),
      cmocka_unit_test(test_closed_trace),
      cmocka_unit_test(test_no_cycle_row_without_marks),
      cmocka_unit_test(test_empty_trace),
      cmocka_unit_test(test_many_tensors),
      cmocka_unit_test(test_tick_writes_full_buffer),
      cmocka_unit_test(test_crash_leaves_valid_prefix),
      cmocka_unit_test(test_open_fails_naming_path),
      cmocka_unit_test(test_null_is_noop),
      cmocka_unit_test(test_write_error_warns_once),
      cmocka_unit_test(test_path_forms),
      cmocka_unit_test(test_path_errors),
      cmocka_unit_test(test_open_for_rank),
      cmocka_unit_test(test_bound_ends_file),
      cmocka_unit_test(test_job_and_waits),
      cmocka_unit_test(test_events_at_earlier_moments),
  };
  return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
