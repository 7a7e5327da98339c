/*
 * dl.c -- dlopen/dlsym with hvd's errors (dl.h).
 */
#include "gpu/cuda/dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static int open_first(hvd__dl_handle *h, const char *what, const char *const *names,
                      size_t n) {
  char tried[768] = "";
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
      h->lib = lib;
      snprintf(h->path, sizeof h->path, "%s", names[i]);
      return 0;
    }
    /* dlerror() names the file and the reason; keep each, not only the last. */
    const char *why = dlerror();
    int w = snprintf(tried + used, sizeof tried - used, "%s%s", i ? "; " : "",
                     why ? why : names[i]);
    if (w > 0) used += (size_t)w < sizeof tried - used ? (size_t)w : sizeof tried - used - 1;
  }
  return hvd__err(HVD_E_UNSUPPORTED, "%s not found (%s)", what, tried);
}

static int resolve(const hvd__dl_library *lib, void *table) {
  hvd__dl_handle *h = table;
  for (size_t i = 0; i < lib->nsyms; i++) {
    dlerror();
    void *fn = dlsym(h->lib, lib->syms[i].name);
    if (fn == NULL)
      return hvd__err(HVD_E_UNSUPPORTED, "%s lacks %s (not %s, or older than hvd needs)",
                      h->path, lib->syms[i].name, lib->what);
    /* POSIX guarantees a function pointer fits a void *; ISO C has no
     * conversion between them, so copy the bytes. */
    memcpy((char *)table + lib->syms[i].offset, &fn, sizeof fn);
  }
  return 0;
}

int hvd__dl_load(const hvd__dl_library *lib, void *table, const char *path) {
  memset(table, 0, lib->table_size);
  const char *const *names = path ? &path : lib->defaults;
  HVD__CHECK(open_first(table, lib->what, names, path ? 1 : lib->ndefaults));
  int rc = resolve(lib, table);
  if (rc < 0) hvd__dl_unload(lib, table);
  return rc;
}

void hvd__dl_unload(const hvd__dl_library *lib, void *table) {
  hvd__dl_handle *h = table;
  if (h->lib) dlclose(h->lib);
  memset(table, 0, lib->table_size);
}

int hvd__dl_once_load(hvd__dl_once *once, const hvd__dl_library *lib, void *table) {
  pthread_mutex_lock(&once->mu);
  if (once->rc == 1) {
    once->rc = hvd__dl_load(lib, table, NULL);
    if (once->rc < 0) snprintf(once->err, sizeof once->err, "%s", hvd_last_error());
  }
  int rc = once->rc;
  pthread_mutex_unlock(&once->mu);
  return rc < 0 ? hvd__err(rc, "%s", once->err) : 0;
}
