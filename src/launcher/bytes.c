/*
 * bytes.c -- a queue of bytes to write (bytes.h).
 */
#include "bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bytes_reserve(bytes *b, size_t n) {
  if (b->cap - b->len >= n) return 0;
  if (b->off > 0) { /* what was written makes room at the front */
    memmove(b->buf, b->buf + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
    if (b->cap - b->len >= n) return 0;
  }
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len < n) cap *= 2;
  char *buf = realloc(b->buf, cap);
  if (!buf) return -1;
  b->buf = buf;
  b->cap = cap;
  return 0;
}

size_t bytes_pending(const bytes *b) { return b->len - b->off; }

int bytes_write(bytes *b, int fd) {
  while (b->off < b->len) {
    ssize_t n = write(fd, b->buf + b->off, b->len - b->off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    if (n < 0) return -1;
    b->off += (size_t)n;
  }
  b->off = b->len = 0;
  return 0;
}

void bytes_consume(bytes *b, size_t n) {
  b->off += n;
  if (b->off == b->len) b->off = b->len = 0;
}

void bytes_free(bytes *b) {
  free(b->buf);
  memset(b, 0, sizeof *b);
}
