/*
 * bytes.h -- bytes waiting to be written, in order: the lines for
 * hvdrun's stdout and stderr (output.c), the frames between hvdrun and
 * its agents (agent_proto.h).  Appending never blocks; writing takes what
 * the descriptor takes, and what was written makes room at the front.
 */
#ifndef HVDRUN_BYTES_H
#define HVDRUN_BYTES_H

#include <stddef.h>

typedef struct {
  char *buf;
  size_t off, len, cap; /* waiting: buf[off..len) */
} bytes;

/* Makes room for n more bytes at buf + len.  0, or -1 when out of memory. */
int bytes_reserve(bytes *b, size_t n);
size_t bytes_pending(const bytes *b);
/* Writes what fd takes now without blocking (O_NONBLOCK): 0, or -1 with
 * errno (EPIPE: the reader is gone). */
int bytes_write(bytes *b, int fd);
/* Drops the first n waiting bytes (n <= bytes_pending()): taken by
 * another way than bytes_write(). */
void bytes_consume(bytes *b, size_t n);
void bytes_free(bytes *b);

#endif /* HVDRUN_BYTES_H */
