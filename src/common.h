/*
 * common.h -- what every internal module of libhvd shares: error
 * reporting, deadlines, logging.  Internal names start with hvd__.
 */
#ifndef HVD_COMMON_H
#define HVD_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

#define HVD__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HVD__UNUSED(x) ((void)(x))
#define HVD__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Errors (error.c) ----
 * Each thread keeps the message of its last error.  The lowest layer that
 * sees a failure sets it with hvd__err(); each layer above prepends where
 * it was with hvd__err_prefix(), so the user reads
 * "allreduce 'grad': rank 2 lost: connection closed by peer". */

/* Sets this thread's message and returns code (a negative HVD_E_*). */
int hvd__err(int code, const char *fmt, ...) HVD__PRINTF(2, 3);

/* Like hvd__err, appending ": <strerror(errnum)>". */
int hvd__err_sys(int code, int errnum, const char *fmt, ...) HVD__PRINTF(3, 4);

/* Prepends "<formatted>: " to this thread's message; returns code. */
int hvd__err_prefix(int code, const char *fmt, ...) HVD__PRINTF(2, 3);

/* Clears this thread's message. */
void hvd__err_clear(void);

/* Propagate a failure: `HVD__CHECK(expr)` returns expr's code if negative. */
#define HVD__CHECK(expr)              \
  do {                                \
    int hvd__rc_ = (expr);            \
    if (hvd__rc_ < 0) return hvd__rc_; \
  } while (0)

/* ---- Time and the machine (error.c) ----
 * Deadlines are absolute CLOCK_MONOTONIC times in milliseconds. */
uint64_t hvd__now_ms(void);
uint64_t hvd__now_us(void); /* the same clock in microseconds: the timeline's */
uint64_t hvd__now_ns(void); /* and in nanoseconds: the engine's */
uint64_t hvd__deadline_in(int64_t ms); /* now + ms; ms < 0 means "never" */
/* Milliseconds left before deadline, clamped to [0, INT32_MAX] for poll(). */
int hvd__ms_left(uint64_t deadline);
/* The CPUs this process may run on (its affinity mask; at least 1). */
int hvd__cpus(void);
/* Whether `ranks` processes on this host each have a core of their own
 * (as many CPUs as ranks): then a waiting thread may spin a while. */
int hvd__core_each(int ranks);
#define HVD__NEVER UINT64_MAX

/* ---- Logging (log.c) ----
 * Levels and the variable that selects them are Horovod's:
 * HOROVOD_LOG_LEVEL=TRACE|DEBUG|INFO|WARNING|ERROR|FATAL (default WARNING),
 * HOROVOD_LOG_HIDE_TIME=1 drops the timestamp. */
enum { HVD_LOG_TRACE, HVD_LOG_DEBUG, HVD_LOG_INFO, HVD_LOG_WARNING, HVD_LOG_ERROR,
       HVD_LOG_FATAL };
void hvd__log(int level, const char *fmt, ...) HVD__PRINTF(2, 3);
int hvd__log_enabled(int level);
/* Called by hvd_init once the rank is known, for the "[hvd rank N]" prefix. */
void hvd__log_set_rank(int rank);

#endif /* HVD_COMMON_H */
