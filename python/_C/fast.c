/*
 * fast.c -- hvd.torch's allreduce of one contiguous CPU tensor in one call.
 *
 * The general path (python/hvd/torch/mpi_ops.py) checks its arguments in
 * Python, registers a _Pending under an integer handle and waits through
 * it: some 8 us a call on a quiet machine where hvd_allreduce costs 1.2 us
 * (issue 46).  torch_allreduce() takes the common case -- a plain dense
 * contiguous CPU tensor of a dtype hvd reduces, an op other than Adasum,
 * int or float scale factors, the global or a registered process set --
 * with its checks as attribute reads, and enqueues; the blocking forms
 * also wait here (GIL released, Ctrl-C as wait.c), with no Python object
 * for the operation.  Whatever it does not take -- another device, a
 * tensor autograd must see, an argument it cannot read -- it declines
 * (None) before enqueueing anything, and the general path runs the call:
 * a bad argument gets the general path's error.  Errors of hvd itself
 * (at enqueue, or of the operation) are raised as ops.c and handle.c do.
 *
 * eager_allreduce() does the same for hvd.tensorflow's and hvd.jax's
 * eager allreduce of one CPU tensor, whose general paths are an op and a
 * custom call (tens and hundreds of us): the package hands it a numpy
 * view of the tensor's buffer (the checks the framework needs -- eager,
 * untraced, on the CPU -- are the package's), it reduces that into a new
 * array, waiting here, and the package wraps the result.  Its failures
 * are the framework's exceptions, made by a function the package passes.
 */
#include <stdint.h>

#include "engine/waits.h"
#include "pyhvd.h"

/* What torch_fast_setup() gave (the package's objects), and interned
 * attribute names. */
static struct {
  PyObject *types;      /* tuple of the tensor types taken (exact type) */
  PyObject *dtypes;     /* dict torch.dtype -> hvd dtype code */
  PyObject *strided;    /* torch.strided */
  PyObject *global_set; /* hvd's global_process_set */
  PyObject *registered; /* dict id -> registered ProcessSet */
  PyObject *parked;     /* list: handles of blocking calls Ctrl-C interrupted */
  PyObject *is_cpu, *layout, *dtype, *requires_grad, *is_contiguous, *data_ptr, *numel, *shape,
      *new_empty, *set_id, *auto_name, *kind;
} fast;

static unsigned long long fast_calls; /* operations enqueued here; under the GIL */

/* One call's arguments, once read. */
typedef struct {
  PyObject *tensor;
  int mode;
  int dtype;
  int op;
  PyObject *pset;    /* the ProcessSet (borrowed) */
  PyObject *name;    /* new reference: a str, or None */
  const char *cname; /* name's UTF-8 (NULL: hvd names it) */
  unsigned long long addr;
  Py_ssize_t count;
  PyObject *shape_obj; /* new reference: tensor.shape */
  hvd_opts o;
  int64_t dims[HVD_MAX_DIMS]; /* o.shape */
} call;

/* 1 when o's attribute attr is true, 0 when false, -1 raised. */
static int attr_true(PyObject *o, PyObject *attr) {
  PyObject *v = PyObject_GetAttr(o, attr);
  if (!v) return -1;
  int rc = PyObject_IsTrue(v);
  Py_DECREF(v);
  return rc;
}

/* o.method() as an integer; -1 with an exception on failure (the
 * values read here are never -1). */
static long long call_ll(PyObject *o, PyObject *method) {
  PyObject *v = PyObject_CallMethodObjArgs(o, method, NULL);
  if (!v) return -1;
  long long r = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return r;
}

static int exact_type_taken(PyObject *t) {
  Py_ssize_t n = PyTuple_Size(fast.types);
  for (Py_ssize_t i = 0; i < n; i++)
    if ((PyObject *)Py_TYPE(t) == PyTuple_GetItem(fast.types, i)) return 1;
  return 0;
}

/* The tensor's facts: 1 when the fast path takes it, 0 when not, -1
 * raised.  Out of place, a tensor that requires grad goes through the
 * autograd function (allreduce() must stay differentiable). */
