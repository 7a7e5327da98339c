/*
 * checkpoint.c -- a model's parameters and an optimizer's state in one
 * file, saved atomically and loaded only when everything in it checks out.
 *
 * The format, version 1.  Integers are little-endian, floats are their
 * IEEE-754 bits as little-endian integers, so a file reads back the same
 * bits on any machine:
 *
 *   "HVDNNCK1"                     8-byte magic
 *   u32 version                    1
 *   i64 epoch, i64 step, u64 seed  hvd_nn_ckpt_meta
 *   tensors                        the parameters, in the model's order
 *   u32 has_optimizer              0 or 1; when 1:
 *     u32 hypers                   HVD_NN_HYPERS, then that many f64
 *     i64 steps
 *     tensors                      the optimizer's slots, in its order
 *   u32 crc                        CRC-32 (zlib's) of every byte before it
 *
 *   tensors = u32 count, then per tensor: u32 name length (1 to 255),
 *             the name (printable ASCII, no NUL), u64 values, the f32s.
 *
 * Only the public accessors are used (hvd_nn_param_at, the optimizer's
 * slots, steps and hypers), so the format does not depend on how the
 * model or the optimizer store things.
 *
 * Saving writes "<path>.tmp.<pid>", syncs it, renames it over path and
 * syncs the directory: a crash leaves the old file or the new one.
 * Loading reads the whole file, checks the envelope (magic, version, CRC),
 * then parses it twice: once to check every length and every tensor's name
 * and size against the model and optimizer, and once, only when all of
 * that passed, to copy the values in.  So a bad file changes nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../wire/le.h"
#include "nn_int.h"

#define CKPT_MAGIC "HVDNNCK1"
#define CKPT_MAGIC_LEN 8
#define CKPT_VERSION 1
#define CKPT_HEADER_LEN (CKPT_MAGIC_LEN + 4)
#define CKPT_CRC_LEN 4
#define CKPT_NAME_MAX 255

/* ---- the tensors of a model or an optimizer, behind one interface ---- */

typedef struct {
  const char *name;
  float *value;
  size_t count;
} tensor_ref;

typedef struct {
  const char *what;  /* "tensor" or "optimizer slot", for messages */
  const char *owner; /* "the model" or "the optimizer" */
  int n;
  tensor_ref (*at)(void *src, int i);
  void *src;
} tensor_list;

static tensor_ref param_ref(void *m, int i) {
  hvd_nn_param *p = hvd_nn_param_at(m, i);
  return p ? (tensor_ref){p->name, p->value, p->count} : (tensor_ref){0};
}

static tensor_ref slot_ref(void *o, int i) {
  tensor_ref t = {0};
  t.value = hvd_nn_optimizer_slot(o, i, &t.count, &t.name);
  return t;
}

static int list_of_params(hvd_nn_model *m, tensor_list *l) {
  *l = (tensor_list){"tensor", "the model", hvd_nn_num_params(m), param_ref, m};
  return l->n < 0 ? l->n : 0;
}

static int list_of_slots(hvd_nn_optimizer *o, tensor_list *l) {
  *l = (tensor_list){"optimizer slot", "the optimizer", hvd_nn_optimizer_num_slots(o), slot_ref, o};
  return l->n < 0 ? l->n : 0;
}

static int list_get(const tensor_list *l, int i, tensor_ref *t) {
  *t = l->at(l->src, i);
  if (t->name == NULL || (t->value == NULL && t->count > 0))
    return hvd_nn__err(HVD_E_INVALID, "checkpoint: %s has no %s %d", l->owner, l->what, i);
  return 0;
}

/* ---- writing ---- */

typedef struct {
  FILE *f;
  uLong crc;
  int err; /* errno of the first failed write, 0 while none has */
} writer;

static void put_bytes(writer *w, const void *p, size_t n) {
  if (w->err || n == 0) return;
  w->crc = crc32_z(w->crc, p, n);
  if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
}

static void put_int(writer *w, uint64_t v, int nbytes) {
  uint8_t b[8];
  hvd__le_store(b, v, nbytes);
  put_bytes(w, b, (size_t)nbytes);
}

