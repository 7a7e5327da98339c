/*
 * output.h -- forwarding each rank's stdout and stderr, line by line.
 *
 * Every line a rank writes comes out of hvdrun as
 *     [R]<stdout>:line      on hvdrun's stdout
 *     [R]<stderr>:line      on hvdrun's stderr
 * as horovodrun prints it, and with --output-filename DIR also goes,
 * byte for byte, to DIR/rank.R/stdout or DIR/rank.R/stderr.  A line
 * longer than OUTPUT_LINE_MAX is cut into pieces of that size (memory
 * stays bounded whatever a rank prints); an unfinished last line is
 * forwarded, with a newline, when the rank's stream ends.  The bytes come
 * from the rank's pipes here, or from hvdrun's agent on another host.
 *
 * Lines wait in a sink (hvdrun's stdout or stderr) until poll() says the
 * descriptor takes more, and each write is small enough not to block, so
 * a reader that stops reading never freezes hvdrun: signals and the
 * rendezvous are still served, and the ranks feel the back-pressure
 * through their own pipes (output_sink_full()).  When stdout and stderr
 * are the same file (a terminal, 2>&1) the two sinks take turns a line at
 * a time, so output of two ranks, or a rank's and hvdrun's own messages,
 * never mixes within a line.
 */
#ifndef HVDRUN_OUTPUT_H
#define HVDRUN_OUTPUT_H

#include <stddef.h>

#include "bytes.h"
#include "common.h"

#define OUTPUT_LINE_MAX (64 * 1024)

/* hvdrun's stdout or stderr, with the lines waiting to be written. */
typedef struct output_sink {
  int fd;
  int broken;   /* a write failed (the reader went away): output is dropped */
  int midline;  /* a line is partly written: the peer must wait */
  size_t chunk; /* the most one write() takes without blocking */
  const struct output_sink *peer;
  bytes q; /* the lines waiting */
} output_sink;

/* One rank's stdout or stderr (or another source of lines, such as an
 * ssh session's stderr): bytes go in, prefixed lines come out into the
 * sink.  The bytes come from a pipe (local ranks) or from the frames of
 * hvdrun's agent (ranks on other hosts): one line splitter for both. */
typedef struct {
  int open;   /* 1 until output_stream_end() */
  int file_fd; /* --output-filename: the bytes, as they came; -1 when none */
  char prefix[320]; /* "[3]<stdout>:" */
  int timestamp;    /* --prefix-output-with-timestamp: each line starts with its time */
  output_sink *sink;
  char *part; /* the unfinished last line */
  size_t part_len, part_cap;
} output_stream;

/* ---- sinks ---- */

void output_sink_init(output_sink *s, int fd);
/* Makes a and b take turns line by line if they are the same file (a
 * terminal, or 2>&1); apart, a stuck reader of one does not stop the other. */
void output_sink_pair(output_sink *a, output_sink *b);
/* Appends one line of hvdrun's own ("hvdrun: ..." is the caller's). */
void output_sink_printf(output_sink *s, const char *fmt, ...) HVD__PRINTF(2, 3);
/* 1 when bytes wait and the sink may write them (for POLLOUT). */
int output_sink_wants_write(const output_sink *s);
/* 1 when so much waits that the ranks' pipes should not be read. */
int output_sink_full(const output_sink *s);
/* Writes what the descriptor takes now, without blocking. */
void output_sink_write(output_sink *s);
void output_sink_free(output_sink *s);

/* ---- streams ---- */

void output_stream_init(output_stream *st, const char *prefix, output_sink *sink);
/* Also writes every byte to the file at path (created or truncated).  0,
 * or -1 with errno. */
int output_stream_save(output_stream *st, const char *path);
/* Forwards the whole lines in data[0..n) and keeps the unfinished rest;
 * n == 0 is the end of the stream, as output_stream_end(). */
void output_stream_feed(output_stream *st, const char *data, size_t n);
/* The stream is over: forwards the unfinished line, closes the file. */
void output_stream_end(output_stream *st);

/* Creates directory path and its missing parents (mkdir -p).  0, or -1
 * with errno. */
int output_make_dirs(const char *path);

#endif /* HVDRUN_OUTPUT_H */
