/*
 * ops.c -- hvd._C's collectives, join, barrier and process sets.
 *
 * Arguments are what the Python package extracts from tensors: addresses
 * (tensor.data_ptr()), element counts, hvd_dtype and hvd_op values, a name
 * or None, a process set id.  Every collective is asynchronous and returns
 * a Handle; the package waits on it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "pyhvd.h"

#define PTR(v) ((void *)(uintptr_t)(v))

static hvd_opts make_opts(int process_set, double prescale, double postscale) {
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = process_set;
  o.prescale_factor = prescale;
  o.postscale_factor = postscale;
  return o;
}

/* Members of a process set (0: the job), for sizing per-rank counts. */
static int set_size(int process_set) {
  return process_set == 0 ? hvd_size() : hvd_process_set_size(process_set);
}

/* allreduce and reducescatter take the same arguments. */
typedef hvd_handle reduce_fn(const void *send, void *recv, size_t count, hvd_dtype dtype,
                             hvd_op op, const char *name, const hvd_opts *opts);

static PyObject *reduce_async(PyObject *args, reduce_fn *fn) {
  unsigned long long send, recv;
  Py_ssize_t count;
  int dtype, op, pset;
  const char *name;
  double pre, post;
  PyObject *keep = NULL;
  if (!PyArg_ParseTuple(args, "KKniizidd|O", &send, &recv, &count, &dtype, &op, &name, &pset,
                        &pre, &post, &keep))
    return NULL;
  PyObject *h = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0);
  if (!h) return NULL;
  hvd_opts o = make_opts(pset, pre, post);
  return pyhvd_handle_start(
      h, fn(PTR(send), PTR(recv), (size_t)count, (hvd_dtype)dtype, (hvd_op)op, name, &o));
}

static PyObject *allreduce_async(PyObject *self, PyObject *args) {
  (void)self;
  return reduce_async(args, hvd_allreduce_async_opts);
}

static PyObject *reducescatter_async(PyObject *self, PyObject *args) {
  (void)self;
  return reduce_async(args, hvd_reducescatter_async);
}

/* Fills n addresses or counts from a Python sequence of ints. */
static int read_ints(PyObject *seq, Py_ssize_t n, unsigned long long *out, const char *what) {
  if (PySequence_Size(seq) != n) {
    PyErr_Format(PyExc_ValueError, "%s: expected %zd entries", what, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *v = PySequence_GetItem(seq, i);
    out[i] = v ? PyLong_AsUnsignedLongLong(v) : 0;
    Py_XDECREF(v);
    if (PyErr_Occurred()) return -1;
  }
  return 0;
}

static PyObject *grouped_allreduce_async(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *sends, *recvs, *counts, *keep = NULL;
  int dtype, op, pset;
  const char *name;
  double pre, post;
  if (!PyArg_ParseTuple(args, "OOOiizidd|O", &sends, &recvs, &counts, &dtype, &op, &name, &pset,
                        &pre, &post, &keep))
    return NULL;
  Py_ssize_t n = PySequence_Size(sends);
  if (n < 0) return NULL;
  unsigned long long *v = calloc((size_t)(3 * n + 1), sizeof *v);
  const void **sp = calloc((size_t)n + 1, sizeof *sp);
  void **rp = calloc((size_t)n + 1, sizeof *rp);
  size_t *cp = calloc((size_t)n + 1, sizeof *cp);
  PyObject *h = NULL;
  if (!v || !sp || !rp || !cp) {
    PyErr_NoMemory();
  } else if (read_ints(sends, n, v, "sends") == 0 && read_ints(recvs, n, v + n, "recvs") == 0 &&
             read_ints(counts, n, v + 2 * n, "counts") == 0) {
    for (Py_ssize_t i = 0; i < n; i++) {
      sp[i] = PTR(v[i]);
      rp[i] = PTR(v[n + i]);
      cp[i] = (size_t)v[2 * n + i];
    }
    h = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0);
    hvd_opts o = make_opts(pset, pre, post);
    if (h)
      h = pyhvd_handle_start(h, hvd_grouped_allreduce_async(sp, (void *const *)rp, cp, (int)n,
                                                            (hvd_dtype)dtype, (hvd_op)op, name,
                                                            &o));
  }
  free(v);
  free(sp);
  free(rp);
  free(cp);
  return h;
}

static PyObject *broadcast_async(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long buf;
  Py_ssize_t count;
  int dtype, root, pset;
  const char *name;
  PyObject *keep = NULL;
  if (!PyArg_ParseTuple(args, "Kniizi|O", &buf, &count, &dtype, &root, &name, &pset, &keep))
    return NULL;
  PyObject *h = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0);
  if (!h) return NULL;
  hvd_opts o = make_opts(pset, 1.0, 1.0);
  return pyhvd_handle_start(
      h, hvd_broadcast_async_opts(PTR(buf), (size_t)count, (hvd_dtype)dtype, root, name, &o));
}

static PyObject *allgather_async(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long send;
  Py_ssize_t count;
  int dtype, pset;
  const char *name;
  PyObject *keep = NULL;
  if (!PyArg_ParseTuple(args, "Knizi|O", &send, &count, &dtype, &name, &pset, &keep)) return NULL;
  int n = set_size(pset);
  if (n < 0) return pyhvd_raise(n);
  PyObject *h = pyhvd_handle_new(PYHVD_GATHER, keep, hvd_dtype_size((hvd_dtype)dtype), n);
  if (!h) return NULL;
  hvd_opts o = make_opts(pset, 1.0, 1.0);
  return pyhvd_handle_start(h, hvd_allgather_async(PTR(send), (size_t)count, (hvd_dtype)dtype,
                                                   pyhvd_handle_result_slot(h),
                                                   pyhvd_handle_counts(h), name, &o));
}