static void put_floats(writer *w, const float *v, size_t n) {
  uint8_t buf[4096];
  const size_t per_buf = sizeof buf / 4;
  while (n > 0) {
    size_t k = n < per_buf ? n : per_buf;
    for (size_t i = 0; i < k; i++) {
      uint32_t bits;
      memcpy(&bits, &v[i], 4);
      hvd__le_store(buf + 4 * i, bits, 4);
    }
    put_bytes(w, buf, 4 * k);
    v += k;
    n -= k;
  }
}

static int put_tensors(writer *w, const char *path, const tensor_list *l) {
  put_int(w, (uint32_t)l->n, 4);
  for (int i = 0; i < l->n; i++) {
    tensor_ref t;
    HVD_NN__CHECK(list_get(l, i, &t));
    size_t len = strlen(t.name);
    if (len == 0 || len > CKPT_NAME_MAX)
      return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: %s %d's name '%s' is not 1 to %d bytes",
                         path, l->what, i, t.name, CKPT_NAME_MAX);
    put_int(w, len, 4);
    put_bytes(w, t.name, len);
    put_int(w, t.count, 8);
    put_floats(w, t.value, t.count);
  }
  return 0;
}

static int put_body(writer *w, const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                    const hvd_nn_ckpt_meta *meta) {
  tensor_list params;
  HVD_NN__CHECK(list_of_params(m, &params));
  put_bytes(w, CKPT_MAGIC, CKPT_MAGIC_LEN);
  put_int(w, CKPT_VERSION, 4);
  put_int(w, (uint64_t)meta->epoch, 8);
  put_int(w, (uint64_t)meta->step, 8);
  put_int(w, meta->seed, 8);
  HVD_NN__CHECK(put_tensors(w, path, &params));

  put_int(w, opt != NULL, 4);
  if (opt == NULL) return 0;
  tensor_list slots;
  HVD_NN__CHECK(list_of_slots(opt, &slots));
  const double *hypers = hvd_nn_optimizer_hypers(opt);
  put_int(w, HVD_NN_HYPERS, 4);
  for (int i = 0; i < HVD_NN_HYPERS; i++) {
    uint64_t bits;
    memcpy(&bits, &hypers[i], 8);
    put_int(w, bits, 8);
  }
  put_int(w, (uint64_t)*hvd_nn_optimizer_steps(opt), 8);
  return put_tensors(w, path, &slots);
}

/* Writes the whole checkpoint to tmp and syncs it to disk. */
static int write_file(const char *tmp, const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                      const hvd_nn_ckpt_meta *meta) {
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return hvd_nn__err_sys(HVD_E_SYSTEM, errno, "checkpoint %s: cannot create %s", path, tmp);
  FILE *f = fdopen(fd, "wb");
  if (f == NULL) {
    int e = errno;
    close(fd);
    return hvd_nn__err_sys(HVD_E_SYSTEM, e, "checkpoint %s: fdopen of %s", path, tmp);
  }

  writer w = {f, crc32_z(0, NULL, 0), 0};
  int rc = put_body(&w, path, m, opt, meta);
  if (rc == 0) {
    uint8_t crc[CKPT_CRC_LEN];
    hvd__le_store(crc, w.crc, CKPT_CRC_LEN);
    put_bytes(&w, crc, sizeof crc);
    if (w.err == 0 && fflush(f) != 0) w.err = errno;
    if (w.err == 0 && fsync(fileno(f)) != 0) w.err = errno;
  }
  if (fclose(f) != 0 && w.err == 0) w.err = errno;
  if (rc == 0 && w.err != 0)
    rc = hvd_nn__err_sys(HVD_E_SYSTEM, w.err, "checkpoint %s: writing %s", path, tmp);
  return rc;
}

/* Syncs the directory holding path, so that the rename survives a crash.
 * Some file systems cannot sync a directory (EINVAL); nothing to do there. */
static int sync_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t len = slash == NULL || slash == path ? 1 : (size_t)(slash - path); /* "." or "/" */
  char *dir = malloc(len + 1);
  if (dir == NULL) return hvd_nn__err(HVD_E_NOMEM, "checkpoint %s: out of memory", path);
  memcpy(dir, slash == NULL ? "." : path, len);
  dir[len] = '\0';

  int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP))
    rc = hvd_nn__err_sys(HVD_E_SYSTEM, errno,
                         "checkpoint %s: saved, but syncing directory %s failed", path, dir);
  if (fd >= 0) close(fd);
  free(dir);
  return rc;
}

