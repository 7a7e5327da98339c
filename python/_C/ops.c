/*
 * ops.c -- hvd._C's collectives, join, barrier, process sets, timeline.
 *
 * Arguments are what the Python package extracts from tensors: addresses
 * (tensor.data_ptr()), element counts, shapes, hvd_dtype and hvd_op
 * values, a name or None, a process set id, and for the collectives
 * hvd runs on device memory the tensors' CUDA device (hvd_opts.device;
 * HVD_DEVICE_CPU when left out).  Every collective is asynchronous and
 * returns a Handle; the package waits on it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "pyhvd.h"
#include "pending.h"

#define PTR(v) ((void *)(uintptr_t)(v))

/* device: HVD_DEVICE_CPU, or the CUDA ordinal of the call's tensors
 * (hvd.torch passes tensor.device.index); the engine checks it.  stream:
 * with a device, the address of the cudaStream_t whose queued work
 * produces them (torch.cuda.current_stream().cuda_stream), 0 for CUDA's
 * legacy default stream. */
hvd_opts pyhvd_make_opts(int process_set, double prescale, double postscale, int device,
                         unsigned long long stream) {
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = process_set;
  o.prescale_factor = prescale;
  o.postscale_factor = postscale;
  o.device = device;
  o.stream = PTR(stream);
  return o;
}

/* Puts a tensor's shape (a sequence of ints) in o, for hvd to check that
 * every rank passes the same one; dims holds it.  0, or -1 raised. */
int pyhvd_set_shape(hvd_opts *o, PyObject *shape, int64_t dims[HVD_MAX_DIMS]) {
  Py_ssize_t n = PySequence_Size(shape);
  if (n < 0) return -1;
  if (n > HVD_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "a tensor of %zd dimensions: hvd takes at most %d", n,
                 HVD_MAX_DIMS);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *v = PySequence_GetItem(shape, i);
    dims[i] = v ? PyLong_AsLongLong(v) : 0;
    Py_XDECREF(v);
    if (PyErr_Occurred()) return -1;
  }
  o->shape = n > 0 ? dims : NULL;
  o->ndims = (int)n;
  return 0;
}

/* Members of a process set (0: the job), for sizing per-rank counts. */
static int set_size(int process_set) {
  return process_set == 0 ? hvd_size() : hvd_process_set_size(process_set);
}

/* ---- the tensors of a grouped call ---- */

typedef struct {
  int n;
  const void **send;
  void **recv;
  size_t *count;
} group;

static void group_free(group *g) {
  free(g->send);
  free(g->recv);
  free(g->count);
}

/* Fills n values from a Python sequence of ints. */
static int read_ints(PyObject *seq, Py_ssize_t n, unsigned long long *out, const char *what) {
  if (PySequence_Size(seq) != n) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: expected %zd entries", what, n);
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

/* Reads the send addresses, the receive addresses (recvs may be NULL: a
 * gather, where hvd allocates) and the counts.  0, or -1 raised. */
static int group_read(group *g, PyObject *sends, PyObject *recvs, PyObject *counts) {
  Py_ssize_t n = PySequence_Size(sends);
  if (n < 0) return -1;
  g->n = (int)n;
  g->send = calloc((size_t)n + 1, sizeof *g->send);
  g->recv = calloc((size_t)n + 1, sizeof *g->recv);
  g->count = calloc((size_t)n + 1, sizeof *g->count);
  unsigned long long *v = calloc((size_t)n + 1, sizeof *v);
  int rc = -1;
  if (!g->send || !g->recv || !g->count || !v) {
    PyErr_NoMemory();
  } else if (read_ints(sends, n, v, "sends") == 0) {
    for (Py_ssize_t i = 0; i < n; i++) g->send[i] = PTR(v[i]);
    if (!recvs || read_ints(recvs, n, v, "recvs") == 0) {
      for (Py_ssize_t i = 0; recvs && i < n; i++) g->recv[i] = PTR(v[i]);
      if (read_ints(counts, n, v, "counts") == 0) {
        for (Py_ssize_t i = 0; i < n; i++) g->count[i] = (size_t)v[i];
        rc = 0;
      }
    }
  }
  free(v);
  if (rc < 0) group_free(g);
  return rc;
}

/* ---- allreduce and reducescatter ---- */

/* allreduce and reducescatter take the same arguments. */
typedef hvd_handle reduce_fn(const void *send, void *recv, size_t count, hvd_dtype dtype, hvd_op op,
                             const char *name, const hvd_opts *opts);

static PyObject *reduce_async(PyObject *args, reduce_fn *fn) {
  unsigned long long send, recv, stream = 0;
  Py_ssize_t count;
  PyObject *shape, *keep = NULL;
  int dtype, op, pset, device = HVD_DEVICE_CPU;
  const char *name;
  double pre, post;
  if (!PyArg_ParseTuple(args, "KKnOiizidd|OiK", &send, &recv, &count, &shape, &dtype, &op, &name,
                        &pset, &pre, &post, &keep, &device, &stream))
    return NULL;
  hvd_opts o = pyhvd_make_opts(pset, pre, post, device, stream);
  int64_t dims[HVD_MAX_DIMS];
  if (pyhvd_set_shape(&o, shape, dims) < 0) return NULL;
  PyObject *h = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0, 0);
  if (!h) return NULL;
  return pyhvd_handle_start(h, fn(PTR(send), PTR(recv), (size_t)count, (hvd_dtype)dtype, (hvd_op)op,
                                  name, &o));
}

