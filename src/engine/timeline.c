/*
 * timeline.c -- Horovod's timeline as Chrome trace-event JSON.
 *
 * The file is the trace format's "JSON Array Format": "[" and then one
 * event per line, each followed by ",".  A process that dies mid-run
 * leaves an unterminated array, which chrome://tracing and Perfetto load
 * as it is; hvd__timeline_close ends the array with one last event (a
 * repeat of a metadata event already written, so harmless) and "]".
 *
 * Each tensor gets its own row: a trace "process" whose pid is handed out
 * in order of first appearance (1, 2, ...) and named by a process_name
 * metadata event.  With mark_cycles the first row, pid 1, is "cycles" and
 * holds one instant event per cycle.  pid 0 is avoided on purpose: Perfetto
 * treats it as the kernel's idle task.  Events use tid = pid, the main
 * thread of their row, since Perfetto keys threads by tid across processes.
 *
 * The thread driving the cycles (the engine's, or a caller's waiting in
 * hvd_wait) must not wait on the disk, so events gather in a
 * memory buffer that hvd__timeline_tick writes out once it holds 64 KiB or
 * 100 ms have passed: a crash loses at most that much of the trace.
 * Tracing is a diagnostic and must never fail the engine: a write error or
 * an allocation failure logs one warning and turns every later call into a
 * no-op.
 *
 * The file never grows past max_bytes (HOROVOD_TIMELINE_MAX_MB; Horovod's
 * grew without bound, horovod#1022).  Each write checks that what is
 * buffered still fits with room for the array's end; when it does not,
 * the whole events that fit are written, then an "hvd_truncated"
 * metadata event and "]": the file is complete JSON holding the first
 * max_bytes of the run, and tracing stops with one warning.  A cap rather
 * than a ring of the last N MB: a ring would rewrite the file's start
 * and its row names, and the first part of a run shows its steady state
 * as well as the last.
 *
 * Beside the tensors' rows: the job's settings as an "hvd_job" metadata
 * event (hvd__timeline_job), and a "waits" row of complete ("X") events,
 * one per stretch of time an application thread spent blocked in
 * hvd_wait (hvd__timeline_wait).  Those are written after the fact, so
 * their timestamps may be earlier than the events before them; viewers
 * sort by time.  Metadata events the viewers do not know (pid 0, which
 * no row uses) are ignored by Perfetto and chrome://tracing.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "env.h"
#include "hash.h"
#include "timeline.h"

#define FLUSH_BYTES (64 * 1024)
#define FLUSH_US (100 * 1000)
#define BUF_INITIAL (FLUSH_BYTES + 4096)
#define ROWS_INITIAL 64 /* a power of two */
/* Room kept for the array's end: the truncation event or the last line. */
#define END_RESERVE 256
#define MIN_MAX_BYTES 4096

/* A tensor's row: a slot of the open-addressing map from name to pid. */
struct row {
  char *name; /* NULL: empty slot */
  int pid;
};

struct hvd_timeline {
  int fd; /* -1 once tracing stopped */
  char *path;
  uint64_t t0_us;         /* when opened: timestamps count from here */
  uint64_t last_flush_us; /* when the buffer was last written out */
  uint64_t written;       /* bytes in the file */
  uint64_t max_bytes;     /* the file's bound, END_RESERVE included */
  char *buf;
  size_t len, cap;
  struct row *rows; /* rows_cap slots, a power of two, at most half full */
  size_t nrows, rows_cap;
  int next_pid;
  int cycles_pid; /* 0: cycles are not marked */
  int waits_pid;  /* 0: no wait recorded yet */
  int nonempty;   /* some event was put: the array needs a last one */
};

static int live(const hvd_timeline *tl) { return tl != NULL && tl->fd >= 0; }

/* Frees what tracing needs; the struct and its path stay for close. */
static void release(hvd_timeline *tl) {
  if (tl->fd >= 0) close(tl->fd);
  tl->fd = -1;
  free(tl->buf);
  tl->buf = NULL;
  tl->len = tl->cap = 0;
  for (size_t i = 0; i < tl->rows_cap; i++) free(tl->rows[i].name);
  free(tl->rows);
  tl->rows = NULL;
  tl->nrows = tl->rows_cap = 0;
}

