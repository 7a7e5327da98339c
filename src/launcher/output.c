/*
 * output.c -- line forwarding from the ranks' pipes to hvdrun's own
 * stdout and stderr (see output.h).
 *
 * Bytes come in as a pipe or a frame delivered them.  Whole lines in
 * them are appended, prefixed, to the sink's buffer straight from the
 * caller's buffer; only an unfinished tail is copied aside, and that copy
 * never grows past OUTPUT_LINE_MAX: when it fills, it goes out as a line.
 */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Past this much waiting in a sink, the ranks' pipes are left unread. */
#define SINK_HIGH_WATER (1024 * 1024)

/* ---- sinks ---- */

void output_sink_init(output_sink *s, int fd) {
  struct stat st;
  memset(s, 0, sizeof *s);
  s->fd = fd;
  /* A pipe, socket or terminal that poll() calls writable takes PIPE_BUF
   * bytes without blocking; files and /dev/null take anything. */
  s->chunk = SIZE_MAX;
  if (fstat(fd, &st) != 0 || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(fd))
    s->chunk = PIPE_BUF;
}

void output_sink_pair(output_sink *a, output_sink *b) {
  struct stat sa, sb;
  if (fstat(a->fd, &sa) != 0 || fstat(b->fd, &sb) != 0) return;
  if (sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino) return; /* apart: no need to wait */
  a->peer = b;
  b->peer = a;
}

/* Appends prefix a b and a newline, as one line. */
static void sink_line(output_sink *s, const char *prefix, const char *a, size_t alen,
                      const char *b, size_t blen) {
  size_t plen = strlen(prefix);
  if (s->broken) return;
  if (bytes_reserve(&s->q, plen + alen + blen + 1) != 0) {
    fprintf(stderr, "hvdrun: out of memory: dropping a line of output\n");
    return;
  }
  bytes *q = &s->q;
  memcpy(q->buf + q->len, prefix, plen);
  q->len += plen;
  if (alen) memcpy(q->buf + q->len, a, alen);
  q->len += alen;
  if (blen) memcpy(q->buf + q->len, b, blen);
  q->len += blen;
  q->buf[q->len++] = '\n';
}

void output_sink_printf(output_sink *s, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  sink_line(s, "", msg, strlen(msg), NULL, 0);
}

int output_sink_wants_write(const output_sink *s) {
  return bytes_pending(&s->q) && !s->broken && !(s->peer && s->peer->midline);
}

int output_sink_full(const output_sink *s) { return bytes_pending(&s->q) >= SINK_HIGH_WATER; }

static int sink_writable(const output_sink *s) {
  struct pollfd p = {s->fd, POLLOUT, 0};
  return s->chunk == SIZE_MAX || poll(&p, 1, 0) == 1;
}

void output_sink_write(output_sink *s) {
  while (output_sink_wants_write(s) && sink_writable(s)) {
    bytes *q = &s->q;
    size_t n = bytes_pending(q) < s->chunk ? bytes_pending(q) : s->chunk;
    ssize_t w = write(s->fd, q->buf + q->off, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    if (w <= 0) {
      s->broken = 1; /* nobody reads any more: drop the rest, free the peer */
      s->midline = 0;
      break;
    }
    q->off += (size_t)w;
    s->midline = q->buf[q->off - 1] != '\n';
  }
  if (!bytes_pending(&s->q) || s->broken) s->q.off = s->q.len = 0;
}

void output_sink_free(output_sink *s) { bytes_free(&s->q); }

/* ---- streams ---- */

void output_stream_init(output_stream *st, const char *prefix, output_sink *sink) {
  memset(st, 0, sizeof *st);
  st->open = 1;
  st->file_fd = -1;
  snprintf(st->prefix, sizeof st->prefix, "%s", prefix);
  st->sink = sink;
}

int output_stream_save(output_stream *st, const char *path) {
  st->file_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  return st->file_fd < 0 ? -1 : 0;
}

/* Forwards the unfinished line followed by data[0..n) as one line; with
 * a timestamp, as horovodrun writes it: asctime() without its newline
 * right before the prefix ("Fri Nov 27 02:05:43 2026[0]<stdout>:"). */
static void emit(output_stream *st, const char *data, size_t n) {
  char prefix[sizeof st->prefix + 32];
  const char *p = st->prefix;
  if (st->timestamp) {
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    if (localtime_r(&now, &tm) && strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", &tm)) {
      snprintf(prefix, sizeof prefix, "%s%s", when, st->prefix);
      p = prefix;
    }
  }
  sink_line(st->sink, p, st->part, st->part_len, data, n);
  st->part_len = 0;
}

/* Sets data aside as the start of an unfinished line; a full piece of
 * OUTPUT_LINE_MAX bytes goes out as a line of its own. */
static void keep(output_stream *st, const char *data, size_t n) {
  while (n > 0) {
    size_t take = OUTPUT_LINE_MAX - st->part_len;
    if (take > n) take = n;
    if (st->part_cap < st->part_len + take) {
      size_t cap = st->part_len + take > 4096 ? OUTPUT_LINE_MAX : 4096;
      char *p = realloc(st->part, cap);
      if (!p) {
        emit(st, data, take); /* no room to wait for the rest: out it goes */
        data += take;
        n -= take;
        continue;
      }
      st->part = p;
      st->part_cap = cap;
    }
    memcpy(st->part + st->part_len, data, take);
    st->part_len += take;
    data += take;
    n -= take;
    if (st->part_len == OUTPUT_LINE_MAX) emit(st, NULL, 0);
  }
}

static void forward(output_stream *st, const char *data, size_t n) {
  const char *nl;
  while (n > 0 && (nl = memchr(data, '\n', n)) != NULL) {
    size_t len = (size_t)(nl - data);
    if (st->part_len + len > OUTPUT_LINE_MAX) { /* keep the pieces' size bounded */
      keep(st, data, len);
      if (st->part_len) emit(st, NULL, 0);
    } else {
      emit(st, data, len);
    }
    data += len + 1;
    n -= len + 1;
  }
  keep(st, data, n);
}

/* A regular file takes everything; a failing one is given up, once said. */
static void save(output_stream *st, const char *data, size_t n) {
  while (n > 0 && st->file_fd >= 0) {
    ssize_t w = write(st->file_fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      output_sink_printf(st->sink, "hvdrun: cannot write the --output-filename file of %s %s",
                         st->prefix, w < 0 ? strerror(errno) : "no space");
      close(st->file_fd);
      st->file_fd = -1;
      return;
    }
    data += w;
    n -= (size_t)w;
  }
}

void output_stream_feed(output_stream *st, const char *data, size_t n) {
  if (!st->open) return;
  if (n == 0) {
    output_stream_end(st);
    return;
  }
  save(st, data, n);
  forward(st, data, n);
}

void output_stream_end(output_stream *st) {
  if (!st->open) return;
  if (st->part_len) emit(st, NULL, 0);
  free(st->part);
  st->part = NULL;
  st->part_cap = 0;
  if (st->file_fd >= 0) close(st->file_fd);
  st->file_fd = -1;
  st->open = 0;
}

int output_make_dirs(const char *path) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof buf) {
    errno = len ? ENAMETOOLONG : ENOENT;
    return -1;
  }
  memcpy(buf, path, len + 1);
  for (char *p = buf + 1; ; p++) { /* each parent, then the whole path */
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    if (c == '\0') break;
    *p = c;
  }
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}