int hvd_nn_checkpoint_save(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                           const hvd_nn_ckpt_meta *meta) {
  if (path == NULL || m == NULL)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint save: NULL path or model");
  if (opt != NULL && hvd_nn_optimizer_model(opt) != m)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: the optimizer is not the model's", path);
  const hvd_nn_ckpt_meta no_meta = {0, 0, 0};
  if (meta == NULL) meta = &no_meta;

  size_t tmp_len = strlen(path) + 32;
  char *tmp = malloc(tmp_len);
  if (tmp == NULL) return hvd_nn__err(HVD_E_NOMEM, "checkpoint %s: out of memory", path);
  snprintf(tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());

  int rc = write_file(tmp, path, m, opt, meta);
  if (rc == 0 && rename(tmp, path) != 0)
    rc = hvd_nn__err_sys(HVD_E_SYSTEM, errno, "checkpoint %s: renaming %s over it", path, tmp);
  if (rc < 0) {
    unlink(tmp); /* may not exist (create failed): nothing to report */
  } else {
    rc = sync_dir_of(path);
  }
  free(tmp);
  return rc;
}

/* ---- reading ---- */

typedef struct {
  const uint8_t *p;
  size_t left;
  const char *path;
} reader;

/* Takes n bytes from the reader, or fails naming what was being read. */
static int take(reader *r, size_t n, const char *what, const uint8_t **out) {
  *out = NULL;
  if (r->left < n)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: truncated: %s needs %zu bytes, %zu are left",
                       r->path, what, n, r->left);
  *out = r->p;
  r->p += n;
  r->left -= n;
  return 0;
}

static int get_int(reader *r, int nbytes, const char *what, uint64_t *v) {
  const uint8_t *p;
  *v = 0;
  HVD_NN__CHECK(take(r, (size_t)nbytes, what, &p));
  *v = hvd__le_load(p, nbytes);
  return 0;
}

static int check_name(const reader *r, const char *what, uint32_t i, const uint8_t *name,
                      uint32_t len) {
  for (uint32_t k = 0; k < len; k++)
    if (name[k] < 0x20 || name[k] > 0x7e)
      return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: %s %u's name has byte 0x%02x at %u",
                         r->path, what, (unsigned)i, name[k], (unsigned)k);
  return 0;
}

static void decode_floats(float *dst, const uint8_t *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t bits = (uint32_t)hvd__le_load(src + 4 * i, 4);
    memcpy(&dst[i], &bits, 4);
  }
}

/* Reads one tensor's header and locates its values. */
static int get_tensor(reader *r, const char *what, uint32_t i, const uint8_t **name,
                      uint32_t *name_len, uint64_t *count, const uint8_t **values) {
  uint64_t v;
  *name = *values = NULL;
  *name_len = 0;
  *count = 0;
  HVD_NN__CHECK(get_int(r, 4, "a name length", &v));
  if (v == 0 || v > CKPT_NAME_MAX)
    return hvd_nn__err(HVD_E_INVALID,
                       "checkpoint %s: %s %u has a name of %llu bytes, expected 1 to %d", r->path,
                       what, (unsigned)i, (unsigned long long)v, CKPT_NAME_MAX);
  *name_len = (uint32_t)v;
  HVD_NN__CHECK(take(r, *name_len, "a name", name));
  HVD_NN__CHECK(check_name(r, what, i, *name, *name_len));
  HVD_NN__CHECK(get_int(r, 8, "a value count", count));
  if (*count > r->left / 4)
    return hvd_nn__err(HVD_E_INVALID,
                       "checkpoint %s: truncated: %s %u '%.*s' has %llu values, %zu bytes left",
                       r->path, what, (unsigned)i, (int)*name_len, (const char *)*name,
                       (unsigned long long)*count, r->left);
  return take(r, (size_t)*count * 4, "values", values);
}

/* Reads a tensors section.  With l, every tensor must match l's in name
 * and size, and when apply is set the values are copied in; with l NULL
 * (optimizer state nobody asked for) the section is only checked. */
