/*
 * pyhvd.h -- what the parts of the CPython extension hvd._C share.
 *
 * hvd._C is a thin layer over libhvd's public API: the Python package
 * (python/hvd) turns tensors into (address, count, dtype) and back, and
 * keeps them alive; this layer enqueues, waits with the GIL released, and
 * turns hvd's errors into Python exceptions carrying hvd's message.
 */
#ifndef PYHVD_H
#define PYHVD_H

/* CPython's limited API (the stable ABI, abi3) as of 3.9: one hvd._C
 * (_C.abi3.so) loads in every CPython from 3.9 on, so one wheel serves
 * them all (docs/install.md says what it costs a call).  CMake defines
 * Py_LIMITED_API; this header holds the code to it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hvd.h"

/* hvd._C.HorovodInternalError (a RuntimeError): a collective failed. */
extern PyObject *pyhvd_internal_error;

/* Raise the exception for an HVD_E_* code and return NULL, as horovod.torch
 * would (its C++ layer's InvalidArgument becomes ValueError, every other
 * failure of a collective HorovodInternalError):
 *   pyhvd_raise_query    queries and set-up (rank(), add_process_set()...):
 *                        ValueError for a bad argument or before init(),
 *                        else HorovodInternalError; hvd_last_error()'s text.
 *   pyhvd_raise_enqueue  a collective refused at enqueue: ValueError for a
 *                        bad argument, else HorovodInternalError (before
 *                        init() too, as Horovod's collectives).
 *   pyhvd_raise_failure  a collective that failed (msg: hvd's message):
 *                        HorovodInternalError. */
PyObject *pyhvd_raise_query(int code);
PyObject *pyhvd_raise_enqueue(int code);
PyObject *pyhvd_raise_failure(int code, const char *msg);

/* hvd_init_comm() on an mpi4py communicator's Fortran handle
 * (mpi_on/comm.c), or HVD_E_UNSUPPORTED in builds without MPI
 * (mpi_off/comm.c). */
int pyhvd_init_comm(long fortran_handle);

/* Adds hvd._C._capi, libhvd's API as a table for other shared objects
 * (capi.c, hvd_capi.h). */
int pyhvd_add_capi(PyObject *m);

/* ---- handles (handle.c) ---- */

/* What a completed handle leaves behind. */
enum { PYHVD_PLAIN, PYHVD_GATHER };

/* hvd._C.Handle, a heap type (the limited API has no static types);
 * pyhvd_handle_type_new() makes it once, at import. */
extern PyTypeObject *pyhvd_handle_type;
PyTypeObject *pyhvd_handle_type_new(void);

/* PyModule_AddObjectRef(), which the limited API has from 3.10 only. */
int pyhvd_add_ref(PyObject *m, const char *name, PyObject *value);

/* A new Handle, not started yet.  keep: objects (tensors) to keep alive
 * until the operation completes (may be NULL).  For PYHVD_GATHER of
 * ntensors tensors over nranks ranks, the enqueue has hvd write its
 * malloc()ed outputs to pyhvd_handle_results() (ntensors pointers) and the
 * per-rank counts to pyhvd_handle_counts() (ntensors x nranks); the Handle
 * owns both. */
PyObject *pyhvd_handle_new(int kind, PyObject *keep, size_t esize, int ntensors, int nranks);
void **pyhvd_handle_results(PyObject *handle);
size_t *pyhvd_handle_counts(PyObject *handle);

/* Records the enqueue's result: h >= 0 starts the handle and returns it;
 * h < 0 drops it and raises (NULL). */
PyObject *pyhvd_handle_start(PyObject *handle, hvd_handle h);

/* What a started PYHVD_PLAIN handle's wait() returns instead of None
 * (a new reference is taken). */
void pyhvd_handle_set_result(PyObject *handle, PyObject *result);

/* ---- blocking calls Ctrl-C can interrupt (wait.c) ---- */

/* A blocking hvd call: hvd_wait, or a wrapper of hvd_barrier/hvd_join. */
typedef int pyhvd_call(hvd_handle h);
typedef struct pyhvd_job pyhvd_job;

/* What pyhvd_blocking() returns when Ctrl-C (or another signal handler)
 * raised; the call goes on. */
#define PYHVD_INTERRUPTED (-1000)

/* Sets up the helper threads; at import. 0, or -1 with an exception. */
int pyhvd_wait_init(void);

/* Runs call(h) with the GIL released (held on entry and exit) and returns
 * its result (>= 0, or an HVD_E_* code with hvd's message in *msg, to
 * free()).  In the main thread, signal handlers run while it waits: if one
 * raises, PYHVD_INTERRUPTED, and *job holds the call still running; pass
 * *job again to go on waiting (NULL to start), or abandon it. */
int pyhvd_blocking(pyhvd_call *call, hvd_handle h, pyhvd_job **job, char **msg);

/* pyhvd_blocking(hvd_wait, h, ...), except that an operation that is
 * complete, or completes within a brief spin, is collected at once. */
int pyhvd_wait(hvd_handle h, pyhvd_job **job, char **msg);

/* 1 once an interrupted job's call has returned (collect it with
 * pyhvd_blocking()). */
int pyhvd_job_done(pyhvd_job *job);

/* Nobody will collect job: when its call returns, release(arg) and the
 * job are freed (at once if it has returned). */
void pyhvd_job_abandon(pyhvd_job *job, void (*release)(void *), void *arg);

/* Runs call(h) in a helper, uncollected, then release(arg); 0 or -1 when
 * no helper could start. */
int pyhvd_abandon_call(pyhvd_call *call, hvd_handle h, void (*release)(void *), void *arg);

/* A started handle takes over job: the wait of its operation that
 * pyhvd_wait() left running when Ctrl-C interrupted it. */
void pyhvd_handle_set_job(PyObject *handle, pyhvd_job *job);

/* ---- the module's functions (ops.c) ---- */

extern PyMethodDef pyhvd_op_methods[];
extern PyMethodDef pyhvd_rdzv_methods[]; /* rdzv.c */
extern PyMethodDef pyhvd_fast_methods[]; /* fast.c */

/* fast.c's torch_allreduce() mode: flags (hvd._C.FAST_IN_PLACE, FAST_WAIT);
 * eager_allreduce()'s flags: FAST_F32_FACTORS. */
enum { PYHVD_FAST_IN_PLACE = 1, PYHVD_FAST_WAIT = 2, PYHVD_FAST_F32_FACTORS = 4 };

/* What ops.c and fast.c share: hvd_opts of a call, and a tensor's shape
 * (a sequence of ints) put in o, held by dims (0, or -1 raised). */
hvd_opts pyhvd_make_opts(int process_set, double prescale, double postscale, int device,
                         unsigned long long stream);
int pyhvd_set_shape(hvd_opts *o, PyObject *shape, int64_t dims[HVD_MAX_DIMS]);

#endif
