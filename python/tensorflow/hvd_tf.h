/*
 * hvd_tf.h -- what the parts of hvd.tensorflow's libraries share: the
 * table of hvd._C (capi.c keeps it), the set sizes the XLA kernels need
 * when they compile, the XLA handlers' registration (xla.c), and done.cc's
 * keeping of TensorFlow's done callback.
 */
#ifndef HVD_TF_H
#define HVD_TF_H

#include "hvd_capi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* capi.c: keeps hvd._C's table (0), or refuses one older than this
 * library needs (-1); the table kept, NULL before. */
int hvd_tf_use_capi(const void *table);
const hvd_capi *hvd_tf_capi(void);

/* The number of ranks of process set `set` (0: the job's), or an HVD_E_*
 * code (hvd not initialised, an unknown set). */
int hvd_tf_set_size(int set);

/* xla.c: registers the XLA FFI handlers with TensorFlow's XLA, given its
 * FFI API (an XLA_FFI_Api); 0 or -1. */
struct XLA_FFI_Api;
int hvd_tf_xla_register(const struct XLA_FFI_Api *api);

/* done.cc: TensorFlow's done, kept beyond compute_async_func's return. */
void *hvd_tf_keep_done(void *done);
void hvd_tf_run_done(void *kept);

#ifdef __cplusplus
}
#endif

#endif /* HVD_TF_H */
