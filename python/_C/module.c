/*
 * module.c -- the hvd._C module: life cycle, topology, constants, errors.
 *
 * The collectives are in ops.c, the Handle type in handle.c.
 */
#include "hvd_build_config.h"
#include "pyhvd.h"

PyObject *pyhvd_internal_error;

#define NOT_INITIALIZED "Horovod has not been initialized; use hvd.init()."

PyObject *pyhvd_raise_query(int code) {
  if (code == HVD_E_NOT_INITIALIZED)
    PyErr_SetString(PyExc_ValueError, NOT_INITIALIZED);
  else
    PyErr_SetString(code == HVD_E_INVALID ? PyExc_ValueError : pyhvd_internal_error,
                    hvd_last_error());
  return NULL;
}

PyObject *pyhvd_raise_enqueue(int code) {
  if (code == HVD_E_NOT_INITIALIZED)
    PyErr_SetString(pyhvd_internal_error, NOT_INITIALIZED);
  else
    PyErr_SetString(code == HVD_E_INVALID ? PyExc_ValueError : pyhvd_internal_error,
                    hvd_last_error());
  return NULL;
}

PyObject *pyhvd_raise_failure(int code, const char *msg) {
  if (code == HVD_E_NOT_INITIALIZED) msg = NOT_INITIALIZED;
  PyErr_SetString(pyhvd_internal_error, msg ? msg : hvd_strerror(code));
  return NULL;
}

/* init(): a second call is harmless, as in Horovod. */
static PyObject *init(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_init();
  Py_END_ALLOW_THREADS
  if (rc < 0 && rc != HVD_E_ALREADY_INITIALIZED) return pyhvd_raise_query(rc);
  Py_RETURN_NONE;
}

/* init_ranks(ranks): hvd_init_ranks, for init(comm=[ranks]). */
static PyObject *init_ranks(PyObject *self, PyObject *list) {
  (void)self;
  PyObject *seq = PySequence_Fast(list, "init_ranks takes a list of ranks");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Size(seq);
  int *ranks = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ranks), rc = 0;
  for (Py_ssize_t i = 0; ranks && i < n; i++) {
    PyObject *item = PySequence_GetItem(seq, i);
    long r = item ? PyLong_AsLong(item) : -1;
    Py_XDECREF(item);
    if (r == -1 && PyErr_Occurred()) break;
    if (r < 0 || r > INT32_MAX) {
      PyErr_Format(PyExc_ValueError, "init(comm=...): rank %ld is not a rank", r);
      break;
    }
    ranks[i] = (int)r;
  }
  Py_DECREF(seq);
  if (!ranks || PyErr_Occurred()) {
    PyMem_Free(ranks);
    return ranks ? NULL : PyErr_NoMemory();
  }
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_init_ranks(ranks, (int)n);
  Py_END_ALLOW_THREADS
  PyMem_Free(ranks);
  if (rc < 0 && rc != HVD_E_ALREADY_INITIALIZED) return pyhvd_raise_query(rc);
  Py_RETURN_NONE;
}

/* init_comm(fortran_handle): hvd_init_comm on an mpi4py communicator. */
static PyObject *init_comm(PyObject *self, PyObject *arg) {
  (void)self;
  long handle = PyLong_AsLong(arg);
  if (handle == -1 && PyErr_Occurred()) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = pyhvd_init_comm(handle);
  Py_END_ALLOW_THREADS
  if (rc == HVD_E_UNSUPPORTED) {
    PyErr_SetString(PyExc_ValueError,
                    "init(comm=<MPI communicator>): this hvd was built "
                    "without MPI (HVD_WITH_MPI=OFF); pass a list of ranks instead");
    return NULL;
  }
  if (rc < 0 && rc != HVD_E_ALREADY_INITIALIZED) return pyhvd_raise_query(rc);
  Py_RETURN_NONE;
}

