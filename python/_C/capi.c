/*
 * capi.c -- hvd._C._capi: libhvd's API as a table (hvd_capi.h) for the
 * bindings that live in other shared objects, so that they drive this
 * module's engine rather than a copy of their own.
 */
#include "engine/waits.h"
#include "hvd_capi.h"
#include "pyhvd.h"

static const hvd_capi capi = {
    .size = sizeof(hvd_capi),
    .version = HVD_CAPI_VERSION,
    .is_initialized = hvd_is_initialized,
    .rank = hvd_rank,
    .size_of_job = hvd_size,
    .local_rank = hvd_local_rank,
    .local_size = hvd_local_size,
    .process_set_rank = hvd_process_set_rank,
    .process_set_size = hvd_process_set_size,
    .reducescatter_count = hvd_reducescatter_count,
    .allreduce_async_opts = hvd_allreduce_async_opts,
    .broadcast_async_opts = hvd_broadcast_async_opts,
    .allgather_async = hvd_allgather_async,
    .alltoall_async = hvd_alltoall_async,
    .reducescatter_async = hvd_reducescatter_async,
    .grouped_allreduce_async = hvd_grouped_allreduce_async,
    .grouped_allgather_async = hvd_grouped_allgather_async,
    .grouped_reducescatter_async = hvd_grouped_reducescatter_async,
    .poll = hvd_poll,
    .wait = hvd_wait,
    .join = hvd_join,
    .barrier = hvd_barrier,
    .last_error = hvd_last_error,
    .strerror = hvd_strerror,
    .dtype_size = hvd_dtype_size,
    .waits_untracked = hvd__waits_untracked,
    .waits_op = hvd__waits_op,
    .waits_graph = hvd__waits_graph,
};

int pyhvd_add_capi(PyObject *m) {
  PyObject *cap = PyCapsule_New((void *)&capi, HVD_CAPI_NAME, NULL);
  if (!cap) return -1;
  int rc = pyhvd_add_ref(m, "_capi", cap);
  Py_DECREF(cap);
  return rc;
}