static int get_tensors(reader *r, const tensor_list *l, const char *what, int apply) {
  uint64_t n;
  HVD_NN__CHECK(get_int(r, 4, "a tensor count", &n));
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *name, *values;
    uint32_t name_len;
    uint64_t count;
    HVD_NN__CHECK(get_tensor(r, what, i, &name, &name_len, &count, &values));
    if (l == NULL) continue;
    if (i >= (uint32_t)l->n)
      return hvd_nn__err(HVD_E_INVALID,
                         "checkpoint %s: %s %u '%.*s' (%llu values) is not in %s, which has %d",
                         r->path, what, (unsigned)i, (int)name_len, (const char *)name,
                         (unsigned long long)count, l->owner, l->n);
    tensor_ref t;
    HVD_NN__CHECK(list_get(l, (int)i, &t));
    if (strlen(t.name) != name_len || memcmp(t.name, name, name_len) != 0 || t.count != count)
      return hvd_nn__err(HVD_E_INVALID,
                         "checkpoint %s: %s %u is '%.*s' with %llu values, "
                         "%s has '%s' with %zu values",
                         r->path, what, (unsigned)i, (int)name_len, (const char *)name,
                         (unsigned long long)count, l->owner, t.name, t.count);
    if (apply) decode_floats(t.value, values, count);
  }
  if (l != NULL && n < (uint64_t)l->n) {
    tensor_ref t;
    HVD_NN__CHECK(list_get(l, (int)n, &t));
    return hvd_nn__err(HVD_E_INVALID,
                       "checkpoint %s: the file has %u %ss, %s has %d ('%s' is missing)",
                       r->path, (unsigned)n, what, l->owner, l->n, t.name);
  }
  return 0;
}

static int get_optimizer(reader *r, hvd_nn_optimizer *opt, int apply) {
  uint64_t n, bits[HVD_NN_HYPERS], steps;
  HVD_NN__CHECK(get_int(r, 4, "the hyper-parameter count", &n));
  if (n != HVD_NN_HYPERS)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: %llu optimizer hyper-parameters, expected %d",
                       r->path, (unsigned long long)n, HVD_NN_HYPERS);
  for (int i = 0; i < HVD_NN_HYPERS; i++) {
    HVD_NN__CHECK(get_int(r, 8, "a hyper-parameter", &bits[i]));
    double h;
    memcpy(&h, &bits[i], 8);
    if (!isfinite(h))
      return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: optimizer hyper-parameter %d is %g",
                         r->path, i, h);
  }
  HVD_NN__CHECK(get_int(r, 8, "the optimizer's step count", &steps));
  if ((int64_t)steps < 0)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: the optimizer's step count is %lld",
                       r->path, (long long)(int64_t)steps);

  tensor_list slots;
  if (opt != NULL) HVD_NN__CHECK(list_of_slots(opt, &slots));
  HVD_NN__CHECK(get_tensors(r, opt ? &slots : NULL, "optimizer slot", apply));
  if (apply && opt != NULL) {
    memcpy(hvd_nn_optimizer_hypers(opt), bits, sizeof bits);
    *hvd_nn_optimizer_steps(opt) = (int64_t)steps;
  }
  return 0;
}

/* Parses the body after magic and version (r stops before the CRC).
 * Checks everything when apply is 0; copies in when it is 1, which the
 * caller does only after a check pass of the same bytes succeeded. */
static int get_body(reader *r, hvd_nn_model *m, hvd_nn_optimizer *opt, hvd_nn_ckpt_meta *meta,
                    int apply) {
  uint64_t epoch, step, seed, has_opt;
  HVD_NN__CHECK(get_int(r, 8, "the epoch", &epoch));
  HVD_NN__CHECK(get_int(r, 8, "the step", &step));
  HVD_NN__CHECK(get_int(r, 8, "the seed", &seed));

  tensor_list params;
  HVD_NN__CHECK(list_of_params(m, &params));
  HVD_NN__CHECK(get_tensors(r, &params, "tensor", apply));

  HVD_NN__CHECK(get_int(r, 4, "the optimizer flag", &has_opt));
  if (has_opt > 1)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: optimizer flag is %llu, expected 0 or 1",
                       r->path, (unsigned long long)has_opt);
  if (has_opt == 0 && opt != NULL)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: the file has no optimizer state to load",
                       r->path);
  if (has_opt) HVD_NN__CHECK(get_optimizer(r, opt, apply));
  if (r->left != 0)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: %zu unexpected bytes before the checksum",
                       r->path, r->left);

  if (apply && meta != NULL) {
    meta->epoch = (int64_t)epoch;
    meta->step = (int64_t)step;
    meta->seed = seed;
  }
  return 0;
}

