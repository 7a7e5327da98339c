/*
 * dl.h -- loading a shared library at run time and resolving a table of
 * its functions, for the GPU libraries hvd does not link (libcudart,
 * libnccl): one installed build then serves machines with and without a
 * GPU, and a missing library or symbol is an error with a message, never
 * a loader failure at start.
 */
#ifndef HVD_GPU_DL_H
#define HVD_GPU_DL_H

#include <pthread.h>
#include <stddef.h>

/* The first member of every table of functions. */
typedef struct {
  void *lib;
  char path[256]; /* the name that loaded */
} hvd__dl_handle;

/* One function to resolve: its exported name and where its pointer lives
 * in the table (offsetof). */
typedef struct {
  const char *name;
  size_t offset;
} hvd__dl_sym;
#define HVD__DL_SYM(type, field, symbol) {symbol, offsetof(type, field)}

/* What to load: a name for messages, the names tried in turn when the
 * caller gives no path, the functions, and the table's size. */
typedef struct {
  const char *what;
  const char *const *defaults;
  size_t ndefaults;
  const hvd__dl_sym *syms;
  size_t nsyms;
  size_t table_size;
} hvd__dl_library;

/* Loads path (NULL: the first of lib->defaults that loads, RTLD_NOW |
 * RTLD_LOCAL) and resolves every function into table, whose first member
 * is an hvd__dl_handle.  No library: HVD_E_UNSUPPORTED "<what> not found
 * (<each reason>)"; a missing function: HVD_E_UNSUPPORTED "<path> lacks
 * <name>"; the table is then all zero. */
int hvd__dl_load(const hvd__dl_library *lib, void *table, const char *path);
void hvd__dl_unload(const hvd__dl_library *lib, void *table);

/* A library loaded once per process, on first use, by the default search;
 * a failure is remembered and every later caller reads its message. */
typedef struct {
  pthread_mutex_t mu;
  int rc; /* 1: not tried yet */
  char err[512];
} hvd__dl_once;
#define HVD__DL_ONCE_INIT {PTHREAD_MUTEX_INITIALIZER, 1, ""}

/* hvd__dl_load(lib, table, NULL) the first time; its result every time. */
int hvd__dl_once_load(hvd__dl_once *once, const hvd__dl_library *lib, void *table);

#endif /* HVD_GPU_DL_H */
