/*
 * output.c -- line forwarding from the ranks' pipes to hvdrun's own
 * stdout and stderr (see output.h).
 *
 * A read takes whatever the pipe holds (up to OUTPUT_LINE_MAX).  Whole
 * lines in it are appended, prefixed, to the sink's buffer straight from
 * the read buffer; only an unfinished tail is copied aside, and that copy
 * never grows past OUTPUT_LINE_MAX: when it fills, it goes out as a line.
 */
#include "output.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Past this much waiting in a sink, the ranks' pipes are left unread. */
#define SINK_HIGH_WATER (1024 * 1024)

static char read_buf[OUTPUT_LINE_MAX];

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

/* Makes room for n more bytes; 0 on success. */
static int sink_reserve(output_sink *s, size_t n) {
  if (s->cap - s->len >= n) return 0;
  if (s->off > 0) { /* what was written makes room at the front */
    memmove(s->buf, s->buf + s->off, s->len - s->off);
    s->len -= s->off;
    s->off = 0;
    if (s->cap - s->len >= n) return 0;
  }
  size_t cap = s->cap ? s->cap : 4096;
  while (cap - s->len < n) cap *= 2;
  char *buf = realloc(s->buf, cap);
  if (!buf) return -1;
  s->buf = buf;
  s->cap = cap;
  return 0;
}

/* Appends prefix a b and a newline, as one line. */
static void sink_line(output_sink *s, const char *prefix, const char *a, size_t alen,
                      const char *b, size_t blen) {
  size_t plen = strlen(prefix);
  if (s->broken) return;
  if (sink_reserve(s, plen + alen + blen + 1) != 0) {
    fprintf(stderr, "hvdrun: out of memory: dropping a line of output\n");
    return;
  }
  memcpy(s->buf + s->len, prefix, plen);
  s->len += plen;
  if (alen) memcpy(s->buf + s->len, a, alen);
  s->len += alen;
  if (blen) memcpy(s->buf + s->len, b, blen);
  s->len += blen;
  s->buf[s->len++] = '\n';
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
  return s->off < s->len && !s->broken && !(s->peer && s->peer->midline);
}

int output_sink_full(const output_sink *s) { return s->len - s->off >= SINK_HIGH_WATER; }

static int sink_writable(const output_sink *s) {
  struct pollfd p = {s->fd, POLLOUT, 0};
  return s->chunk == SIZE_MAX || poll(&p, 1, 0) == 1;
}

void output_sink_write(output_sink *s) {
  while (output_sink_wants_write(s) && sink_writable(s)) {
    size_t n = s->len - s->off < s->chunk ? s->len - s->off : s->chunk;
    ssize_t w = write(s->fd, s->buf + s->off, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    if (w <= 0) {
      s->broken = 1; /* nobody reads any more: drop the rest, free the peer */
      s->midline = 0;
      break;
    }
    s->off += (size_t)w;
    s->midline = s->buf[s->off - 1] != '\n';
  }
  if (s->off == s->len || s->broken) s->off = s->len = 0;
}

void output_sink_free(output_sink *s) {
  free(s->buf);
  s->buf = NULL;
  s->off = s->len = s->cap = 0;
}

/* ---- streams ---- */

void output_stream_init(output_stream *st, int fd, int rank, const char *tag,
                        output_sink *sink) {
  memset(st, 0, sizeof *st);
  st->fd = fd;
  st->rank = rank;
  st->tag = tag;
  st->sink = sink;
}

/* Forwards the unfinished line followed by data[0..n) as one line. */
static void emit(output_stream *st, const char *data, size_t n) {
  char prefix[48];
  snprintf(prefix, sizeof prefix, "[%d]<%s>:", st->rank, st->tag);
  sink_line(st->sink, prefix, st->part, st->part_len, data, n);
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

void output_stream_close(output_stream *st) {
  if (st->part_len) emit(st, NULL, 0);
  free(st->part);
  st->part = NULL;
  st->part_cap = 0;
  if (st->fd >= 0) close(st->fd);
  st->fd = -1;
}

size_t output_stream_read(output_stream *st) {
  ssize_t n = read(st->fd, read_buf, sizeof read_buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) {
    output_stream_close(st);
    return 0;
  }
  forward(st, read_buf, (size_t)n);
  return (size_t)n;
}
