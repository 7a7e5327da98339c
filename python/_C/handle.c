/*
 * handle.c -- hvd._C.Handle: one enqueued operation.
 *
 * The Handle holds what the operation needs to outlive the Python call
 * that started it: the tensors it reads and writes (so they are not freed
 * while hvd owns their memory) and, for allgather and alltoall, where hvd
 * puts the outputs it allocates and the per-rank counts.  wait() blocks
 * with the GIL released and, in the main thread, gives way to Ctrl-C (see
 * wait.c): an interrupted wait leaves the Handle running, to be waited
 * again.
 *
 * A Handle dropped while its operation still runs does not wait for it:
 * a helper thread does, then frees what hvd wrote; the tensors it used are
 * never freed (hvd may still write into them), the price of a handle the
 * program forgot.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pyhvd.h"

/* Where hvd writes a gather's outputs: ntensors buffers it malloc()s and
 * their per-rank counts.  Apart from the Handle, so that it can outlive a
 * Handle dropped mid-operation. */
typedef struct {
  int ntensors, nranks;
  void **results;
  size_t *counts; /* ntensors x nranks */
} gather_out;

enum { RUNNING, ENDED, COLLECTED };

typedef struct {
  PyObject_HEAD hvd_handle h;
  int state; /* RUNNING: hvd owns the buffers; ENDED: it failed, not yet reported */
  int rc;    /* ENDED: the failure's code ... */
  char *msg; /* ... and message */
  int kind;
  PyObject *keep;
  size_t esize; /* bytes per element of a gather's results */
  gather_out *out;
  pyhvd_job *job;   /* an interrupted wait, still running in a helper */
  int waiting;      /* a thread is in wait() (which releases the GIL) */
  PyObject *result; /* what wait() returns, when set (fast.c's tensors) */
} handle_object;

static void gather_out_free(void *arg) {
  gather_out *out = arg;
  if (!out) return;
  for (int i = 0; i < out->ntensors; i++) free(out->results[i]);
  free(out);
}

static gather_out *gather_out_new(int ntensors, int nranks) {
  size_t n = (size_t)ntensors, r = (size_t)nranks;
  gather_out *out = calloc(1, sizeof *out + n * sizeof(void *) + n * r * sizeof(size_t));
  if (!out) return NULL;
  out->ntensors = ntensors;
  out->nranks = nranks;
  out->results = (void **)(out + 1);
  out->counts = (size_t *)(out->results + n);
  return out;
}

PyObject *pyhvd_handle_new(int kind, PyObject *keep, size_t esize, int ntensors, int nranks) {
  handle_object *self = PyObject_New(handle_object, pyhvd_handle_type);
  if (!self) return NULL;
  self->h = -1;
  self->state = COLLECTED;
  self->rc = 0;
  self->msg = NULL;
  self->kind = kind;
  self->keep = keep;
  Py_XINCREF(keep);
  self->esize = esize;
  self->job = NULL;
  self->waiting = 0;
  self->result = NULL;
  self->out = kind == PYHVD_GATHER ? gather_out_new(ntensors, nranks) : NULL;
  if (kind == PYHVD_GATHER && !self->out) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return (PyObject *)self;
}

void **pyhvd_handle_results(PyObject *handle) { return ((handle_object *)handle)->out->results; }

size_t *pyhvd_handle_counts(PyObject *handle) { return ((handle_object *)handle)->out->counts; }

/* hvd is done with the buffers: the tensors may go. */
static void release_buffers(handle_object *self, int state) {
  self->state = state;
  Py_CLEAR(self->keep);
}

/* Records a failure that poll() saw, for wait() to report. */
static void record_failure(handle_object *self, int rc) {
  self->rc = rc;
  self->msg = strdup(hvd_last_error());
  release_buffers(self, ENDED);
}

static void handle_dealloc(handle_object *self) {
  if (self->state == RUNNING) {
    int running = self->job != NULL;
    if (!running) {
      int rc = hvd_poll(self->h);
      if (rc == 1) hvd_wait(self->h); /* complete: returns at once */
      running = rc == 0;
    }
    if (running) {
      /* Still running: let a helper wait for it, and keep the tensors
       * forever (a reference never dropped) since hvd may still write. */
      if (self->job)
        pyhvd_job_abandon(self->job, gather_out_free, self->out);
      else if (pyhvd_abandon_call(hvd_wait, self->h, gather_out_free, self->out) < 0) {
        Py_BEGIN_ALLOW_THREADS
        hvd_wait(self->h); /* no thread to spare: wait here */
        Py_END_ALLOW_THREADS
        gather_out_free(self->out);
      }
      self->out = NULL;
      self->keep = NULL;
    }
  }
  Py_CLEAR(self->keep);
  Py_CLEAR(self->result);
  gather_out_free(self->out);
  free(self->msg);
  PyTypeObject *type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type); /* an instance of a heap type holds its type */
}

/* A completed gather's per-rank counts: a list per tensor. */
static PyObject *counts_lists(handle_object *self) {
  gather_out *out = self->out;
  PyObject *lists = PyList_New(out->ntensors);
  for (int t = 0; lists && t < out->ntensors; t++) {
    PyObject *list = PyList_New(out->nranks);
    for (int r = 0; list && r < out->nranks; r++) {
      PyObject *v = PyLong_FromSize_t(out->counts[(size_t)t * (size_t)out->nranks + (size_t)r]);
      if (!v)
        Py_CLEAR(list);
      else
        PyList_SetItem(list, r, v);
    }
    if (!list)
      Py_CLEAR(lists);
    else
      PyList_SetItem(lists, t, list);
  }
  return lists;
}