static PyObject *allreduce_async(PyObject *self, PyObject *args) {
  (void)self;
  return reduce_async(args, hvd_allreduce_async_opts);
}

static PyObject *reducescatter_async(PyObject *self, PyObject *args) {
  (void)self;
  return reduce_async(args, hvd_reducescatter_async);
}

/* The grouped forms take the same arguments too. */
typedef hvd_handle grouped_reduce_fn(const void *const *send, void *const *recv,
                                     const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                                     const char *name, const hvd_opts *opts);

static PyObject *grouped_reduce_async(PyObject *args, grouped_reduce_fn *fn) {
  PyObject *sends, *recvs, *counts, *keep = NULL;
  unsigned long long stream = 0;
  int dtype, op, pset, device = HVD_DEVICE_CPU;
  const char *name;
  double pre, post;
  if (!PyArg_ParseTuple(args, "OOOiizidd|OiK", &sends, &recvs, &counts, &dtype, &op, &name, &pset,
                        &pre, &post, &keep, &device, &stream))
    return NULL;
  group g;
  if (group_read(&g, sends, recvs, counts) < 0) return NULL;
  hvd_opts o = pyhvd_make_opts(pset, pre, post, device, stream);
  PyObject *h = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0, 0);
  if (h)
    h = pyhvd_handle_start(h, fn(g.send, g.recv, g.count, g.n, (hvd_dtype)dtype, (hvd_op)op, name,
                                 &o));
  group_free(&g);
  return h;
}

static PyObject *grouped_allreduce_async(PyObject *self, PyObject *args) {
  (void)self;
  return grouped_reduce_async(args, hvd_grouped_allreduce_async);
}

static PyObject *grouped_reducescatter_async(PyObject *self, PyObject *args) {
  (void)self;
  PENDING(hvd_grouped_reducescatter_async);
  return grouped_reduce_async(args, hvd_grouped_reducescatter_async);
}

/* ---- broadcast, allgather, alltoall ---- */

static PyObject *broadcast_async(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long buf, stream = 0;
  Py_ssize_t count;
  PyObject *shape, *keep = NULL;
  int dtype, root, pset, device = HVD_DEVICE_CPU;
  const char *name;
  if (!PyArg_ParseTuple(args, "KnOiizi|OiK", &buf, &count, &shape, &dtype, &root, &name, &pset,
                        &keep, &device, &stream))
    return NULL;
  hvd_opts o = pyhvd_make_opts(pset, 1.0, 1.0, device, stream);
  int64_t dims[HVD_MAX_DIMS];
  if (pyhvd_set_shape(&o, shape, dims) < 0) return NULL;
  PyObject *h = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0, 0);
  if (!h) return NULL;
  return pyhvd_handle_start(h, hvd_broadcast_async_opts(PTR(buf), (size_t)count, (hvd_dtype)dtype,
                                                        root, name, &o));
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
  if (n < 0) return pyhvd_raise_enqueue(n);
  PyObject *h = pyhvd_handle_new(PYHVD_GATHER, keep, hvd_dtype_size((hvd_dtype)dtype), 1, n);
  if (!h) return NULL;
  hvd_opts o = pyhvd_make_opts(pset, 1.0, 1.0, HVD_DEVICE_CPU, 0);
  return pyhvd_handle_start(h, hvd_allgather_async(PTR(send), (size_t)count, (hvd_dtype)dtype,
                                                   pyhvd_handle_results(h), pyhvd_handle_counts(h),
                                                   name, &o));
}