static void stop(hvd_timeline *tl, const char *what, int errnum) {
  hvd__log(HVD_LOG_WARNING, "timeline %s: %s: %s; tracing stopped", tl->path, what,
           strerror(errnum));
  release(tl);
}

/* ---- The event buffer ---- */

/* Room for n more bytes at the buffer's end, or NULL once tracing stopped. */
static char *reserve(hvd_timeline *tl, size_t n) {
  if (!live(tl)) return NULL;
  if (tl->cap - tl->len >= n) return tl->buf + tl->len;
  size_t cap = tl->cap;
  while (cap - tl->len < n) cap *= 2;
  char *buf = realloc(tl->buf, cap);
  if (buf == NULL) {
    stop(tl, "buffering an event", ENOMEM);
    return NULL;
  }
  tl->buf = buf;
  tl->cap = cap;
  return buf + tl->len;
}

static void put(hvd_timeline *tl, const char *s, size_t n) {
  char *dst = reserve(tl, n);
  if (dst == NULL) return;
  memcpy(dst, s, n);
  tl->len += n;
}

static void put_str(hvd_timeline *tl, const char *s) { put(tl, s, strlen(s)); }

/* For short numeric fragments only. */
static void put_fmt(hvd_timeline *tl, const char *fmt, ...) HVD__PRINTF(2, 3);
static void put_fmt(hvd_timeline *tl, const char *fmt, ...) {
  char tmp[192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(tl, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* s as a JSON string.  Names are arbitrary user bytes: quotes, backslashes
 * and control characters are escaped, bytes >= 0x80 pass through. */
static void put_json_string(hvd_timeline *tl, const char *s) {
  static const char hex[] = "0123456789abcdef";
  char *dst = reserve(tl, 6 * strlen(s) + 2), *p = dst;
  if (dst == NULL) return;
  *p++ = '"';
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = (char)c;
    } else if (c < 0x20) {
      memcpy(p, "\\u00", 4);
      p[4] = hex[c >> 4];
      p[5] = hex[c & 15];
      p += 6;
    } else {
      *p++ = (char)c;
    }
  }
  *p++ = '"';
  tl->len += (size_t)(p - dst);
}

/* Writes n bytes; 0, or -1 once a failure stopped tracing. */
static int write_all(hvd_timeline *tl, const char *p, size_t n) {
  for (size_t off = 0; off < n;) {
    ssize_t k = write(tl->fd, p + off, n - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      stop(tl, "write failed", k < 0 ? errno : EIO);
      return -1;
    }
    off += (size_t)k;
  }
  tl->written += n;
  return 0;
}

/* The buffer would pass max_bytes: writes the whole events (lines) that
 * fit, ends the array with a note of why, and stops tracing. */
static void truncate_here(hvd_timeline *tl) {
  uint64_t room = tl->max_bytes - END_RESERVE - tl->written; /* flush checked written */
  size_t keep = 0;
  for (size_t i = 0; i < tl->len && i < room; i++)
    if (tl->buf[i] == '\n') keep = i + 1;
  char end[END_RESERVE];
  int n = snprintf(end, sizeof end,
                   "{\"name\":\"hvd_truncated\",\"ph\":\"M\",\"pid\":0,\"args\":"
                   "{\"max_bytes\":%" PRIu64 ",\"ts\":%" PRIu64 "}}\n]\n",
                   tl->max_bytes, hvd__now_us() - tl->t0_us);
  if (write_all(tl, tl->buf, keep) < 0 || write_all(tl, end, (size_t)n) < 0) return;
  hvd__log(HVD_LOG_WARNING,
           "timeline %s: reached its bound of %" PRIu64 " bytes (HOROVOD_TIMELINE_MAX_MB); "
           "the file ends here, complete; tracing stopped",
           tl->path, tl->max_bytes);
  release(tl);
}

static void flush(hvd_timeline *tl) {
  if (tl->written + tl->len + END_RESERVE > tl->max_bytes) {
    truncate_here(tl);
    return;
  }
  if (write_all(tl, tl->buf, tl->len) < 0) return;
  tl->len = 0;
  tl->last_flush_us = hvd__now_us();
}

/* ---- Rows ---- */

/* Viewers may order rows by name; an explicit sort index keeps them in
 * order of first appearance. */
static void put_sort_index(hvd_timeline *tl, int pid) {
  put_fmt(tl,
          "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
          pid, pid);
}

static int new_row(hvd_timeline *tl, const char *name) {
  int pid = tl->next_pid++;
  tl->nonempty = 1;
  put_fmt(tl, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", pid);
  put_json_string(tl, name);
  put_str(tl, "}},\n");
  put_sort_index(tl, pid);
  put_str(tl, ",\n");
  return pid;
}


/* The empty slot for name, or the slot holding it. */
static struct row *slot(struct row *rows, size_t cap, const char *name) {
  size_t i = (size_t)hvd__hash_str(name) & (cap - 1);
  while (rows[i].name != NULL && strcmp(rows[i].name, name) != 0) i = (i + 1) & (cap - 1);
  return &rows[i];
}

static int grow_rows(hvd_timeline *tl) {
  size_t cap = tl->rows_cap ? 2 * tl->rows_cap : ROWS_INITIAL;
  struct row *rows = calloc(cap, sizeof *rows);
  if (rows == NULL) {
    stop(tl, "naming a row", ENOMEM);
    return -1;
  }
  for (size_t i = 0; i < tl->rows_cap; i++)
    if (tl->rows[i].name != NULL) *slot(rows, cap, tl->rows[i].name) = tl->rows[i];
  free(tl->rows);
  tl->rows = rows;
  tl->rows_cap = cap;
  return 0;
}

/* The pid of tensor's row, naming a new row on first sight; -1 once
 * tracing stopped. */
static int row_of(hvd_timeline *tl, const char *tensor) {
  if (!live(tl)) return -1;
  if (2 * (tl->nrows + 1) > tl->rows_cap && grow_rows(tl) < 0) return -1;
  struct row *r = slot(tl->rows, tl->rows_cap, tensor);
  if (r->name != NULL) return r->pid;
  char *name = strdup(tensor);
  if (name == NULL) {
    stop(tl, "naming a row", ENOMEM);
    return -1;
  }
  r->name = name;
  r->pid = tl->next_pid;
  tl->nrows++;
  return new_row(tl, tensor); /* may stop tracing and free r: r is done with */
}

/* ---- Events ---- */

/* Microseconds since the file opened of CLOCK_MONOTONIC's at_us, 0 meaning
 * now; a moment before the file opened is its start. */
static uint64_t stamp(const hvd_timeline *tl, uint64_t at_us) {
  if (at_us == 0) at_us = hvd__now_us();
  return at_us > tl->t0_us ? at_us - tl->t0_us : 0;
}

/* Opens an event: {"ph":"<ph>"[,"name":<name>],"ts":..,"pid":P,"tid":P */
static void event_start(hvd_timeline *tl, char ph, const char *name, int pid, uint64_t at_us) {
  put_fmt(tl, "{\"ph\":\"%c\"", ph);
  if (name != NULL) {
    put_str(tl, ",\"name\":");
    put_json_string(tl, name);
  }
  put_fmt(tl, ",\"ts\":%" PRIu64 ",\"pid\":%d,\"tid\":%d", stamp(tl, at_us), pid, pid);
}

static void event_args(hvd_timeline *tl, const char *args) {
  if (args == NULL) return;
  put_str(tl, ",\"args\":");
  put_str(tl, args);
}

static void event_end(hvd_timeline *tl) { put_str(tl, "},\n"); }

static void instant(hvd_timeline *tl, int pid, const char *label, uint64_t at_us) {
  event_start(tl, 'i', label, pid, at_us);
  put_str(tl, ",\"s\":\"p\"");
  event_end(tl);
}

int hvd__timeline_open(const char *path, const hvd_timeline_opts *opts, hvd_timeline **out) {
  int rc;
  *out = NULL;
  hvd_timeline *tl = calloc(1, sizeof *tl);
  if (tl == NULL) return hvd__err(HVD_E_NOMEM, "timeline %s: out of memory", path);
  tl->fd = -1;
  tl->path = strdup(path);
  tl->buf = malloc(BUF_INITIAL);
  if (tl->path == NULL || tl->buf == NULL) {
    rc = hvd__err(HVD_E_NOMEM, "timeline %s: out of memory", path);
    goto fail;
  }
  tl->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tl->fd < 0) {
    rc = hvd__err_sys(HVD_E_SYSTEM, errno, "cannot open timeline %s", path);
    goto fail;
  }
  tl->cap = BUF_INITIAL;
  tl->next_pid = 1;
  tl->max_bytes = opts->max_bytes < MIN_MAX_BYTES ? MIN_MAX_BYTES : opts->max_bytes;
  tl->t0_us = tl->last_flush_us = hvd__now_us();
  put_str(tl, "[\n");
  if (opts->mark_cycles) tl->cycles_pid = new_row(tl, "cycles"); /* not in the map: no tensor shares it */
  *out = tl;
  return 0;

fail:
  free(tl->buf);
  free(tl->path);
  free(tl);
  return rc;
}

/* "%r" replaced by rank, into buf; -1 if it does not fit. */
static int expand_rank(const char *spec, int rank, char *buf, size_t cap) {
  size_t n = 0;
  for (const char *p = spec; *p; p++) {
    int k = (p[0] == '%' && p[1] == 'r') ? snprintf(buf + n, cap - n, "%d", rank)
                                         : snprintf(buf + n, cap - n, "%c", *p);
    if (k < 0 || (size_t)k >= cap - n) return -1;
    n += (size_t)k;
    p += p[0] == '%' && p[1] == 'r';
  }
  return 0;
}

/* mkdir -p dir: every rank may race to make it, so EEXIST is success. */
static int make_dirs(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
    return hvd__err(HVD_E_INVALID, "timeline directory name too long: %s", dir);
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
      return hvd__err_sys(HVD_E_SYSTEM, errno, "cannot create timeline directory %s", path);
    *p = c;
    if (c == '\0' || p[1] == '\0') return 0;
  }
}