static PyObject *alltoall_async(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long send;
  PyObject *splits, *keep = NULL;
  int dtype, pset;
  const char *name;
  if (!PyArg_ParseTuple(args, "KOizi|O", &send, &splits, &dtype, &name, &pset, &keep)) return NULL;
  int n = set_size(pset);
  if (n < 0) return pyhvd_raise(n);
  unsigned long long *v = calloc((size_t)n, sizeof *v);
  size_t *sendcounts = calloc((size_t)n, sizeof *sendcounts);
  PyObject *h = NULL;
  if (!v || !sendcounts) {
    PyErr_NoMemory();
  } else if (read_ints(splits, n, v, "alltoall splits") == 0) {
    for (int i = 0; i < n; i++) sendcounts[i] = (size_t)v[i];
    h = pyhvd_handle_new(PYHVD_GATHER, keep, hvd_dtype_size((hvd_dtype)dtype), n);
    hvd_opts o = make_opts(pset, 1.0, 1.0);
    if (h)
      h = pyhvd_handle_start(h, hvd_alltoall_async(PTR(send), sendcounts, (hvd_dtype)dtype,
                                                   pyhvd_handle_result_slot(h),
                                                   pyhvd_handle_counts(h), name, &o));
  }
  free(v);
  free(sendcounts);
  return h;
}

static PyObject *join(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_join();
  Py_END_ALLOW_THREADS
  return rc < 0 ? pyhvd_raise(rc) : PyLong_FromLong(rc);
}

static PyObject *barrier(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_barrier();
  Py_END_ALLOW_THREADS
  if (rc < 0) return pyhvd_raise(rc);
  Py_RETURN_NONE;
}

static PyObject *add_process_set(PyObject *self, PyObject *ranks) {
  (void)self;
  Py_ssize_t n = PySequence_Size(ranks);
  if (n < 0) return NULL;
  int *r = calloc((size_t)n + 1, sizeof *r);
  if (!r) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *v = PySequence_GetItem(ranks, i);
    r[i] = v ? (int)PyLong_AsLong(v) : 0;
    Py_XDECREF(v);
    if (PyErr_Occurred()) {
      free(r);
      return NULL;
    }
  }
  int id;
  Py_BEGIN_ALLOW_THREADS
  id = hvd_add_process_set(r, (int)n);
  Py_END_ALLOW_THREADS
  free(r);
  return id < 0 ? pyhvd_raise(id) : PyLong_FromLong(id);
}

static PyObject *remove_process_set(PyObject *self, PyObject *arg) {
  (void)self;
  long id = PyLong_AsLong(arg);
  if (PyErr_Occurred()) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_remove_process_set((int)id);
  Py_END_ALLOW_THREADS
  if (rc < 0) return pyhvd_raise(rc);
  Py_RETURN_NONE;
}

/* process_set_rank/size/included(id): hvd's answer, or an exception. */
#define SET_QUERY(fn)                                       \
  static PyObject *fn##_py(PyObject *self, PyObject *arg) { \
    (void)self;                                             \
    long id = PyLong_AsLong(arg);                           \
    if (PyErr_Occurred()) return NULL;                      \
    int v = fn((int)id);                                    \
    return v < 0 ? pyhvd_raise(v) : PyLong_FromLong(v);     \
  }
SET_QUERY(hvd_process_set_rank)
SET_QUERY(hvd_process_set_size)
SET_QUERY(hvd_process_set_included)

PyMethodDef pyhvd_op_methods[] = {
    {"allreduce_async", allreduce_async, METH_VARARGS,
     "allreduce_async(send, recv, count, dtype, op, name, process_set, prescale, postscale[, keep])"},
    {"grouped_allreduce_async", grouped_allreduce_async, METH_VARARGS,
     "grouped_allreduce_async(sends, recvs, counts, dtype, op, name, process_set, prescale, "
     "postscale[, keep])"},
    {"broadcast_async", broadcast_async, METH_VARARGS,
     "broadcast_async(buf, count, dtype, root, name, process_set[, keep])"},
    {"allgather_async", allgather_async, METH_VARARGS,
     "allgather_async(send, count, dtype, name, process_set[, keep])"},
    {"alltoall_async", alltoall_async, METH_VARARGS,
     "alltoall_async(send, splits, dtype, name, process_set[, keep])"},
    {"reducescatter_async", reducescatter_async, METH_VARARGS,
     "reducescatter_async(send, recv, count, dtype, op, name, process_set, prescale, "
     "postscale[, keep])"},
    {"join", join, METH_NOARGS, "join() -> the last rank to join"},
    {"barrier", barrier, METH_NOARGS, "barrier()"},
    {"add_process_set", add_process_set, METH_O, "add_process_set(ranks) -> id"},
    {"remove_process_set", remove_process_set, METH_O, "remove_process_set(id)"},
    {"process_set_rank", hvd_process_set_rank_py, METH_O, "process_set_rank(id)"},
    {"process_set_size", hvd_process_set_size_py, METH_O, "process_set_size(id)"},
    {"process_set_included", hvd_process_set_included_py, METH_O, "process_set_included(id)"},
    {NULL, NULL, 0, NULL},
};