static int read_tensor(call *c) {
  PyObject *t = c->tensor;
  if (!exact_type_taken(t) || attr_true(t, fast.is_cpu) != 1) return 0;
  PyObject *layout = PyObject_GetAttr(t, fast.layout);
  Py_XDECREF(layout); /* compared as an address only */
  if (layout != fast.strided) return 0;
  PyObject *dtype = PyObject_GetAttr(t, fast.dtype);
  PyObject *code = dtype ? PyDict_GetItemWithError(fast.dtypes, dtype) : NULL;
  Py_XDECREF(dtype);
  if (!code) return 0;
  c->dtype = (int)PyLong_AsLong(code);
  if (!(c->mode & PYHVD_FAST_IN_PLACE) && attr_true(t, fast.requires_grad) != 0) return 0;
  if (call_ll(t, fast.is_contiguous) != 1) return 0;
  c->addr = (unsigned long long)call_ll(t, fast.data_ptr);
  c->count = (Py_ssize_t)call_ll(t, fast.numel);
  if (PyErr_Occurred()) return -1;
  c->shape_obj = PyObject_GetAttr(t, fast.shape);
  if (!c->shape_obj) return -1;
  return pyhvd_set_shape(&c->o, c->shape_obj, c->dims) == 0 ? 1 : -1;
}

/* The op (None: Average); 0 to decline Adasum (the general path checks
 * the set's size) and what is not an hvd op. */
static int read_op(call *c, PyObject *op) {
  if (op == Py_None) {
    c->op = HVD_AVERAGE;
    return 1;
  }
  if (!PyLong_CheckExact(op)) return 0;
  long v = PyLong_AsLong(op);
  c->op = (int)v;
  return v == HVD_AVERAGE || v == HVD_SUM || v == HVD_MIN || v == HVD_MAX || v == HVD_PRODUCT;
}

static int read_factor(PyObject *v, double *out) {
  if (!PyFloat_CheckExact(v) && !PyLong_CheckExact(v)) return 0;
  *out = PyFloat_AsDouble(v);
  return PyErr_Occurred() ? -1 : 1;
}

/* The set's id: 0 for the global set; a registered set's (the object in
 * the registry, so neither removed nor stale); 0 returned to decline. */
static int read_set(call *c) {
  if (c->pset == fast.global_set) return 1; /* o.process_set 0 */
  PyObject *id = PyObject_GetAttr(c->pset, fast.set_id);
  if (!id) return -1;
  PyObject *found = PyLong_CheckExact(id) ? PyDict_GetItemWithError(fast.registered, id) : NULL;
  if (found == c->pset) c->o.process_set = (int)PyLong_AsLong(id);
  Py_DECREF(id);
  return found == c->pset;
}

/* The name to enqueue under: unnamed calls on a set other than the
 * global one take the set's own generated name, as the general path's
 * _name() (ProcessSet._auto_name says why).  0, or -1 raised. */
static int resolve_name(call *c) {
  if (c->name != Py_None || c->o.process_set == 0) return 0;
  PyObject *name = PyObject_CallMethodObjArgs(c->pset, fast.auto_name, fast.kind, NULL);
  if (!name) return -1;
  Py_DECREF(c->name);
  c->name = name;
  return PyArg_Parse(name, "s", &c->cname) ? 0 : -1;
}

/* Reads every argument: 1 to go on, 0 to decline, -1 raised. */
static int read_call(call *c, PyObject *op, PyObject *pre, PyObject *post) {
  if (c->name != Py_None) {
    if (!PyUnicode_CheckExact(c->name)) return 0;
    /* the limited API's UTF-8 of a str (as ops.c's "z"; cached in it) */
    if (!PyArg_Parse(c->name, "s", &c->cname)) return -1;
  }
  c->o = pyhvd_make_opts(0, 1.0, 1.0, HVD_DEVICE_CPU, 0);
  int rc = read_op(c, op);
  if (rc == 1) rc = read_factor(pre, &c->o.prescale_factor);
  if (rc == 1) rc = read_factor(post, &c->o.postscale_factor);
  if (rc == 1) rc = read_set(c);
  if (rc == 1) rc = read_tensor(c);
  return rc;
}

