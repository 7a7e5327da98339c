/*
 * test_opts_size.c -- hvd_opts carries its size (struct_size) so that a
 * program built against an older hvd.h keeps working, and hvd_version()
 * is the version the macros say.
 *
 *   - a caller whose hvd_opts ended after postscale_factor (no callback,
 *     no shape): the struct is allocated at exactly that size, so reading
 *     a byte beyond it is an out-of-bounds read (ASan builds catch it);
 *     its scale factors apply and the fields it lacks get their defaults;
 *   - the same with garbage in the bytes after the old size, in a full
 *     struct: the library must not look at them;
 *   - a caller built before hvd_opts.device (its size ended in what is now
 *     reserved_) with a device ordinal past its size: runs on host memory;
 *   - a caller built before hvd_opts.stream (its size is device's end plus
 *     padding): accepted, the stream past it unread;
 *   - sizes that end inside a field, zero, and sizes larger than this
 *     library's hvd_opts fail with HVD_E_INVALID naming the size;
 *   - HVD_OPTS_INIT's size works (every other test uses it).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, checks, failures;

/* hvd_opts as a program built before callback, callback_arg, shape and
 * ndims were added would have it. */
typedef struct {
  size_t struct_size;
  int process_set;
  double prescale_factor;
  double postscale_factor;
} old_opts;
#define OLD_SIZE sizeof(old_opts)

static void old_size_struct(void) {
  old_opts *old = malloc(sizeof *old);
  old->struct_size = OLD_SIZE;
  old->process_set = 0;
  old->prescale_factor = 2.0;
  old->postscale_factor = 3.0;
  double x[3] = {1.0, 2.0, (double)rank};
  int rc = hvd_wait(hvd_allreduce_async_opts(x, x, 3, HVD_FLOAT64, HVD_SUM, "old.size",
                                             (const hvd_opts *)old));
  CHECK(rc == 0, "an old-size hvd_opts: %s: %s", hvd_err_name(rc), hvd_last_error());
  double ranks = (double)size * (size - 1) / 2; /* sum of 0..size-1 */
  CHECK(x[0] == 6.0 * size && x[1] == 12.0 * size && x[2] == 6.0 * ranks,
        "old-size scale factors: %g %g %g, expected %g %g %g", x[0], x[1], x[2], 6.0 * size,
        12.0 * size, 6.0 * ranks);
  free(old);
}

/* Past the caller's size, nothing is read: a shape pointer there would
 * otherwise fail the call (it does not match the count). */
static void garbage_past_the_size(void) {
  hvd_opts o;
  memset(&o, 0xA5, sizeof o);
  o.struct_size = OLD_SIZE;
  o.process_set = 0;
  o.prescale_factor = 1.0;
  o.postscale_factor = 1.0;
  float y = 1.0f;
  int rc = hvd_wait(hvd_allreduce_async_opts(&y, &y, 1, HVD_FLOAT32, HVD_SUM, "old.garbage", &o));
  CHECK(rc == 0 && y == (float)size, "fields past struct_size were read: %s (%s), y %g",
        hvd_err_name(rc), hvd_last_error(), (double)y);
}

/* A program built before `device` passes the size its struct had, which
 * ended in padding (now reserved_): the device field past it, garbage
 * here, is never read, so the call runs on host memory. */
static void before_device(void) {
  hvd_opts o = HVD_OPTS_INIT;
  o.struct_size = offsetof(hvd_opts, device);
  memset(&o.reserved_, 0xA5, sizeof o.reserved_);
  o.device = 5;
  float y = 1.0f;
  int rc = hvd_wait(hvd_allreduce_async_opts(&y, &y, 1, HVD_FLOAT32, HVD_SUM, "old.device", &o));
  CHECK(rc == 0 && y == (float)size, "an hvd_opts from before device: %s (%s), y %g",
        hvd_err_name(rc), hvd_last_error(), (double)y);
}

/* A program built before `stream` passes the size its struct had: device
 * and the padding after it.  Garbage in the stream field past it is never
 * read (it would be an invalid stream for a device call). */
static void before_stream(void) {
  hvd_opts o = HVD_OPTS_INIT;
  o.struct_size = offsetof(hvd_opts, stream);
  memset(&o.stream, 0xA5, sizeof o.stream);
  float y = 1.0f;
  int rc = hvd_wait(hvd_allreduce_async_opts(&y, &y, 1, HVD_FLOAT32, HVD_SUM, "old.stream", &o));
  CHECK(rc == 0 && y == (float)size, "an hvd_opts from before stream: %s (%s), y %g",
        hvd_err_name(rc), hvd_last_error(), (double)y);
}

static void bad_size(size_t n, const char *needle) {
  hvd_opts o = HVD_OPTS_INIT;
  o.struct_size = n;
  float y = 1.0f;
  hvd_handle h = hvd_allreduce_async_opts(&y, &y, 1, HVD_FLOAT32, HVD_SUM, "bad.size", &o);
  CHECK(h == HVD_E_INVALID, "struct_size %zu: %s, expected HVD_E_INVALID", n,
        hvd_err_name((int)h));
  CHECK(strstr(hvd_last_error(), needle) && strstr(hvd_last_error(), "allreduce"),
        "struct_size %zu: message '%s' lacks '%s'", n, hvd_last_error(), needle);
  if (h >= 0) hvd_wait(h);
  void *out = NULL;
  const void *in[1] = {&y};
  size_t count = 1;
  h = hvd_grouped_allgather_async(in, &count, 1, HVD_FLOAT32, &out, NULL, "bad.group", &o);
  CHECK(h == HVD_E_INVALID && strstr(hvd_last_error(), needle),
        "grouped call, struct_size %zu: %s '%s'", n, hvd_err_name((int)h), hvd_last_error());
  if (h >= 0) hvd_wait(h), free(out);
}

static void version(void) {
  unsigned v = hvd_version();
  CHECK(v == HVD_VERSION_HEX, "hvd_version() 0x%06x, the header says 0x%06x", v,
        (unsigned)HVD_VERSION_HEX);
  char s[32];
  snprintf(s, sizeof s, "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
  CHECK(strcmp(s, HVD_VERSION_STRING) == 0, "hvd_version() %s, HVD_VERSION_STRING %s", s,
        HVD_VERSION_STRING);
  CHECK((v >> 16) == HVD_VERSION_MAJOR && ((v >> 8) & 0xff) == HVD_VERSION_MINOR &&
            (v & 0xff) == HVD_VERSION_PATCH,
        "hvd_version() %s against the MAJOR/MINOR/PATCH macros", s);
}

int main(void) {
  limit_stalls();
  version(); /* before hvd_init too */
  if (init_or_complain()) return 1;
  rank = hvd_rank();
  size = hvd_size();
  old_size_struct();
  garbage_past_the_size();
  before_device();
  before_stream();
  bad_size(0, "struct_size 0 is not the size of any hvd_opts");
  bad_size(offsetof(hvd_opts, prescale_factor) + 3, "is not the size of any hvd_opts");
  bad_size(sizeof(hvd_opts) + 8, "newer hvd.h");
  hvd_opts o = HVD_OPTS_INIT;
  float y = 2.0f;
  int rc = hvd_wait(hvd_allreduce_async_opts(&y, &y, 1, HVD_FLOAT32, HVD_SUM, "init.size", &o));
  CHECK(rc == 0 && y == 2.0f * size, "HVD_OPTS_INIT: %s, y %g", hvd_last_error(), (double)y);
  hvd_shutdown();
  return report_checks("test_opts_size", rank, size, checks, failures);
}
