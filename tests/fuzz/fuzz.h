/*
 * fuzz.h -- what the libFuzzer targets (tests/fuzz/fuzz_*.c) share.
 *
 * A target is LLVMFuzzerTestOneInput over one decoder of bytes that come
 * from outside the process.  libFuzzer with ASan+UBSan reports crashes,
 * leaks, timeouts and oversized allocations itself; FUZZ_CHECK adds the
 * properties a decoder must keep (what decodes re-encodes to the same
 * bytes, a failure leaves a message, ...) and aborts, which libFuzzer
 * reports as a crash with the input that caused it.
 *
 * Inputs often start with a few control bytes (which side, which job
 * size) taken with fuzz_take_u8; the rest are the bytes a peer sent.
 */
#ifndef HVD_FUZZ_H
#define HVD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: property failed: %s (last error: %s)\n", __FILE__,      \
              __LINE__, #cond, hvd_last_error());                                     \
      abort();                                                                        \
    }                                                                                 \
  } while (0)

/* An error must say what failed: a code and a message. */
#define FUZZ_CHECK_ERROR(rc) FUZZ_CHECK((rc) < 0 && hvd_last_error()[0] != '\0')

/* The input, consumed from the front. */
typedef struct {
  const uint8_t *p;
  size_t n;
} fuzz_input;

static inline uint8_t fuzz_take_u8(fuzz_input *in) {
  if (in->n == 0) return 0;
  in->n--;
  return *in->p++;
}

/* Quiet logs (warnings about strangers would flood the output) and a
 * fixed job secret. */
static inline void fuzz_quiet(void) { setenv("HOROVOD_LOG_LEVEL", "FATAL", 1); }

/* A connected pair of stream sockets: [0] for the code under test, [1]
 * for the peer, whose bytes are written in advance and followed by the
 * end of the stream, so the code under test never waits. */
static inline void fuzz_socketpair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) abort();
  int big = 4 << 20;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
}

/* The most a peer says in one input: what the socket buffers surely hold. */
#define FUZZ_PEER_MAX (128u << 10)

/* Writes the peer's bytes (at most FUZZ_PEER_MAX), then ends its stream
 * (the sockets stay open, so what the code under test writes back is
 * taken). */
static inline void fuzz_peer_says(int fd, const uint8_t *p, size_t n) {
  if (n > FUZZ_PEER_MAX) n = FUZZ_PEER_MAX;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) abort(); /* the buffers are sized for any input */
    p += w;
    n -= (size_t)w;
  }
  shutdown(fd, SHUT_WR);
}

#endif /* HVD_FUZZ_H */