/* Keeps a blocking call's interrupted wait as a handle in parked (the
 * tensors alive while hvd writes them; its wait() returns out), as the
 * general path keeps its _Pending; the KeyboardInterrupt stays raised. */
static void park(PyObject *parked, hvd_handle h, pyhvd_job *job, PyObject *keep, PyObject *out) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *handle = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0, 0);
  if (handle) handle = pyhvd_handle_start(handle, h);
  if (handle) {
    pyhvd_handle_set_job(handle, job);
    pyhvd_handle_set_result(handle, out);
    PyList_Append(parked, handle); /* failing, its dealloc abandons it */
    Py_DECREF(handle);
  } else if (job) {
    Py_INCREF(keep); /* never dropped: hvd may still write the tensors */
    pyhvd_job_abandon(job, NULL, NULL);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

/* Raises errors(code, msg)'s exception (a framework's own types, as its
 * general path raises them); hvd._C's with errors None.  NULL. */
static PyObject *raise_with(PyObject *errors, int code, const char *msg, int enqueued) {
  if (errors == Py_None)
    return enqueued ? pyhvd_raise_failure(code, msg) : pyhvd_raise_enqueue(code);
  PyObject *exc = PyObject_CallFunction(errors, "is", code, msg ? msg : hvd_strerror(code));
  if (exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

/* Waits for h and returns out, or raises (errors: see raise_with). */
static PyObject *wait_for(hvd_handle h, PyObject *keep, PyObject *out, PyObject *parked,
                          PyObject *errors) {
  pyhvd_job *job = NULL;
  char *msg = NULL;
  int rc = pyhvd_wait(h, &job, &msg);
  if (rc == PYHVD_INTERRUPTED) {
    park(parked, h, job, keep, out);
    return NULL;
  }
  if (rc < 0) {
    raise_with(errors, rc, msg, 1);
    free(msg);
    return NULL;
  }
  Py_INCREF(out);
  return out;
}

static hvd_handle enqueue(call *c, unsigned long long out_addr) {
  hvd_handle h = hvd_allreduce_async_opts((const void *)(uintptr_t)c->addr,
                                          (void *)(uintptr_t)out_addr, (size_t)c->count,
                                          (hvd_dtype)c->dtype, (hvd_op)c->op, c->cname, &c->o);
  if (h >= 0) fast_calls++;
  return h;
}

/* The blocking forms: enqueue, wait, out.  The call is waited for at
 * once, so it does not make this thread a submitter (engine/waits.h):
 * else a thread that later waits on its framework rather than on hvd (a
 * TensorFlow op, a tf.function) would keep its rank from ever counting as
 * blocked, and a certain deadlock would go unseen. */
static PyObject *blocking(call *c, PyObject *keep, PyObject *out, unsigned long long out_addr) {
  hvd__waits_untracked();
  hvd_handle h = enqueue(c, out_addr);
  if (h < 0) {
    hvd__waits_untracked_drop();
    return pyhvd_raise_enqueue((int)h);
  }
  return wait_for(h, keep, out, fast.parked, Py_None);
}

/* The asynchronous forms: a started Handle whose wait() returns out. */
static PyObject *start(call *c, PyObject *keep, PyObject *out, unsigned long long out_addr) {
  PyObject *handle = pyhvd_handle_new(PYHVD_PLAIN, keep, 0, 0, 0);
  if (!handle) return NULL;
  handle = pyhvd_handle_start(handle, enqueue(c, out_addr));
  if (handle) pyhvd_handle_set_result(handle, out);
  return handle;
}

/* Runs a call the fast path takes: out is the tensor itself in place,
 * else a new one (contiguous, as the general path's). */
static PyObject *run(call *c) {
  int in_place = c->mode & PYHVD_FAST_IN_PLACE;
  PyObject *out = in_place ? c->tensor : NULL;
  if (in_place)
    Py_INCREF(out);
  else
    out = PyObject_CallMethodObjArgs(c->tensor, fast.new_empty, c->shape_obj, NULL);
  if (!out) return NULL;
  unsigned long long out_addr = in_place ? c->addr
                                         : (unsigned long long)call_ll(out, fast.data_ptr);
  PyObject *keep = in_place ? out : PyTuple_Pack(2, c->tensor, out);
  if (in_place) Py_INCREF(keep);
  PyObject *result = NULL;
  if (keep && !PyErr_Occurred() && resolve_name(c) == 0)
    result = c->mode & PYHVD_FAST_WAIT ? blocking(c, keep, out, out_addr)
                                       : start(c, keep, out, out_addr);
  Py_XDECREF(keep);
  Py_DECREF(out);
  return result;
}

/* torch_allreduce(tensor, mode, name, op, prescale, postscale,
 * process_set): mode's FAST_WAIT blocks and returns the result tensor,
 * else a started Handle whose wait() returns it; FAST_IN_PLACE reduces
 * into tensor itself.  None: declined, nothing enqueued. */
static PyObject *torch_allreduce(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *op, *pre, *post;
  call c = {0};
  if (!PyArg_ParseTuple(args, "OiOOOOO", &c.tensor, &c.mode, &c.name, &op, &pre, &post, &c.pset))
    return NULL;
  Py_INCREF(c.name);
  PyObject *result = Py_None;
  if (fast.types && read_call(&c, op, pre, post) == 1) { /* declined before the setup */
    result = run(&c);
  } else {
    PyErr_Clear(); /* the general path raises its own error */
    Py_INCREF(result);
  }
  Py_XDECREF(c.shape_obj);
  Py_DECREF(c.name);
  return result;
}

/* Keeps a new reference to o in *slot (the old one dropped). */
static void hold(PyObject **slot, PyObject *o) {
  Py_XINCREF(o);
  Py_XDECREF(*slot);
  *slot = o;
}

static int intern(PyObject **slot, const char *s) {
  PyObject *o = PyUnicode_InternFromString(s);
  hold(slot, o);
  Py_XDECREF(o);
  return o ? 0 : -1;
}

static int intern_names(void) {
  return intern(&fast.is_cpu, "is_cpu") | intern(&fast.layout, "layout") |
         intern(&fast.dtype, "dtype") | intern(&fast.requires_grad, "requires_grad") |
         intern(&fast.is_contiguous, "is_contiguous") | intern(&fast.data_ptr, "data_ptr") |
         intern(&fast.numel, "numel") | intern(&fast.shape, "shape") |
         intern(&fast.new_empty, "new_empty") | intern(&fast.set_id, "process_set_id") |
         intern(&fast.auto_name, "_auto_name") | intern(&fast.kind, "allreduce");
}

/* torch_fast_setup(types, dtypes, strided, global_set, registered) ->
 * the list where interrupted blocking calls' handles are kept (the
 * package drops them with its other handles). */
static PyObject *torch_fast_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *types, *dtypes, *strided, *global_set, *registered;
  if (!PyArg_ParseTuple(args, "O!O!OOO!", &PyTuple_Type, &types, &PyDict_Type, &dtypes, &strided,
                        &global_set, &PyDict_Type, &registered))
    return NULL;
  if (intern_names() != 0) return NULL;
  PyObject *parked = PyList_New(0);
  if (!parked) return NULL;
  hold(&fast.types, types);
  hold(&fast.dtypes, dtypes);
  hold(&fast.strided, strided);
  hold(&fast.global_set, global_set);
  hold(&fast.registered, registered);
  hold(&fast.parked, parked);
  return parked;
}

static PyObject *torch_fast_calls(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(fast_calls);
}

/* ---- eager TensorFlow and JAX tensors, as numpy views of their buffers ---- */

/* What eager_fast_setup() gave. */
static struct {
  PyObject *ndarray;    /* numpy.ndarray (exact type taken) */
  PyObject *dtypes;     /* dict numpy dtype -> hvd dtype code */
  PyObject *empty_like; /* numpy.empty_like */
  PyObject *parked;     /* list: handles of calls Ctrl-C interrupted */
} eager;

static unsigned long long eager_calls; /* calls taken (enqueued or refused); under the GIL */

/* The head of a numpy array object: numpy's PyArrayObject_fields, which
 * its C API reads in extensions built against any numpy from 1.7 to 2.x
 * (PyArray_DATA, PyArray_NDIM... are these reads), so numpy keeps it; read
 * here for an object of the exact type numpy.ndarray only.  hvd._C is
 * built without numpy's headers (one abi3 module for every numpy). */
typedef struct {
  PyObject_HEAD char *data;
  int nd;
  Py_ssize_t *dimensions; /* npy_intp */
  Py_ssize_t *strides;
  PyObject *base;
  PyObject *descr; /* the array's numpy dtype */
  int flags;
} np_array_head;

#define NP_C_CONTIGUOUS 0x0001 /* NPY_ARRAY_C_CONTIGUOUS */
#define NP_ALIGNED 0x0100      /* NPY_ARRAY_ALIGNED */

/* An array's facts: 1 when taken (an aligned C-contiguous, non-empty array of a
 * dtype hvd reduces, of at most HVD_MAX_DIMS dimensions), 0 when not, -1
 * raised. */
static int read_array(PyObject *a, call *c) {
  if ((PyObject *)Py_TYPE(a) != eager.ndarray) return 0;
  const np_array_head *h = (const np_array_head *)a;
  if ((h->flags & (NP_C_CONTIGUOUS | NP_ALIGNED)) != (NP_C_CONTIGUOUS | NP_ALIGNED) || h->nd < 0 ||
      h->nd > HVD_MAX_DIMS)
    return 0;
  PyObject *code = PyDict_GetItemWithError(eager.dtypes, h->descr);
  if (!code) return PyErr_Occurred() ? -1 : 0;
  c->dtype = (int)PyLong_AsLong(code);
  c->count = 1;
  for (int i = 0; i < h->nd; i++) {
    c->dims[i] = (int64_t)h->dimensions[i];
    c->count *= h->dimensions[i];
  }
  c->o.shape = h->nd > 0 ? c->dims : NULL;
  c->o.ndims = h->nd;
  c->addr = (unsigned long long)(uintptr_t)h->data;
  return c->count > 0;
}

/* v rounded to float32, as TensorFlow stores a float attribute.  Through
 * a volatile: GCC 12.2 at -O2 compiled the plain casts of the two factors
 * (adjacent doubles, vectorized together) to stores of the unrounded
 * values (a minimal case, two doubles of a struct cast in a branch, does
 * the same). */
static double as_float32(double v) {
  volatile float f = (float)v;
  return f;
}

/* eager_allreduce(array, op, prescale, postscale, name, errors, flags):
 * a new numpy array of array's shape and dtype holding array reduced over
 * the job (the global set), enqueued under name (None: hvd numbers it)
 * and waited for here, GIL released; errors(code, msg) makes the
 * exception of a failure (None: hvd._C's own); flags FAST_F32_FACTORS
 * rounds the factors to float32 first (TensorFlow's op attributes are).
 * None: declined, nothing enqueued. */
static PyObject *eager_allreduce(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *a, *op, *pre, *post, *name, *errors;
  int flags;
  if (!PyArg_ParseTuple(args, "OOOOOOi", &a, &op, &pre, &post, &name, &errors, &flags)) return NULL;
  call c = {0};
  const char *cname = NULL;
  c.o = pyhvd_make_opts(0, 1.0, 1.0, HVD_DEVICE_CPU, 0);
  int rc = eager.ndarray && hvd_is_initialized() && (name == Py_None || PyUnicode_CheckExact(name));
  if (rc == 1 && name != Py_None) rc = PyArg_Parse(name, "s", &cname) ? 1 : -1;
  if (rc == 1) rc = read_op(&c, op);
  if (rc == 1) rc = read_factor(pre, &c.o.prescale_factor);
  if (rc == 1) rc = read_factor(post, &c.o.postscale_factor);
  if (rc == 1) rc = read_array(a, &c);
  if (rc != 1) {
    PyErr_Clear(); /* the general path raises its own error */
    Py_RETURN_NONE;
  }
  if (flags & PYHVD_FAST_F32_FACTORS) {
    c.o.prescale_factor = as_float32(c.o.prescale_factor);
    c.o.postscale_factor = as_float32(c.o.postscale_factor);
  }
  PyObject *out = PyObject_CallFunctionObjArgs(eager.empty_like, a, NULL);
  if (!out) return NULL;
  if ((PyObject *)Py_TYPE(out) != eager.ndarray ||
      !(((np_array_head *)out)->flags & NP_C_CONTIGUOUS)) { /* never, for numpy's own */
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, "hvd: numpy.empty_like gave no C-contiguous array");
    return NULL;
  }
  unsigned long long out_addr = (unsigned long long)(uintptr_t)((np_array_head *)out)->data;
  PyObject *keep = PyTuple_Pack(2, a, out);
  PyObject *result = NULL;
  if (keep) {
    hvd__waits_untracked(); /* waited for at once: see blocking() */
    hvd_handle h = hvd_allreduce_async_opts((const void *)(uintptr_t)c.addr,
                                            (void *)(uintptr_t)out_addr, (size_t)c.count,
                                            (hvd_dtype)c.dtype, (hvd_op)c.op, cname, &c.o);
    eager_calls++;
    if (h >= 0) {
      result = wait_for(h, keep, out, eager.parked, errors);
    } else {
      hvd__waits_untracked_drop();
      raise_with(errors, (int)h, hvd_last_error(), 0);
    }
  }
  Py_XDECREF(keep);
  Py_DECREF(out);
  return result;
}

/* eager_fast_setup(ndarray, dtypes, empty_like) -> the list where
 * interrupted calls' handles are kept (the packages drop them at
 * shutdown). */
static PyObject *eager_fast_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ndarray, *dtypes, *empty_like;
  if (!PyArg_ParseTuple(args, "O!O!O", &PyType_Type, &ndarray, &PyDict_Type, &dtypes, &empty_like))
    return NULL;
  if (!eager.parked && !(eager.parked = PyList_New(0))) return NULL;
  if (!eager.dtypes && !(eager.dtypes = PyDict_New())) return NULL;
  if (PyDict_Update(eager.dtypes, dtypes) < 0) return NULL; /* TensorFlow's and JAX's */
  hold(&eager.ndarray, ndarray);
  hold(&eager.empty_like, empty_like);
  Py_INCREF(eager.parked);
  return eager.parked;
}

