/*
 * hvd_capi.h -- libhvd's public API as a table of function pointers, for
 * the framework bindings that are not Python extensions themselves (the
 * TensorFlow op library, the JAX/XLA FFI handlers).
 *
 * hvd._C carries libhvd's objects with hidden symbols, so a process has
 * exactly one engine: the one inside hvd._C.  A second shared object that
 * linked libhvd again would get a second, uninitialised engine.  Instead
 * hvd._C exports this table as the PyCapsule hvd._C._capi (named
 * HVD_CAPI_NAME); the binding's Python side hands its address to the
 * binding's library once (hvd_capi_from_capsule below, or ctypes), and the
 * library calls hvd through it.  Every binding then shares negotiation,
 * fusion, the cache, the timeline and the stall inspector with hvd.torch.
 *
 * Only fields are ever appended; a binding checks `size` covers the
 * fields it uses and `version` (HVD_CAPI_VERSION) before use.
 */
#ifndef HVD_CAPI_H
#define HVD_CAPI_H

#include <stddef.h>

#include "hvd.h"

#define HVD_CAPI_NAME "hvd._C._capi"
#define HVD_CAPI_VERSION 1

typedef struct hvd_capi {
  size_t size; /* sizeof(hvd_capi) in the hvd._C that filled it */
  int version; /* HVD_CAPI_VERSION */

  int (*is_initialized)(void);
  int (*rank)(void);
  int (*size_of_job)(void); /* hvd_size */
  int (*local_rank)(void);
  int (*local_size)(void);
  int (*process_set_rank)(int process_set);
  int (*process_set_size)(int process_set);
  size_t (*reducescatter_count)(size_t count, int rank);

  hvd_handle (*allreduce_async_opts)(const void *sendbuf, void *recvbuf, size_t count,
                                     hvd_dtype dtype, hvd_op op, const char *name,
                                     const hvd_opts *opts);
  hvd_handle (*broadcast_async_opts)(void *buf, size_t count, hvd_dtype dtype, int root_rank,
                                     const char *name, const hvd_opts *opts);
  hvd_handle (*allgather_async)(const void *sendbuf, size_t count, hvd_dtype dtype, void **recvbuf,
                                size_t *recvcounts, const char *name, const hvd_opts *opts);
  hvd_handle (*alltoall_async)(const void *sendbuf, const size_t *sendcounts, hvd_dtype dtype,
                               void **recvbuf, size_t *recvcounts, const char *name,
                               const hvd_opts *opts);
  hvd_handle (*reducescatter_async)(const void *sendbuf, void *recvbuf, size_t count,
                                    hvd_dtype dtype, hvd_op op, const char *name,
                                    const hvd_opts *opts);
  hvd_handle (*grouped_allreduce_async)(const void *const *sendbufs, void *const *recvbufs,
                                        const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                                        const char *name, const hvd_opts *opts);
  hvd_handle (*grouped_allgather_async)(const void *const *sendbufs, const size_t *counts, int n,
                                        hvd_dtype dtype, void **recvbufs, size_t *recvcounts,
                                        const char *name, const hvd_opts *opts);
  hvd_handle (*grouped_reducescatter_async)(const void *const *sendbufs, void *const *recvbufs,
                                            const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                                            const char *name, const hvd_opts *opts);
  int (*poll)(hvd_handle h);
  int (*wait)(hvd_handle h);
  int (*join)(void);
  int (*barrier)(void);
  const char *(*last_error)(void);
  const char *(*strerror)(int code);
  size_t (*dtype_size)(hvd_dtype dtype);

  /* For a binding whose callers wait on their framework's completion of
   * an op rather than in hvd_wait (TensorFlow's ops): what it tells the
   * engine so that a certain deadlock is seen (src/engine/waits.h). */
  void (*waits_untracked)(void);
  void (*waits_op)(int delta);
  void (*waits_graph)(int live, int in_flight);
} hvd_capi;

#endif /* HVD_CAPI_H */