int hvd__timeline_path(const char *spec, int rank, char *buf, size_t cap) {
  struct stat st;
  size_t len = strlen(spec);
  if (len == 0) return hvd__err(HVD_E_INVALID, "the timeline path is empty");
  if (strstr(spec, "%r")) {
    if (expand_rank(spec, rank, buf, cap) < 0)
      return hvd__err(HVD_E_INVALID, "timeline path too long: %s", spec);
    return 1;
  }
  int dir = spec[len - 1] == '/' || (stat(spec, &st) == 0 && S_ISDIR(st.st_mode));
  if (!dir) {
    if (rank != 0) return 0;
    if (len >= cap) return hvd__err(HVD_E_INVALID, "timeline path too long: %s", spec);
    memcpy(buf, spec, len + 1);
    return 1;
  }
  if (spec[len - 1] == '/') HVD__CHECK(make_dirs(spec));
  int n = snprintf(buf, cap, "%s%srank.%d.json", spec, spec[len - 1] == '/' ? "" : "/", rank);
  if (n < 0 || (size_t)n >= cap) return hvd__err(HVD_E_INVALID, "timeline path too long: %s", spec);
  return 1;
}

int hvd__timeline_open_for_rank(const char *spec, int rank, int mark_cycles,
                                hvd_timeline **out) {
  char path[4096];
  long mb;
  *out = NULL;
  HVD__CHECK(hvd__param_int(HVD_P_TIMELINE_MAX_MB, &mb));
  int mine = hvd__timeline_path(spec, rank, path, sizeof path);
  if (mine <= 0) return mine;
  hvd_timeline_opts opts = {mark_cycles, (uint64_t)mb << 20};
  return hvd__timeline_open(path, &opts, out);
}