static PyObject *eager_fast_calls(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(eager_calls);
}

PyMethodDef pyhvd_fast_methods[] = {
    {"torch_allreduce", torch_allreduce, METH_VARARGS,
     "torch_allreduce(tensor, mode, name, op, prescale, postscale, process_set) -> the "
     "reduced tensor (FAST_WAIT) or a Handle; None when the call is not one it takes"},
    {"torch_fast_setup", torch_fast_setup, METH_VARARGS,
     "torch_fast_setup(types, dtypes, strided, global_set, registered) -> the list of "
     "interrupted calls' handles"},
    {"torch_fast_calls", torch_fast_calls, METH_NOARGS,
     "How many operations torch_allreduce() enqueued (for tests: the fast path is used)."},
    {"eager_allreduce", eager_allreduce, METH_VARARGS,
     "eager_allreduce(array, op, prescale, postscale, name, errors, flags) -> a new numpy "
     "array, the reduced array; None when the call is not one it takes"},
    {"eager_fast_setup", eager_fast_setup, METH_VARARGS,
     "eager_fast_setup(ndarray, dtypes, empty_like) -> the list of interrupted calls' handles"},
    {"eager_fast_calls", eager_fast_calls, METH_NOARGS,
     "How many calls eager_allreduce() took, enqueued or refused by hvd (for tests: the fast "
     "path is used)."},
    {NULL, NULL, 0, NULL},
};
