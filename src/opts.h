/*
 * opts.h -- reading a caller's hvd_opts, whatever hvd.h it was built with.
 */
#ifndef HVD_OPTS_H
#define HVD_OPTS_H

#include "hvd.h"

/* *out gets the defaults (HVD_OPTS_INIT) overlaid with the fields of *in
 * that in->struct_size covers; in NULL: the defaults.  HVD_E_INVALID
 * naming the size when it is smaller than struct_size and process_set,
 * does not end at a field, or is larger than this library's hvd_opts. */
int hvd__opts_read(const hvd_opts *in, hvd_opts *out);

#endif /* HVD_OPTS_H */
