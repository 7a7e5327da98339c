/*
 * error.c -- hvd-report's one error message: the part that fails says
 * what and where (file, line), main prints it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "report.h"

static char message[1024];

int rp_err(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return -1;
}

const char *rp_error(void) { return message; }