void hvd__timeline_job(hvd_timeline *tl, const char *args) {
  if (!live(tl)) return;
  put_str(tl, "{\"name\":\"hvd_job\",\"ph\":\"M\",\"pid\":0,\"args\":");
  put_str(tl, args);
  put_str(tl, "},\n");
  tl->nonempty = 1;
}

void hvd__timeline_wait(hvd_timeline *tl, uint64_t start_us, uint64_t end_us) {
  if (!live(tl)) return;
  if (tl->waits_pid == 0) tl->waits_pid = new_row(tl, "waits"); /* not in the map, like cycles */
  uint64_t ts = stamp(tl, start_us), end = stamp(tl, end_us);
  put_fmt(tl, "{\"ph\":\"X\",\"name\":\"WAIT\",\"ts\":%" PRIu64 ",\"dur\":%" PRIu64
          ",\"pid\":%d,\"tid\":%d},\n", ts, end - ts, tl->waits_pid, tl->waits_pid);
}

void hvd__timeline_begin_at(hvd_timeline *tl, const char *tensor, const char *phase,
                            const char *args, uint64_t at_us) {
  int pid = row_of(tl, tensor);
  if (pid < 0) return;
  event_start(tl, 'B', phase, pid, at_us);
  event_args(tl, args);
  event_end(tl);
}