static PyObject *grouped_allgather_async(PyObject *self, PyObject *args) {
  (void)self;
  PENDING(hvd_grouped_allgather_async);
  PyObject *sends, *counts, *keep = NULL;
  int dtype, pset;
  const char *name;
  if (!PyArg_ParseTuple(args, "OOizi|O", &sends, &counts, &dtype, &name, &pset, &keep)) return NULL;
  int n = set_size(pset);
  if (n < 0) return pyhvd_raise_enqueue(n);
  group g;
  if (group_read(&g, sends, NULL, counts) < 0) return NULL;
  PyObject *h = pyhvd_handle_new(PYHVD_GATHER, keep, hvd_dtype_size((hvd_dtype)dtype), g.n, n);
  hvd_opts o = pyhvd_make_opts(pset, 1.0, 1.0, HVD_DEVICE_CPU, 0);
  if (h)
    h = pyhvd_handle_start(h, hvd_grouped_allgather_async(g.send, g.count, g.n, (hvd_dtype)dtype,
                                                          pyhvd_handle_results(h),
                                                          pyhvd_handle_counts(h), name, &o));
  group_free(&g);
  return h;
}

static PyObject *alltoall_async(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long send;
  PyObject *splits, *keep = NULL;
  int dtype, pset;
  const char *name;
  if (!PyArg_ParseTuple(args, "KOizi|O", &send, &splits, &dtype, &name, &pset, &keep)) return NULL;
  int n = set_size(pset);
  if (n < 0) return pyhvd_raise_enqueue(n);
  unsigned long long *v = calloc((size_t)n, sizeof *v);
  size_t *sendcounts = calloc((size_t)n, sizeof *sendcounts);
  PyObject *h = NULL;
  if (!v || !sendcounts) {
    PyErr_NoMemory();
  } else if (read_ints(splits, n, v, "alltoall splits") == 0) {
    for (int i = 0; i < n; i++) sendcounts[i] = (size_t)v[i];
    h = pyhvd_handle_new(PYHVD_GATHER, keep, hvd_dtype_size((hvd_dtype)dtype), 1, n);
    hvd_opts o = pyhvd_make_opts(pset, 1.0, 1.0, HVD_DEVICE_CPU, 0);
    if (h)
      h = pyhvd_handle_start(h, hvd_alltoall_async(PTR(send), sendcounts, (hvd_dtype)dtype,
                                                   pyhvd_handle_results(h), pyhvd_handle_counts(h),
                                                   name, &o));
  }
  free(v);
  free(sendcounts);
  return h;
}

/* ---- join and barrier: blocking, but Ctrl-C goes through ---- */

static int join_call(hvd_handle unused) {
  (void)unused;
  return hvd_join();
}

static int barrier_call(hvd_handle unused) {
  (void)unused;
  return hvd_barrier();
}

/* Runs call; an earlier call interrupted by Ctrl-C and still running
 * (*pending) is waited for instead of starting another. */
static PyObject *blocking(pyhvd_call *call, pyhvd_job **pending) {
  char *msg;
  int rc = pyhvd_blocking(call, 0, pending, &msg);
  if (rc == PYHVD_INTERRUPTED) return NULL;
  PyObject *result = rc < 0 ? pyhvd_raise_failure(rc, msg) : PyLong_FromLong(rc);
  free(msg);
  return result;
}

static pyhvd_job *join_job, *barrier_job; /* under the GIL */

static PyObject *join(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return blocking(join_call, &join_job);
}

static PyObject *barrier(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  PyObject *rc = blocking(barrier_call, &barrier_job);
  if (!rc) return NULL;
  Py_DECREF(rc);
  Py_RETURN_NONE;
}

/* ---- process sets ---- */

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
  return id < 0 ? pyhvd_raise_query(id) : PyLong_FromLong(id);
}

