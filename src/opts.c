/*
 * opts.c -- hvd_opts of any size a caller may have been built with
 * (opts.h), and the library's version.
 *
 * A program built against an older hvd.h passes a smaller hvd_opts:
 * struct_size tells, and the fields it does not cover keep their
 * defaults.  Each field's end is a size some hvd.h had or may have had
 * (fields are only ever added at the end), so those are the sizes
 * accepted; anything else is not an hvd_opts at all (an uninitialised
 * struct, a pointer to something else).
 */
#include "opts.h"

#include <stddef.h>
#include <string.h>

#include "common.h"

#define FIELD_END(f) (offsetof(hvd_opts, f) + sizeof(((hvd_opts *)0)->f))

/* The sizes of hvd_opts a caller can have: each field's end, the first
 * covering struct_size and process_set, and the struct with its padding
 * (offsetof(stream): hvd.h ended in device and 4 bytes of padding before
 * stream was added). */
static const size_t sizes[] = {
    FIELD_END(process_set), FIELD_END(prescale_factor), FIELD_END(postscale_factor),
    FIELD_END(callback),    FIELD_END(callback_arg),    FIELD_END(shape),
    FIELD_END(ndims),       FIELD_END(reserved_),       FIELD_END(device),
    offsetof(hvd_opts, stream), FIELD_END(stream), sizeof(hvd_opts)};

static int known_size(size_t n) {
  for (size_t i = 0; i < HVD__ARRAY_LEN(sizes); i++)
    if (sizes[i] == n) return 1;
  return 0;
}

int hvd__opts_read(const hvd_opts *in, hvd_opts *out) {
  static const hvd_opts defaults = HVD_OPTS_INIT;
  *out = defaults;
  if (!in) return 0;
  size_t n = in->struct_size;
  if (n > sizeof(hvd_opts))
    return hvd__err(HVD_E_INVALID, "hvd_opts.struct_size is %zu bytes, more than this libhvd's "
                    "%zu: built against a newer hvd.h, or not set from HVD_OPTS_INIT", n,
                    sizeof(hvd_opts));
  if (!known_size(n))
    return hvd__err(HVD_E_INVALID, "hvd_opts.struct_size %zu is not the size of any hvd_opts "
                    "(%zu here): start from HVD_OPTS_INIT", n, sizeof(hvd_opts));
  memcpy(out, in, n);
  out->struct_size = sizeof(hvd_opts);
  return 0;
}

unsigned hvd_version(void) { return HVD_VERSION_HEX; }