/* mpi_built(), mpi_enabled(), mpi_threads_supported(): hvd.h's answers. */
#define ANSWER(fn) \
  static PyObject *fn##_py(PyObject *self, PyObject *unused) { \
    (void)self; \
    (void)unused; \
    return PyBool_FromLong(hvd_##fn()); \
  }
ANSWER(mpi_built)
ANSWER(mpi_enabled)
ANSWER(mpi_threads_supported)

/* nccl_built(), cuda_built(): what this build has (hvd_build_config.h);
 * NCCL as the version code of the nccl.h it was built against, as Horovod
 * answers, 0 without. */
static PyObject *nccl_built_py(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(HVD_BUILT_NCCL_VERSION);
}

static PyObject *cuda_built_py(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyBool_FromLong(HVD_BUILT_CUDA);
}

static PyObject *shutdown(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (hvd_is_initialized()) {
    Py_BEGIN_ALLOW_THREADS
    hvd_shutdown();
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

/* elastic_reset(): leave the job and join the next one (hvd_elastic_reset);
 * HorovodInternalError with hvdrun's reason when there is none. */
static PyObject *elastic_reset(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = hvd_elastic_reset();
  Py_END_ALLOW_THREADS
  if (rc < 0) return pyhvd_raise_failure(rc, hvd_last_error());
  Py_RETURN_NONE;
}

/* elastic_updates() -> (stamp, added, removed): hvdrun's announcements so far. */
static PyObject *elastic_updates(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  uint64_t stamp;
  int added, removed;
  int rc = hvd_elastic_host_updates(&stamp, &added, &removed);
  if (rc < 0) return pyhvd_raise_query(rc);
  return Py_BuildValue("(Kii)", (unsigned long long)stamp, added, removed);
}

static PyObject *is_initialized(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyBool_FromLong(hvd_is_initialized());
}

/* rank(), size(), ...: ValueError before init(), as horovod.torch. */
#define TOPOLOGY(fn) \
  static PyObject *fn##_py(PyObject *self, PyObject *unused) { \
    (void)self; \
    (void)unused; \
    int v = hvd_##fn(); \
    return v < 0 ? pyhvd_raise_query(v) : PyLong_FromLong(v); \
  }
TOPOLOGY(rank)
TOPOLOGY(size)
TOPOLOGY(local_rank)
TOPOLOGY(local_size)
TOPOLOGY(cross_rank)
TOPOLOGY(cross_size)

static PyMethodDef basic_methods[] = {
    {"init", init, METH_NOARGS, "Join the job (hvd_init)."},
    {"init_ranks", init_ranks, METH_O, "Join as a job of the listed ranks (hvd_init_ranks)."},
    {"init_comm", init_comm, METH_O,
     "Join as the job of an MPI communicator, given its Fortran handle (hvd_init_comm)."},
    {"mpi_built", mpi_built_py, METH_NOARGS, "hvd_mpi_built()."},
    {"mpi_enabled", mpi_enabled_py, METH_NOARGS, "hvd_mpi_enabled()."},
    {"nccl_built", nccl_built_py, METH_NOARGS, "NCCL_VERSION_CODE of the build, 0 without."},
    {"cuda_built", cuda_built_py, METH_NOARGS, "Whether the build has CUDA (HVD_WITH_CUDA)."},
    {"mpi_threads_supported", mpi_threads_supported_py, METH_NOARGS,
     "hvd_mpi_threads_supported()."},
    {"shutdown", shutdown, METH_NOARGS, "Leave the job (hvd_shutdown)."},
    {"is_initialized", is_initialized, METH_NOARGS, "True between init() and shutdown()."},
    {"elastic_reset", elastic_reset, METH_NOARGS,
     "Leave the job and join the next one of an elastic run (hvd_elastic_reset)."},
    {"elastic_updates", elastic_updates, METH_NOARGS,
     "(stamp, added, removed): host updates hvdrun announced (hvd_elastic_host_updates)."},
    {"rank", rank_py, METH_NOARGS, "This process's rank."},
    {"size", size_py, METH_NOARGS, "The number of processes."},
    {"local_rank", local_rank_py, METH_NOARGS, "Rank on this host."},
    {"local_size", local_size_py, METH_NOARGS, "Processes on this host."},
    {"cross_rank", cross_rank_py, METH_NOARGS, "Rank among the hosts."},
    {"cross_size", cross_size_py, METH_NOARGS, "Number of hosts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "hvd._C",
    .m_doc = "hvd's native layer: libhvd's collectives for the Python package.",
    .m_size = -1,
    .m_methods = basic_methods,
};

static int add_constants(PyObject *m) {
  static const struct {
    const char *name;
    int value;
  } constants[] = {
      {"UINT8", HVD_UINT8},
      {"INT8", HVD_INT8},
      {"UINT16", HVD_UINT16},
      {"INT16", HVD_INT16},
      {"INT32", HVD_INT32},
      {"INT64", HVD_INT64},
      {"FLOAT16", HVD_FLOAT16},
      {"BFLOAT16", HVD_BFLOAT16},
      {"FLOAT32", HVD_FLOAT32},
      {"FLOAT64", HVD_FLOAT64},
      {"BOOL", HVD_BOOL},
      {"AVERAGE", HVD_AVERAGE},
      {"SUM", HVD_SUM},
      {"ADASUM", HVD_ADASUM},
      {"MIN", HVD_MIN},
      {"MAX", HVD_MAX},
      {"PRODUCT", HVD_PRODUCT},
      {"DEVICE_CPU", HVD_DEVICE_CPU},
      {"FAST_IN_PLACE", PYHVD_FAST_IN_PLACE},
      {"FAST_WAIT", PYHVD_FAST_WAIT},
      {"FAST_F32_FACTORS", PYHVD_FAST_F32_FACTORS},
      {"E_INVALID", HVD_E_INVALID},
      {"E_NOT_INITIALIZED", HVD_E_NOT_INITIALIZED},
      {"E_UNSUPPORTED", HVD_E_UNSUPPORTED},
      {"E_NOMEM", HVD_E_NOMEM},
      {"E_MISMATCH", HVD_E_MISMATCH},
  };
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
    if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) return -1;
  return 0;
}

int pyhvd_add_ref(PyObject *m, const char *name, PyObject *value) {
  Py_INCREF(value);
  if (PyModule_AddObject(m, name, value) == 0) return 0;
  Py_DECREF(value);
  return -1;
}

/* Adds ops.c's, rdzv.c's and fast.c's functions (a module def holds one table: this file's). */
static int add_functions(PyObject *m, PyMethodDef *defs) {
  PyObject *name = PyModule_GetNameObject(m);
  if (!name) return -1;
  int rc = 0;
  for (PyMethodDef *d = defs; rc == 0 && d->ml_name; d++) {
    PyObject *f = PyCFunction_NewEx(d, m, name);
    rc = f ? PyModule_AddObject(m, d->ml_name, f) : -1;
    if (rc < 0) Py_XDECREF(f);
  }
  Py_DECREF(name);
  return rc;
}

PyMODINIT_FUNC PyInit__C(void);
PyMODINIT_FUNC PyInit__C(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  pyhvd_internal_error = PyErr_NewExceptionWithDoc(
      "hvd._C.HorovodInternalError",
      "A collective failed (a peer was lost, ranks disagreed, a deadline passed); the message "
      "is hvd's.",
      PyExc_RuntimeError, NULL);
  if (!pyhvd_internal_error || pyhvd_wait_init() < 0 ||
      !(pyhvd_handle_type = pyhvd_handle_type_new()) || add_constants(m) < 0 ||
      add_functions(m, pyhvd_op_methods) < 0 || add_functions(m, pyhvd_rdzv_methods) < 0 ||
      add_functions(m, pyhvd_fast_methods) < 0 ||
      pyhvd_add_ref(m, "HorovodInternalError", pyhvd_internal_error) < 0 ||
      pyhvd_add_ref(m, "Handle", (PyObject *)pyhvd_handle_type) < 0 || pyhvd_add_capi(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
