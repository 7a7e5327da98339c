/*
 * output.h -- forwarding each rank's stdout and stderr, line by line.
 *
 * Every line a rank writes comes out of hvdrun as
 *     [R]<stdout>:line      on hvdrun's stdout
 *     [R]<stderr>:line      on hvdrun's stderr
 * as horovodrun prints it.  A line longer than OUTPUT_LINE_MAX is cut into
 * pieces of that size (memory stays bounded whatever a rank prints); an
 * unfinished last line is forwarded, with a newline, when the rank closes
 * its end.
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

#include "common.h"

#define OUTPUT_LINE_MAX (64 * 1024)

/* hvdrun's stdout or stderr, with the lines waiting to be written. */
typedef struct output_sink {
  int fd;
  int broken;   /* a write failed (the reader went away): output is dropped */
  int midline;  /* a line is partly written: the peer must wait */
  size_t chunk; /* the most one write() takes without blocking */
  const struct output_sink *peer;
  char *buf;
  size_t off, len, cap; /* waiting: buf[off..len) */
} output_sink;

/* The read end of one rank's stdout or stderr pipe. */
typedef struct {
  int fd; /* -1 once the rank's end is closed and everything forwarded */
  int rank;
  const char *tag; /* "stdout" or "stderr" */
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

void output_stream_init(output_stream *st, int fd, int rank, const char *tag,
                        output_sink *sink);
/* Reads once what the pipe holds and forwards the whole lines; at end of
 * file forwards the unfinished line and closes the pipe.  Returns the
 * number of bytes read (0 when nothing was there or at end of file). */
size_t output_stream_read(output_stream *st);
/* Forwards the unfinished line and closes the pipe now (giving up on a
 * pipe that a stray process keeps open). */
void output_stream_close(output_stream *st);

#endif /* HVDRUN_OUTPUT_H */
