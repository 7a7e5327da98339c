/*
 * error.c -- per-thread error messages, error names, and the clock.
 *
 * Every failing call leaves a message in a thread-local buffer, so two
 * threads that fail at once each read their own story from hvd_last_error().
 * Messages are built bottom-up: the layer that sees the failure writes the
 * detail, each layer above prepends where it happened.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define ERR_MAX 1024

static _Thread_local char last_error[ERR_MAX];

static void set_message(const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
}

int hvd__err(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(fmt, ap);
  va_end(ap);
  return code;
}

int hvd__err_sys(int code, int errnum, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(fmt, ap);
  va_end(ap);
  size_t n = strlen(last_error);
  snprintf(last_error + n, sizeof last_error - n, ": %s", strerror(errnum));
  return code;
}

int hvd__err_prefix(int code, const char *fmt, ...) {
  char joined[2 * ERR_MAX + 2];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(joined, ERR_MAX, fmt, ap);
  va_end(ap);
  size_t len = n < 0 ? 0 : (size_t)n >= ERR_MAX ? ERR_MAX - 1 : (size_t)n;
  if (last_error[0] != '\0') {
    memcpy(joined + len, ": ", 2);
    memcpy(joined + len + 2, last_error, strlen(last_error) + 1);
  }
  joined[ERR_MAX - 1] = '\0'; /* truncate to fit */
  memcpy(last_error, joined, ERR_MAX);
  return code;
}

void hvd__err_clear(void) { last_error[0] = '\0'; }

const char *hvd_last_error(void) { return last_error; }

/* One table for both names and descriptions keeps them from drifting. */
static const struct {
  int code;
  const char *name, *text;
} errors[] = {
    {HVD_OK, "HVD_OK", "success"},
    {HVD_E_INVALID, "HVD_E_INVALID", "invalid argument"},
    {HVD_E_NOT_INITIALIZED, "HVD_E_NOT_INITIALIZED", "hvd_init() has not been called"},
    {HVD_E_ALREADY_INITIALIZED, "HVD_E_ALREADY_INITIALIZED", "hvd_init() was already called"},
    {HVD_E_UNSUPPORTED, "HVD_E_UNSUPPORTED", "operation not supported"},
    {HVD_E_NOMEM, "HVD_E_NOMEM", "out of memory"},
    {HVD_E_TIMEOUT, "HVD_E_TIMEOUT", "timed out waiting for a peer"},
    {HVD_E_PEER_LOST, "HVD_E_PEER_LOST", "lost connection to a peer"},
    {HVD_E_PROTOCOL, "HVD_E_PROTOCOL", "malformed data from the network"},
    {HVD_E_AUTH, "HVD_E_AUTH", "peer failed authentication"},
    {HVD_E_MISMATCH, "HVD_E_MISMATCH", "ranks disagree on a collective"},
    {HVD_E_ENV, "HVD_E_ENV", "bad environment variable"},
    {HVD_E_SYSTEM, "HVD_E_SYSTEM", "system call failed"},
    {HVD_E_ABORTED, "HVD_E_ABORTED", "communicator aborted by an earlier error"},
    {HVD_E_HOSTS_UPDATED, "HVD_E_HOSTS_UPDATED", "hosts were added or removed (elastic)"},
    {HVD_E_DESYNC, "HVD_E_DESYNC", "the ranks wait on each other: a certain deadlock"},
};

const char *hvd_strerror(int err) {
  for (size_t i = 0; i < HVD__ARRAY_LEN(errors); i++)
    if (errors[i].code == err) return errors[i].text;
  return "unknown error";
}

const char *hvd_err_name(int err) {
  for (size_t i = 0; i < HVD__ARRAY_LEN(errors); i++)
    if (errors[i].code == err) return errors[i].name;
  return "HVD_E_UNKNOWN";
}

uint64_t hvd__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t hvd__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t hvd__now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t hvd__deadline_in(int64_t ms) {
  if (ms < 0) return HVD__NEVER;
  return hvd__now_ms() + (uint64_t)ms;
}

int hvd__ms_left(uint64_t deadline) {
  if (deadline == HVD__NEVER) return INT32_MAX;
  uint64_t now = hvd__now_ms();
  if (now >= deadline) return 0;
  uint64_t left = deadline - now;
  return left > INT32_MAX ? INT32_MAX : (int)left;
}

int hvd__cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

int hvd__core_each(int ranks) { return ranks <= hvd__cpus(); }