/* Reads the whole file into a new buffer. */
static int read_file(const char *path, uint8_t **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return hvd_nn__err_sys(HVD_E_SYSTEM, errno, "checkpoint %s: cannot open", path);
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = hvd_nn__err_sys(HVD_E_SYSTEM, errno, "checkpoint %s: stat", path);
  } else if (!S_ISREG(st.st_mode)) {
    rc = hvd_nn__err(HVD_E_INVALID, "checkpoint %s: not a regular file", path);
  } else if ((uint64_t)st.st_size > SIZE_MAX) {
    rc = hvd_nn__err(HVD_E_NOMEM, "checkpoint %s: %lld bytes is too large", path,
                     (long long)st.st_size);
  } else {
    *len = (size_t)st.st_size;
    *buf = malloc(*len > 0 ? *len : 1);
    if (*buf == NULL)
      rc = hvd_nn__err(HVD_E_NOMEM, "checkpoint %s: out of memory for %zu bytes", path, *len);
  }

  for (size_t got = 0; rc == 0 && got < *len;) {
    ssize_t n = read(fd, *buf + got, *len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      rc = hvd_nn__err_sys(HVD_E_SYSTEM, errno, "checkpoint %s: read", path);
    else if (n == 0)
      rc = hvd_nn__err(HVD_E_INVALID, "checkpoint %s: shrank while being read", path);
    else
      got += (size_t)n;
  }
  close(fd);
  if (rc < 0) {
    free(*buf);
    *buf = NULL;
  }
  return rc;
}

/* Checks what surrounds the body: size, magic, version and the CRC. */
static int check_envelope(const char *path, const uint8_t *buf, size_t len) {
  if (len < CKPT_HEADER_LEN + CKPT_CRC_LEN)
    return hvd_nn__err(HVD_E_INVALID,
                       "checkpoint %s: truncated: %zu bytes of at least %d", path,
                       len, CKPT_HEADER_LEN + CKPT_CRC_LEN);
  if (memcmp(buf, CKPT_MAGIC, CKPT_MAGIC_LEN) != 0)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: not a checkpoint (it does not start with %s)",
                       path, CKPT_MAGIC);
  uint32_t version = (uint32_t)hvd__le_load(buf + CKPT_MAGIC_LEN, 4);
  if (version != CKPT_VERSION)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: format version %u, expected %d", path,
                       (unsigned)version, CKPT_VERSION);
  size_t body = len - CKPT_CRC_LEN;
  uint32_t want = (uint32_t)hvd__le_load(buf + body, CKPT_CRC_LEN);
  uint32_t got = (uint32_t)crc32_z(crc32_z(0, NULL, 0), buf, body);
  if (want != got)
    return hvd_nn__err(HVD_E_INVALID,
                       "checkpoint %s: checksum mismatch (corrupt or truncated): "
                       "the file says 0x%08x, its bytes give 0x%08x",
                       path, (unsigned)want, (unsigned)got);
  return 0;
}

int hvd_nn_checkpoint_load(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                           hvd_nn_ckpt_meta *meta) {
  if (path == NULL || m == NULL)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint load: NULL path or model");
  if (opt != NULL && hvd_nn_optimizer_model(opt) != m)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint %s: the optimizer is not the model's", path);

  uint8_t *buf;
  size_t len;
  HVD_NN__CHECK(read_file(path, &buf, &len));
  int rc = check_envelope(path, buf, len);
  for (int apply = 0; rc == 0 && apply <= 1; apply++) {
    reader r = {buf + CKPT_HEADER_LEN, len - CKPT_HEADER_LEN - CKPT_CRC_LEN, path};
    rc = get_body(&r, m, opt, meta, apply);
  }
  free(buf);
  return rc;
}