/* wait() -> None, or a gather's per-rank counts (a list per tensor);
 * raises HorovodInternalError when the operation failed. */
static PyObject *handle_wait(handle_object *self, PyObject *unused) {
  (void)unused;
  char *msg = NULL;
  int rc;
  switch (self->state) {
    case COLLECTED:
      return PyErr_Format(PyExc_ValueError, "handle %lld was already waited", (long long)self->h);
    case ENDED:
      rc = self->rc;
      msg = self->msg;
      self->msg = NULL;
      break;
    default:
      if (self->waiting)
        return PyErr_Format(PyExc_ValueError, "handle %lld is being waited by another thread",
                            (long long)self->h);
      self->waiting = 1;
      rc = pyhvd_wait(self->h, &self->job, &msg);
      self->waiting = 0;
      if (rc == PYHVD_INTERRUPTED) return NULL;
  }
  release_buffers(self, COLLECTED);
  PyObject *result = self->result;
  self->result = NULL;
  if (rc < 0) {
    Py_XDECREF(result);
    pyhvd_raise_failure(rc, msg);
    free(msg);
    return NULL;
  }
  if (self->kind == PYHVD_GATHER) return counts_lists(self);
  if (result) return result;
  Py_RETURN_NONE;
}

/* poll() -> True once the operation has ended, failed or not (wait()
 * collects it without blocking and raises its error). */
static PyObject *handle_poll(handle_object *self, PyObject *unused) {
  (void)unused;
  if (self->state != RUNNING) Py_RETURN_TRUE;
  if (self->job) return PyBool_FromLong(pyhvd_job_done(self->job));
  if (self->waiting) Py_RETURN_FALSE; /* another thread owns the handle in hvd_wait() */
  int rc = hvd_poll(self->h);
  if (rc < 0) {
    record_failure(self, rc);
    Py_RETURN_TRUE;
  }
  return PyBool_FromLong(rc);
}

/* fetch(i, address) copies tensor i's gathered output to address (which
 * must hold the sum of its counts in elements) and frees hvd's copy. */
static PyObject *handle_fetch(handle_object *self, PyObject *args) {
  int i;
  unsigned long long addr;
  if (!PyArg_ParseTuple(args, "iK", &i, &addr)) return NULL;
  gather_out *out = self->out;
  if (self->kind != PYHVD_GATHER || self->state != COLLECTED || i < 0 || i >= out->ntensors)
    return PyErr_Format(PyExc_ValueError, "fetch: not a completed allgather or alltoall output");
  size_t total = 0;
  for (int r = 0; r < out->nranks; r++)
    total += out->counts[(size_t)i * (size_t)out->nranks + (size_t)r];
  if (total > 0 && out->results[i])
    memcpy((void *)(uintptr_t)addr, out->results[i], total * self->esize);
  free(out->results[i]);
  out->results[i] = NULL;
  Py_RETURN_NONE;
}

static PyMethodDef handle_methods[] = {
    {"wait", (PyCFunction)handle_wait, METH_NOARGS,
     "Block until the operation completes (GIL released; Ctrl-C interrupts it in the main "
     "thread, leaving the operation running). Returns None, or for an allgather/alltoall the "
     "per-rank counts of each tensor; raises HorovodInternalError on failure."},
    {"poll", (PyCFunction)handle_poll, METH_NOARGS,
     "True when the operation has ended (wait() then returns at once)."},
    {"fetch", (PyCFunction)handle_fetch, METH_VARARGS,
     "fetch(i, address): copy a completed allgather/alltoall's output i to address."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject *pyhvd_handle_type;

/* Handles come from the collectives only: Handle() would be one that
 * never started (a heap type would otherwise inherit object's __new__). */
static PyObject *handle_new_refused(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  (void)args;
  (void)kwargs;
  (void)type;
  PyErr_SetString(PyExc_TypeError, "cannot create 'hvd._C.Handle' instances");
  return NULL;
}

PyTypeObject *pyhvd_handle_type_new(void) {
  static PyType_Slot slots[] = {
      /* A slot holds a void *: through uintptr_t, which ISO C allows. */
      {Py_tp_dealloc, (void *)(uintptr_t)handle_dealloc},
      {Py_tp_new, (void *)(uintptr_t)handle_new_refused},
      {Py_tp_doc, (void *)"An enqueued hvd operation."},
      {Py_tp_methods, handle_methods},
      {0, NULL},
  };
  static PyType_Spec spec = {
      .name = "hvd._C.Handle",
      .basicsize = sizeof(handle_object),
      .flags = Py_TPFLAGS_DEFAULT,
      .slots = slots,
  };
  return (PyTypeObject *)PyType_FromSpec(&spec);
}

PyObject *pyhvd_handle_start(PyObject *handle, hvd_handle h) {
  if (h < 0) {
    Py_DECREF(handle);
    return pyhvd_raise_enqueue((int)h);
  }
  ((handle_object *)handle)->h = h;
  ((handle_object *)handle)->state = RUNNING;
  return handle;
}

void pyhvd_handle_set_result(PyObject *handle, PyObject *result) {
  handle_object *self = (handle_object *)handle;
  Py_INCREF(result);
  Py_XDECREF(self->result);
  self->result = result;
}

void pyhvd_handle_set_job(PyObject *handle, pyhvd_job *job) {
  ((handle_object *)handle)->job = job;
}
