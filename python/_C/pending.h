/* TEMPORARY (until libhvd has them): weak references, NULL while missing. */
#ifndef PYHVD_PENDING_H
#define PYHVD_PENDING_H
extern __typeof__(hvd_grouped_allgather_async) hvd_grouped_allgather_async __attribute__((weak));
extern __typeof__(hvd_grouped_reducescatter_async) hvd_grouped_reducescatter_async
    __attribute__((weak));
extern __typeof__(hvd_start_timeline) hvd_start_timeline __attribute__((weak));
extern __typeof__(hvd_stop_timeline) hvd_stop_timeline __attribute__((weak));
#define PENDING(fn) \
  if (!(fn)) return PyErr_Format(PyExc_NotImplementedError, "%s is not in this libhvd", #fn)
#endif
