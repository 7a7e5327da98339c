/*
 * error.c -- hvd_nn's per-thread error message.
 *
 * The same scheme as libhvd's: the code that sees a failure writes what and
 * where; a failure inside hvd itself keeps hvd's message after ours.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn_int.h"

#define ERR_MAX 1024

static _Thread_local char last_error[ERR_MAX];

const char *hvd_nn_last_error(void) { return last_error; }

void hvd_nn__err_clear(void) { last_error[0] = '\0'; }

/* Appends ": <s>" to the message, cutting it at the buffer's end. */
static void append(const char *s) {
  size_t n = strlen(last_error), room = sizeof last_error - n;
  if (room < 3) return;
  memcpy(last_error + n, ": ", 2);
  size_t len = strnlen(s, room - 3);
  memcpy(last_error + n + 2, s, len);
  last_error[n + 2 + len] = '\0';
}

int hvd_nn__err(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return code;
}

int hvd_nn__err_sys(int code, int errnum, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  append(strerror(errnum));
  return code;
}

int hvd_nn__err_hvd(int code, const char *fmt, ...) {
  char hvd_msg[ERR_MAX];
  snprintf(hvd_msg, sizeof hvd_msg, "%s", hvd_last_error());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  append(hvd_msg);
  return code;
}
