/*
 * handle.c -- hvd._C.Handle: one enqueued operation.
 *
 * The Handle holds what the operation needs to outlive the Python call
 * that started it: the tensors it reads and writes (so they are not freed
 * while hvd owns their memory) and, for allgather and alltoall, the output
 * hvd allocates and the per-rank counts.  wait() blocks with the GIL
 * released, so the engine's thread and other Python threads run.
 *
 * A Handle dropped while its operation is in flight waits for it first:
 * freeing a buffer under the engine would corrupt memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pyhvd.h"

typedef struct {
  PyObject_HEAD
  hvd_handle h;
  int in_flight;
  int kind;
  PyObject *keep;
  size_t esize;      /* bytes per element of a gather's result */
  void *result;      /* a gather's output (malloc()ed by hvd) */
  size_t *counts;    /* a gather's per-rank counts */
  int ncounts;
} handle_object;

PyObject *pyhvd_handle_new(int kind, PyObject *keep, size_t esize, int ncounts) {
  handle_object *self = PyObject_New(handle_object, &pyhvd_handle_type);
  if (!self) return NULL;
  self->h = -1;
  self->in_flight = 0;
  self->kind = kind;
  self->keep = keep;
  Py_XINCREF(keep);
  self->esize = esize;
  self->result = NULL;
  self->ncounts = ncounts;
  self->counts = ncounts > 0 ? calloc((size_t)ncounts, sizeof *self->counts) : NULL;
  if (ncounts > 0 && !self->counts) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return (PyObject *)self;
}

void **pyhvd_handle_result_slot(PyObject *handle) {
  return &((handle_object *)handle)->result;
}

size_t *pyhvd_handle_counts(PyObject *handle) { return ((handle_object *)handle)->counts; }

/* Marks the enqueue done: from now on the handle must be waited. */
static void finish(handle_object *self) {
  self->in_flight = 0;
  Py_CLEAR(self->keep);
}

/* Blocks until done; 0 or the HVD_E_* code. */
static int wait_released(handle_object *self) {
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_wait(self->h);
  Py_END_ALLOW_THREADS
  finish(self);
  return rc;
}

static void handle_dealloc(handle_object *self) {
  if (self->in_flight) wait_released(self);
  Py_CLEAR(self->keep);
  free(self->result);
  free(self->counts);
  PyObject_Free(self);
}

/* The per-rank counts of a completed gather, as a list. */
static PyObject *counts_list(handle_object *self) {
  PyObject *list = PyList_New(self->ncounts);
  for (int i = 0; list && i < self->ncounts; i++) {
    PyObject *v = PyLong_FromSize_t(self->counts[i]);
    if (!v) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, i, v);
  }
  return list;
}

/* wait() -> None, or a gather's per-rank counts; raises on failure. */
static PyObject *handle_wait(handle_object *self, PyObject *unused) {
  (void)unused;
  if (!self->in_flight)
    return PyErr_Format(PyExc_ValueError, "handle %lld was already waited", (long long)self->h);
  int rc = wait_released(self);
  if (rc < 0) {
    PyErr_SetString(pyhvd_internal_error, hvd_last_error());
    return NULL;
  }
  if (self->kind == PYHVD_GATHER) return counts_list(self);
  Py_RETURN_NONE;
}

/* poll() -> True when done (wait() still collects it); raises on failure. */
static PyObject *handle_poll(handle_object *self, PyObject *unused) {
  (void)unused;
  if (!self->in_flight) Py_RETURN_TRUE;
  int rc = hvd_poll(self->h);
  if (rc < 0) {
    finish(self);
    PyErr_SetString(pyhvd_internal_error, hvd_last_error());
    return NULL;
  }
  return PyBool_FromLong(rc);
}

/* fetch(address) copies a completed gather's output to address (which
 * must hold sum(counts) elements) and frees hvd's copy. */
static PyObject *handle_fetch(handle_object *self, PyObject *arg) {
  if (self->kind != PYHVD_GATHER || self->in_flight)
    return PyErr_Format(PyExc_ValueError, "fetch: not a completed allgather or alltoall");
  unsigned long long addr = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  size_t total = 0;
  for (int i = 0; i < self->ncounts; i++) total += self->counts[i];
  if (total > 0 && self->result) memcpy((void *)(uintptr_t)addr, self->result, total * self->esize);
  free(self->result);
  self->result = NULL;
  Py_RETURN_NONE;
}

static PyMethodDef handle_methods[] = {
    {"wait", (PyCFunction)handle_wait, METH_NOARGS,
     "Block until the operation completes (GIL released). Returns None, or the per-rank "
     "counts of an allgather/alltoall; raises HorovodInternalError on failure."},
    {"poll", (PyCFunction)handle_poll, METH_NOARGS, "True when the operation has completed."},
    {"fetch", (PyCFunction)handle_fetch, METH_O,
     "Copy a completed allgather/alltoall's output to the given address."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pyhvd_handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hvd._C.Handle",
    .tp_basicsize = sizeof(handle_object),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An enqueued hvd operation.",
    .tp_methods = handle_methods,
};

PyObject *pyhvd_handle_start(PyObject *handle, hvd_handle h) {
  if (h < 0) {
    Py_DECREF(handle);
    return pyhvd_raise((int)h);
  }
  ((handle_object *)handle)->h = h;
  ((handle_object *)handle)->in_flight = 1;
  return handle;
}