static PyObject *remove_process_set(PyObject *self, PyObject *arg) {
  (void)self;
  long id = PyLong_AsLong(arg);
  if (PyErr_Occurred()) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_remove_process_set((int)id);
  Py_END_ALLOW_THREADS
  if (rc < 0) return pyhvd_raise_query(rc);
  Py_RETURN_NONE;
}

/* process_set_rank/size/included(id): hvd's answer, or an exception. */
#define SET_QUERY(fn) \
  static PyObject *fn##_py(PyObject *self, PyObject *arg) { \
    (void)self; \
    long id = PyLong_AsLong(arg); \
    if (PyErr_Occurred()) return NULL; \
    int v = fn((int)id); \
    return v < 0 ? pyhvd_raise_query(v) : PyLong_FromLong(v); \
  }
SET_QUERY(hvd_process_set_rank)
SET_QUERY(hvd_process_set_size)
SET_QUERY(hvd_process_set_included)

/* ---- timeline ---- */

static PyObject *start_timeline(PyObject *self, PyObject *args) {
  (void)self;
  PENDING(hvd_start_timeline);
  const char *path;
  int mark_cycles;
  if (!PyArg_ParseTuple(args, "sp", &path, &mark_cycles)) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_start_timeline(path, mark_cycles);
  Py_END_ALLOW_THREADS
  if (rc < 0) return pyhvd_raise_query(rc);
  Py_RETURN_NONE;
}

static PyObject *stop_timeline(PyObject *self, PyObject *unused) {
  (void)self;
  PENDING(hvd_stop_timeline);
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_stop_timeline();
  Py_END_ALLOW_THREADS
  if (rc < 0) return pyhvd_raise_query(rc);
  Py_RETURN_NONE;
}

PyMethodDef pyhvd_op_methods[] = {
    {"allreduce_async", allreduce_async, METH_VARARGS,
     "allreduce_async(send, recv, count, shape, dtype, op, name, process_set, prescale, "
     "postscale[, keep, device, stream])"},
    {"grouped_allreduce_async", grouped_allreduce_async, METH_VARARGS,
     "grouped_allreduce_async(sends, recvs, counts, dtype, op, name, process_set, prescale, "
     "postscale[, keep, device, stream])"},
    {"broadcast_async", broadcast_async, METH_VARARGS,
     "broadcast_async(buf, count, shape, dtype, root, name, process_set[, keep, device, stream])"},
    {"allgather_async", allgather_async, METH_VARARGS,
     "allgather_async(send, count, dtype, name, process_set[, keep])"},
    {"grouped_allgather_async", grouped_allgather_async, METH_VARARGS,
     "grouped_allgather_async(sends, counts, dtype, name, process_set[, keep])"},
    {"alltoall_async", alltoall_async, METH_VARARGS,
     "alltoall_async(send, splits, dtype, name, process_set[, keep])"},
    {"reducescatter_async", reducescatter_async, METH_VARARGS,
     "reducescatter_async(send, recv, count, shape, dtype, op, name, process_set, prescale, "
     "postscale[, keep, device, stream])"},
    {"grouped_reducescatter_async", grouped_reducescatter_async, METH_VARARGS,
     "grouped_reducescatter_async(sends, recvs, counts, dtype, op, name, process_set, "
     "prescale, postscale[, keep, device, stream])"},
    {"join", join, METH_NOARGS, "join() -> the last rank to join"},
    {"barrier", barrier, METH_NOARGS, "barrier()"},
    {"add_process_set", add_process_set, METH_O, "add_process_set(ranks) -> id"},
    {"remove_process_set", remove_process_set, METH_O, "remove_process_set(id)"},
    {"process_set_rank", hvd_process_set_rank_py, METH_O, "process_set_rank(id)"},
    {"process_set_size", hvd_process_set_size_py, METH_O, "process_set_size(id)"},
    {"process_set_included", hvd_process_set_included_py, METH_O, "process_set_included(id)"},
    {"start_timeline", start_timeline, METH_VARARGS, "start_timeline(path, mark_cycles)"},
    {"stop_timeline", stop_timeline, METH_NOARGS, "stop_timeline()"},
    {NULL, NULL, 0, NULL},
};
