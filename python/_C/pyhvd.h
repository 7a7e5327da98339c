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

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hvd.h"

/* hvd._C.HorovodInternalError (a RuntimeError): a collective failed. */
extern PyObject *pyhvd_internal_error;

/* Raises the exception for an HVD_E_* code with hvd_last_error():
 * ValueError for a bad argument or an unsupported request, else
 * HorovodInternalError.  Returns NULL. */
PyObject *pyhvd_raise(int code);

/* ---- handles (handle.c) ---- */

/* What a completed handle leaves behind. */
enum { PYHVD_PLAIN, PYHVD_GATHER };

extern PyTypeObject pyhvd_handle_type;

/* A new Handle, not started yet.  keep: objects (tensors) to keep alive
 * until the operation completes (may be NULL).  For PYHVD_GATHER, the
 * enqueue writes hvd's malloc()ed output to *pyhvd_handle_result_slot()
 * and ncounts per-rank counts to pyhvd_handle_counts(); the Handle owns
 * both. */
PyObject *pyhvd_handle_new(int kind, PyObject *keep, size_t esize, int ncounts);
void **pyhvd_handle_result_slot(PyObject *handle);
size_t *pyhvd_handle_counts(PyObject *handle);

/* Records the enqueue's result: h >= 0 starts the handle and returns it;
 * h < 0 drops it and raises (NULL). */
PyObject *pyhvd_handle_start(PyObject *handle, hvd_handle h);

/* ---- the module's functions (ops.c) ---- */

extern PyMethodDef pyhvd_op_methods[];

#endif
