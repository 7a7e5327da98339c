/*
 * capi.c -- hvd._C's table of engine functions as hvd.tensorflow's
 * libraries keep it.  The op library and the XLA library (loaded only
 * under HOROVOD_ENABLE_XLA_OPS=1) each link a copy: each is handed the
 * table by hvd.tensorflow when it loads them, and neither sees the other's
 * hidden symbols.
 */
#include "hvd_tf.h"

static const hvd_capi *capi;

const hvd_capi *hvd_tf_capi(void) { return capi; }

int hvd_tf_use_capi(const void *table) {
  const hvd_capi *t = table;
  if (!t || t->version != HVD_CAPI_VERSION || t->size < sizeof(hvd_capi)) return -1;
  capi = t;
  return 0;
}

int hvd_tf_set_size(int set) {
  if (!capi || !capi->is_initialized()) return HVD_E_NOT_INITIALIZED;
  return set == 0 ? capi->size_of_job() : capi->process_set_size(set);
}