void hvd__timeline_begin(hvd_timeline *tl, const char *tensor, const char *phase,
                         const char *args) {
  hvd__timeline_begin_at(tl, tensor, phase, args, 0);
}

void hvd__timeline_end_args(hvd_timeline *tl, const char *tensor, const char *args) {
  int pid = row_of(tl, tensor);
  if (pid < 0) return;
  event_start(tl, 'E', NULL, pid, 0);
  event_args(tl, args);
  event_end(tl);
}

void hvd__timeline_end(hvd_timeline *tl, const char *tensor) {
  hvd__timeline_end_args(tl, tensor, NULL);
}

void hvd__timeline_instant_at(hvd_timeline *tl, const char *tensor, const char *label,
                              uint64_t at_us) {
  int pid = row_of(tl, tensor);
  if (pid >= 0) instant(tl, pid, label, at_us);
}

void hvd__timeline_instant(hvd_timeline *tl, const char *tensor, const char *label) {
  hvd__timeline_instant_at(tl, tensor, label, 0);
}

void hvd__timeline_cycle(hvd_timeline *tl) {
  if (live(tl) && tl->cycles_pid > 0) instant(tl, tl->cycles_pid, "CYCLE_START", 0);
}

void hvd__timeline_tick(hvd_timeline *tl) {
  if (!live(tl) || tl->len == 0) return;
  if (tl->len >= FLUSH_BYTES || hvd__now_us() - tl->last_flush_us >= FLUSH_US) flush(tl);
}

void hvd__timeline_close(hvd_timeline *tl) {
  if (tl == NULL) return;
  if (live(tl)) flush(tl); /* within the bound, or truncated and closed */
  if (live(tl)) {
    /* Every event so far ends in ",": the array needs one more, which
     * also says when and that the trace ended here on purpose.  Without
     * events the array closes as it is.  END_RESERVE keeps room for it. */
    char end[END_RESERVE];
    int n = tl->nonempty ? snprintf(end, sizeof end,
                                    "{\"name\":\"hvd_end\",\"ph\":\"M\",\"pid\":0,\"args\":"
                                    "{\"ts\":%" PRIu64 "}}\n]\n", hvd__now_us() - tl->t0_us)
                         : snprintf(end, sizeof end, "]\n");
    write_all(tl, end, (size_t)n);
  }
  if (live(tl)) {
    int fd = tl->fd;
    tl->fd = -1;
    if (close(fd) < 0)
      hvd__log(HVD_LOG_WARNING, "timeline %s: close: %s", tl->path, strerror(errno));
  }
  release(tl);
  free(tl->path);
  free(tl);
}
