/*
 * rdzv.c -- hvd._C's rendezvous host, for jobs whose ranks no hvdrun
 * starts: hvd.ray's actors and hvd.spark's tasks.  The Python process
 * that forms the job (the Ray or Spark driver) serves one round of the
 * same rendezvous hvdrun serves (bootstrap/rdzv_host.h), and the ranks
 * meet there with hvdrun's variables (HOROVOD_RANK, ...,
 * HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, _HOROVOD_SECRET_KEY).
 *
 *   h = rdzv_host_start(addr, port, size, secret_text)   # a capsule
 *   rdzv_host_stop(h, seconds)   # waits until every rank got its table,
 *                                # at most `seconds`, then stops
 */
#include "pyhvd.h"

#include "rdzv/rdzv_host.h"
#include "common.h"
#include "wire/auth.h"

#define CAPSULE "hvd._C.rdzv_host"

/* The capsule's pointer: h is NULL once rdzv_host_stop() stopped it. */
typedef struct {
  hvd_rdzv_host *h;
} host_ref;

static void release(PyObject *capsule) {
  host_ref *ref = PyCapsule_GetPointer(capsule, CAPSULE);
  if (!ref) return;
  hvd__rdzv_host_stop(ref->h, hvd__deadline_in(0)); /* NULL is fine */
  PyMem_Free(ref);
}

static PyObject *rdzv_host_start(PyObject *self, PyObject *args) {
  (void)self;
  const char *addr, *text;
  int port, size;
  if (!PyArg_ParseTuple(args, "siis", &addr, &port, &size, &text)) return NULL;
  if (port < 1 || port > 65535 || size < 1)
    return PyErr_Format(PyExc_ValueError, "rdzv_host_start: port %d, size %d", port, size);
  hvd_secret key;
  hvd_rdzv_host *h = NULL;
  int rc = hvd__secret_decode(text, &key);
  if (rc == 0) {
    Py_BEGIN_ALLOW_THREADS
    rc = hvd__rdzv_host_start(addr, port, (uint32_t)size, &key, &h);
    Py_END_ALLOW_THREADS
  }
  if (rc < 0) {
    PyErr_SetString(PyExc_OSError, hvd_last_error());
    return NULL;
  }
  host_ref *ref = PyMem_Malloc(sizeof *ref);
  PyObject *capsule = ref ? PyCapsule_New(ref, CAPSULE, release) : NULL;
  if (!capsule) {
    hvd__rdzv_host_stop(h, hvd__deadline_in(0));
    PyMem_Free(ref);
    return ref ? NULL : PyErr_NoMemory();
  }
  ref->h = h;
  return capsule;
}

static PyObject *rdzv_host_stop(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *capsule;
  double seconds;
  if (!PyArg_ParseTuple(args, "O!d", &PyCapsule_Type, &capsule, &seconds)) return NULL;
  host_ref *ref = PyCapsule_GetPointer(capsule, CAPSULE);
  if (!ref) return NULL;
  hvd_rdzv_host *h = ref->h;
  ref->h = NULL; /* stopped once */
  Py_BEGIN_ALLOW_THREADS
  hvd__rdzv_host_stop(h, hvd__deadline_in((int64_t)(seconds * 1000)));
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyMethodDef pyhvd_rdzv_methods[] = {
    {"rdzv_host_start", rdzv_host_start, METH_VARARGS,
     "Serve one rendezvous round of `size` ranks on addr:port with the secret."},
    {"rdzv_host_stop", rdzv_host_stop, METH_VARARGS,
     "Wait (at most `seconds`) until every rank got its table, then stop."},
    {NULL, NULL, 0, NULL},
};
