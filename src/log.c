/*
 * log.c -- hvd's own diagnostics on stderr.
 *
 * Warnings are for things a user should know even when every call
 * succeeds (a stranger dropped at the door, a slow peer).  Failures are
 * not logged here: they are returned, with their message, to the caller.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "env.h"

static atomic_int log_level = -1; /* -1: not read from the environment yet */
static atomic_int log_hide_time = 0;
static atomic_int log_rank = -1;

static int current_level(void) {
  int level = atomic_load(&log_level);
  if (level >= 0) return level;
  int hide = 0;
  /* A bad value must not silence warnings: fall back to WARNING.  hvd_init
   * reports the bad value as an error. */
  if (hvd__param_level(HVD_P_LOG_LEVEL, &level) < 0) level = HVD_LOG_WARNING;
  if (hvd__param_bool(HVD_P_LOG_HIDE_TIME, &hide) < 0) hide = 0;
  hvd__err_clear();
  atomic_store(&log_hide_time, hide);
  atomic_store(&log_level, level);
  return level;
}

int hvd__log_enabled(int level) { return level >= current_level(); }

void hvd__log_set_rank(int rank) { atomic_store(&log_rank, rank); }

void hvd__log(int level, const char *fmt, ...) {
  if (!hvd__log_enabled(level)) return;
  char msg[1024], stamp[32] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!atomic_load(&log_hide_time)) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "[%Y-%m-%d %H:%M:%S] ", &tm);
  }
  int rank = atomic_load(&log_rank);
  /* One fprintf per line so lines from several threads do not interleave. */
  if (rank >= 0)
    fprintf(stderr, "%s[hvd rank %d] %s: %s\n", stamp, rank, hvd__level_name(level), msg);
  else
    fprintf(stderr, "%s[hvd] %s: %s\n", stamp, hvd__level_name(level), msg);
}
