/*
 * test_nn_checkpoint.c -- checkpoint save and load (checkpoint.c).
 *
 * A small CNN and an optimizer with non-zero state (a few steps on made-up
 * gradients) are saved and loaded into a model and optimizer initialised
 * differently: everything must come back bit for bit.  Then the ways a
 * load must fail without changing anything (every single-bit flip, every
 * kind of truncation, appended bytes, crafted lengths behind a valid
 * checksum, another architecture, another optimizer) and the ways a save
 * must fail without leaving its temporary file behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "hvd_nn.h"
#include "slurp.h"

#define PATH_LEN 4096

static char tmpdir[256]; /* short, so that paths built on it fit PATH_LEN */
static char ck_path[PATH_LEN]; /* tmpdir/ck */

/* ---- files ---- */

static void write_raw(const char *path, const uint8_t *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (len > 0) assert_int_equal(fwrite(bytes, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

/* The names in tmpdir, sorted and joined with spaces. */
static void list_dir(char *out, size_t cap) {
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  char names[16][256];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    assert_true(n < 16);
    snprintf(names[n++], sizeof names[0], "%s", e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], compare_names);
  size_t used = 0;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    assert_true(used + len + 2 <= cap);
    if (i > 0) out[used++] = ' ';
    memcpy(out + used, names[i], len);
    used += len;
  }
  out[used] = '\0';
}

/* Empties tmpdir (files, and directories one level deep). */
static void clean_dir(void) {
  DIR *d = opendir(tmpdir);
  if (d == NULL) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[PATH_LEN + 256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
    if (unlink(path) != 0) rmdir(path);
  }
  closedir(d);
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hvd_test_nn_checkpoint.XXXXXX");
  if (mkdtemp(tmpdir) == NULL) return -1;
  snprintf(ck_path, sizeof ck_path, "%s/ck", tmpdir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  clean_dir();
  return rmdir(tmpdir);
}

static int per_test_teardown(void **state) {
  (void)state;
  clean_dir();
  return 0;
}

/* ---- models and optimizers ---- */

typedef enum { OPT_NONE, OPT_SGD, OPT_ADAM } opt_kind;

/* The test's CNN: conv 4x3x3 (pad 1), relu, maxpool 2, dense 10. */
static hvd_nn_model *small_cnn(uint64_t seed) {
  hvd_nn_model *m = hvd_nn_model_new(1, 8, 8);
  assert_non_null(m);
  assert_int_equal(hvd_nn_add_conv2d(m, 4, 3, 1, 1), 0);
  assert_int_equal(hvd_nn_add_relu(m), 0);
  assert_int_equal(hvd_nn_add_maxpool(m, 2, 2), 0);
  assert_int_equal(hvd_nn_add_dense(m, 10), 0);
  assert_int_equal(hvd_nn_model_init(m, seed), 0);
  return m;
}

/* lr and the rest differ with salt, so a load visibly replaces them. */
static hvd_nn_optimizer *make_opt(hvd_nn_model *m, opt_kind kind, float salt) {
  hvd_nn_optimizer *o = NULL;
  if (kind == OPT_SGD) o = hvd_nn_sgd_new(m, 0.1f + salt, 0.9f - salt, 1e-4f);
  if (kind == OPT_ADAM) o = hvd_nn_adam_new(m, 1e-3f + salt, 0.9f - salt, 0.999f, 1e-8f);
  if (kind != OPT_NONE) assert_non_null(o);
  return o;
}

/* A few steps on made-up gradients, so the slots and step count are not
 * their initial values. */
static void train(hvd_nn_optimizer *o, int steps) {
  hvd_nn_model *m = hvd_nn_optimizer_model(o);
  for (int s = 0; s < steps; s++) {
    hvd_nn_model_zero_grad(m);
    for (int i = 0; i < hvd_nn_num_params(m); i++) {
      hvd_nn_param *p = hvd_nn_param_at(m, i);
      for (size_t j = 0; j < p->count; j++) p->grad[j] = sinf((float)(j * 7 + i * 13 + s));
    }
    assert_int_equal(hvd_nn_optimizer_step(o), 0);
  }
}

/* Everything a load may change, as bytes: parameters, then (with an
 * optimizer) its slots, steps and hypers, then meta. */
typedef struct {
  uint8_t *bytes;
  size_t len, cap;
} snapshot;

static void snap_add(snapshot *s, const void *p, size_t n) {
  if (s->len + n > s->cap) {
    s->cap = (s->len + n) * 2;
    s->bytes = realloc(s->bytes, s->cap);
    assert_non_null(s->bytes);
  }
  memcpy(s->bytes + s->len, p, n);
  s->len += n;
}

static snapshot take_snapshot(hvd_nn_model *m, hvd_nn_optimizer *o, const hvd_nn_ckpt_meta *meta) {
  snapshot s = {NULL, 0, 0};
  for (int i = 0; i < hvd_nn_num_params(m); i++) {
    hvd_nn_param *p = hvd_nn_param_at(m, i);
    snap_add(&s, p->name, strlen(p->name) + 1);
    snap_add(&s, p->value, p->count * sizeof(float));
  }
  if (o != NULL) {
    for (int i = 0; i < hvd_nn_optimizer_num_slots(o); i++) {
      size_t count;
      const char *name;
      float *slot = hvd_nn_optimizer_slot(o, i, &count, &name);
      snap_add(&s, name, strlen(name) + 1);
      snap_add(&s, slot, count * sizeof(float));
    }
    snap_add(&s, hvd_nn_optimizer_steps(o), sizeof(int64_t));
    snap_add(&s, hvd_nn_optimizer_hypers(o), HVD_NN_HYPERS * sizeof(double));
  }
  if (meta != NULL) snap_add(&s, meta, sizeof *meta);
  return s;
}

static void assert_same(const snapshot *a, const snapshot *b) {
  assert_int_equal(a->len, b->len);
  assert_memory_equal(a->bytes, b->bytes, a->len);
}

/* A model and optimizer trained, saved to ck_path with meta. */
typedef struct {
  hvd_nn_model *m;
  hvd_nn_optimizer *o;
  hvd_nn_ckpt_meta meta;
} trained;

static trained save_trained(opt_kind kind, uint64_t seed, int steps) {
  trained t;
  t.m = small_cnn(seed);
  t.o = make_opt(t.m, kind, 0.0f);
  if (t.o != NULL) train(t.o, steps);
  t.meta = (hvd_nn_ckpt_meta){3, 17 + (int64_t)seed, 0xfedcba9876543210ull + seed};
  int rc = hvd_nn_checkpoint_save(ck_path, t.m, t.o, &t.meta);
  if (rc != 0) fail_msg("save: %s", hvd_nn_last_error());
  return t;
}

static void free_trained(trained *t) {
  hvd_nn_optimizer_free(t->o);
  hvd_nn_model_free(t->m);
}

/* ---- round trips ---- */

static void check_round_trip(opt_kind kind) {
  trained a = save_trained(kind, 1, 3);
  char names[1024];
  list_dir(names, sizeof names);
  assert_string_equal(names, "ck"); /* no temporary file left */

  hvd_nn_model *m = small_cnn(2);
  hvd_nn_optimizer *o = make_opt(m, kind, 0.05f);
  if (o != NULL) train(o, 1);
  hvd_nn_ckpt_meta meta = {0, 0, 0};
  snapshot before = take_snapshot(m, o, &meta);
  snapshot want = take_snapshot(a.m, a.o, &a.meta);
  assert_true(before.len == want.len && memcmp(before.bytes, want.bytes, want.len) != 0);

  int rc = hvd_nn_checkpoint_load(ck_path, m, o, &meta);
  if (rc != 0) fail_msg("load: %s", hvd_nn_last_error());
  snapshot got = take_snapshot(m, o, &meta);
  assert_same(&got, &want);
  if (o != NULL) assert_int_equal(*hvd_nn_optimizer_steps(o), 3);
  assert_int_equal(meta.epoch, 3);
  assert_int_equal(meta.step, 18);
  assert_true(meta.seed == 0xfedcba9876543211ull);

  free(before.bytes);
  free(want.bytes);
  free(got.bytes);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
  free_trained(&a);
}

static void test_round_trip_sgd(void **state) {
  (void)state;
  check_round_trip(OPT_SGD);
}

static void test_round_trip_adam(void **state) {
  (void)state;
  check_round_trip(OPT_ADAM);
}

static void test_round_trip_model_only(void **state) {
  (void)state;
  check_round_trip(OPT_NONE);
}

/* Optimizer state in the file is ignored when no optimizer is given. */
static void test_load_without_optimizer(void **state) {
  (void)state;
  trained a = save_trained(OPT_ADAM, 1, 2);
  hvd_nn_model *m = small_cnn(2);
  assert_int_equal(hvd_nn_checkpoint_load(ck_path, m, NULL, NULL), 0);
  snapshot want = take_snapshot(a.m, NULL, NULL), got = take_snapshot(m, NULL, NULL);
  assert_same(&got, &want);
  free(want.bytes);
  free(got.bytes);
  hvd_nn_model_free(m);
  free_trained(&a);
}

static void test_overwrite(void **state) {
  (void)state;
  trained a = save_trained(OPT_SGD, 1, 1);
  trained b = save_trained(OPT_SGD, 5, 4); /* over a's file */
  char names[1024];
  list_dir(names, sizeof names);
  assert_string_equal(names, "ck");

  hvd_nn_model *m = small_cnn(9);
  hvd_nn_optimizer *o = make_opt(m, OPT_SGD, 0.0f);
  hvd_nn_ckpt_meta meta;
  assert_int_equal(hvd_nn_checkpoint_load(ck_path, m, o, &meta), 0);
  snapshot want = take_snapshot(b.m, b.o, &b.meta), got = take_snapshot(m, o, &meta);
  assert_same(&got, &want);
  free(want.bytes);
  free(got.bytes);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
  free_trained(&a);
  free_trained(&b);
}

/* ---- loads that must fail and change nothing ---- */

/* A target that any failed load must leave as it was. */
typedef struct {
  hvd_nn_model *m;
  hvd_nn_optimizer *o;
  hvd_nn_ckpt_meta meta;
  snapshot before;
} target;

static target make_target(hvd_nn_model *m, opt_kind kind) {
  target t;
  t.m = m;
  t.o = make_opt(m, kind, 0.05f);
  if (t.o != NULL) train(t.o, 1);
  t.meta = (hvd_nn_ckpt_meta){-1, -2, 42};
  t.before = take_snapshot(t.m, t.o, &t.meta);
  return t;
}

static void free_target(target *t) {
  free(t->before.bytes);
  hvd_nn_optimizer_free(t->o);
  hvd_nn_model_free(t->m);
}

/* Loads path into t, which must fail with code and a message holding the
 * path and each string of the NULL-terminated list; t must be unchanged. */
static void expect_failure(target *t, const char *path, int code, ...) {
  int rc = hvd_nn_checkpoint_load(path, t->m, t->o, &t->meta);
  const char *msg = hvd_nn_last_error();
  if (rc != code) fail_msg("load returned %d, expected %d (%s)", rc, code, msg);
  if (strstr(msg, path) == NULL) fail_msg("message '%s' does not name %s", msg, path);
  va_list ap;
  va_start(ap, code);
  for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
    if (strstr(msg, want) == NULL) fail_msg("message '%s' lacks '%s'", msg, want);
  va_end(ap);
  snapshot now = take_snapshot(t->m, t->o, &t->meta);
  assert_same(&now, &t->before);
  free(now.bytes);
}

static void test_every_bit_flip_fails(void **state) {
  (void)state;
  trained a = save_trained(OPT_ADAM, 1, 2);
  target t = make_target(small_cnn(2), OPT_ADAM);
  size_t len;
  uint8_t *file = slurp(ck_path, &len);
  char bad[PATH_LEN + 8];
  snprintf(bad, sizeof bad, "%s/bad", tmpdir);

  for (size_t i = 0; i < len; i++) {
    int bit = (int)(i % 8);
    file[i] ^= (uint8_t)(1u << bit);
    write_raw(bad, file, len);
    expect_failure(&t, bad, HVD_E_INVALID, NULL);
    file[i] ^= (uint8_t)(1u << bit);
  }
  /* In the middle of the data, the checksum is what catches it. */
  file[len / 2] ^= 0x01;
  write_raw(bad, file, len);
  expect_failure(&t, bad, HVD_E_INVALID, "checksum mismatch", NULL);
  file[len / 2] ^= 0x01;
  /* The magic and the version are checked first, by name. */
  file[0] = 'X';
  write_raw(bad, file, len);
  expect_failure(&t, bad, HVD_E_INVALID, "not a checkpoint", NULL);
  file[0] = 'H';
  file[8] = 2;
  write_raw(bad, file, len);
  expect_failure(&t, bad, HVD_E_INVALID, "format version 2, expected 1", NULL);

  free(file);
  free_target(&t);
  free_trained(&a);
}

static void test_truncated_and_appended(void **state) {
  (void)state;
  trained a = save_trained(OPT_SGD, 1, 2);
  target t = make_target(small_cnn(2), OPT_SGD);
  size_t len;
  uint8_t *file = slurp(ck_path, &len);
  char bad[PATH_LEN + 8];
  snprintf(bad, sizeof bad, "%s/bad", tmpdir);

  size_t cuts[] = {0, 1, 7, 8, 12, 15, 16, 40, len / 3, len / 2, len - 5, len - 4, len - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    write_raw(bad, file, cuts[i]);
    expect_failure(&t, bad, HVD_E_INVALID, cuts[i] < 16 ? "truncated" : "checksum", NULL);
  }
  uint8_t *longer = calloc(len + 100, 1);
  assert_non_null(longer);
  memcpy(longer, file, len);
  write_raw(bad, longer, len + 1);
  expect_failure(&t, bad, HVD_E_INVALID, "checksum", NULL);
  write_raw(bad, longer, len + 100);
  expect_failure(&t, bad, HVD_E_INVALID, "checksum", NULL);

  free(longer);
  free(file);
  free_target(&t);
  free_trained(&a);
}

/* Rewrites the file's CRC after an edit, so only the parser can object. */
static void write_with_crc(const char *path, uint8_t *file, size_t len) {
  uint32_t crc = (uint32_t)crc32(0L, file, (uInt)(len - 4));
  for (int i = 0; i < 4; i++) file[len - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
  write_raw(path, file, len);
}

static void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int nbytes) {
  uint64_t v = 0;
  for (int i = 0; i < nbytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The offset just past the tensors section at off. */
static size_t skip_tensors(const uint8_t *file, size_t off) {
  uint32_t n = (uint32_t)get_le(file + off, 4);
  off += 4;
  for (uint32_t i = 0; i < n; i++) {
    off += 4 + get_le(file + off, 4);
    off += 8 + 4 * get_le(file + off, 8);
  }
  return off;
}

/* Lengths inside a file with a valid checksum: each is checked against
 * what is left before it is used. */
static void test_crafted_lengths(void **state) {
  (void)state;
  trained a = save_trained(OPT_SGD, 1, 1);
  target t = make_target(small_cnn(2), OPT_SGD);
  size_t len;
  uint8_t *file = slurp(ck_path, &len);
  uint8_t *copy = malloc(len);
  assert_non_null(copy);
  char bad[PATH_LEN + 8];
  snprintf(bad, sizeof bad, "%s/bad", tmpdir);

  /* Offsets: magic 8, version 4, meta 24, tensor count 4, then tensor 0:
   * name length (4) at 40, name "0.conv2d.weight" (15) at 44, value count
   * (8) at 59. */
  assert_memory_equal(file + 44, "0.conv2d.weight", 15);

  memcpy(copy, file, len);
  put_le32(copy + 40, 0xffffffffu);
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "tensor 0 has a name of 4294967295 bytes", NULL);

  memcpy(copy, file, len);
  put_le32(copy + 59, 0xffffffffu);
  put_le32(copy + 63, 0xffffffffu);
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "truncated", "'0.conv2d.weight'", NULL);

  memcpy(copy, file, len);
  put_le32(copy + 36, 0x7fffffffu); /* tensor count: what follows the 4 real ones is misread */
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "tensor 4", NULL);

  memcpy(copy, file, len);
  copy[44] = '\n';
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "name has byte 0x0a", NULL);

  memcpy(copy, file, len);
  copy[45] = '_'; /* "0_conv2d.weight" */
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "tensor 0 is '0_conv2d.weight' with 36 values", NULL);

  /* The optimizer section: flag, hyper-parameter count, hypers, steps. */
  size_t opt_at = skip_tensors(file, 36);
  assert_int_equal(get_le(file + opt_at, 4), 1);
  memcpy(copy, file, len);
  put_le32(copy + opt_at, 2);
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "optimizer flag is 2", NULL);

  memcpy(copy, file, len);
  put_le32(copy + opt_at + 4, 5);
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "5 optimizer hyper-parameters, expected 4", NULL);

  memcpy(copy, file, len);
  double nan = NAN;
  memcpy(copy + opt_at + 8, &nan, 8); /* the tests run on little-endian machines */
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "hyper-parameter 0 is nan", NULL);

  memcpy(copy, file, len);
  assert_int_equal(get_le(file + opt_at + 40, 8), 1); /* one step taken */
  memset(copy + opt_at + 40, 0xff, 8);
  write_with_crc(bad, copy, len);
  expect_failure(&t, bad, HVD_E_INVALID, "step count is -1", NULL);

  /* A valid file with bytes appended before a recomputed checksum. */
  uint8_t *longer = calloc(len + 3, 1);
  assert_non_null(longer);
  memcpy(longer, file, len - 4);
  write_with_crc(bad, longer, len + 3);
  expect_failure(&t, bad, HVD_E_INVALID, "3 unexpected bytes", NULL);

  free(longer);
  free(copy);
  free(file);
  free_target(&t);
  free_trained(&a);
}

static void test_architecture_mismatch(void **state) {
  (void)state;
  trained a = save_trained(OPT_SGD, 1, 1);

  /* Same layers, another width: the first tensor differs in size. */
  hvd_nn_model *wider = hvd_nn_model_new(1, 8, 8);
  assert_int_equal(hvd_nn_add_conv2d(wider, 5, 3, 1, 1), 0);
  assert_int_equal(hvd_nn_add_dense(wider, 10), 0);
  target t1 = make_target(wider, OPT_SGD);
  expect_failure(&t1, ck_path, HVD_E_INVALID,
                 "tensor 0 is '0.conv2d.weight' with 36 values, the model has "
                 "'0.conv2d.weight' with 45 values",
                 NULL);
  free_target(&t1);

  /* Another kind of layer. */
  hvd_nn_model *mlp = hvd_nn_model_new(1, 8, 8);
  assert_int_equal(hvd_nn_add_dense(mlp, 10), 0);
  target t2 = make_target(mlp, OPT_NONE);
  expect_failure(&t2, ck_path, HVD_E_INVALID, "'0.conv2d.weight'", "'0.dense.weight'", NULL);
  free_target(&t2);

  /* A prefix of the file's model: the file has more tensors. */
  hvd_nn_model *conv = hvd_nn_model_new(1, 8, 8);
  assert_int_equal(hvd_nn_add_conv2d(conv, 4, 3, 1, 1), 0);
  target t3 = make_target(conv, OPT_NONE);
  expect_failure(&t3, ck_path, HVD_E_INVALID, "tensor 2 '3.dense.weight'", "not in the model",
                 NULL);
  free_target(&t3);

  /* The file's model plus a layer: the model has more tensors. */
  hvd_nn_model *deeper = small_cnn(3);
  assert_int_equal(hvd_nn_add_dense(deeper, 10), 0);
  target t4 = make_target(deeper, OPT_NONE);
  expect_failure(&t4, ck_path, HVD_E_INVALID, "'4.dense.weight' is missing", NULL);
  free_target(&t4);

  free_trained(&a);
}

static void test_optimizer_mismatch(void **state) {
  (void)state;
  trained a = save_trained(OPT_ADAM, 1, 2);
  /* The parameters match, the slots do not: nothing may change, the
   * parameters included. */
  target t = make_target(small_cnn(2), OPT_SGD);
  expect_failure(&t, ck_path, HVD_E_INVALID, "optimizer slot 0", "exp_avg", "momentum", NULL);
  free_target(&t);
  free_trained(&a);

  /* A file without optimizer state, loaded with an optimizer. */
  trained b = save_trained(OPT_NONE, 1, 0);
  target u = make_target(small_cnn(2), OPT_ADAM);
  expect_failure(&u, ck_path, HVD_E_INVALID, "no optimizer state", NULL);
  free_target(&u);
  free_trained(&b);
}

static void test_load_errors(void **state) {
  (void)state;
  target t = make_target(small_cnn(2), OPT_SGD);
  char missing[PATH_LEN + 16];
  snprintf(missing, sizeof missing, "%s/missing", tmpdir);
  expect_failure(&t, missing, HVD_E_SYSTEM, "No such file or directory", NULL);
  expect_failure(&t, tmpdir, HVD_E_INVALID, "not a regular file", NULL);

  assert_int_equal(hvd_nn_checkpoint_load(NULL, t.m, t.o, NULL), HVD_E_INVALID);
  assert_int_equal(hvd_nn_checkpoint_load(ck_path, NULL, NULL, NULL), HVD_E_INVALID);
  /* An optimizer of another model. */
  hvd_nn_model *other = small_cnn(4);
  hvd_nn_optimizer *o = make_opt(other, OPT_SGD, 0.0f);
  assert_int_equal(hvd_nn_checkpoint_load(ck_path, t.m, o, NULL), HVD_E_INVALID);
  assert_int_equal(hvd_nn_checkpoint_save(ck_path, t.m, o, NULL), HVD_E_INVALID);
  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(other);
  free_target(&t);
}

/* ---- saves that must fail ---- */

static void test_save_errors(void **state) {
  (void)state;
  hvd_nn_model *m = small_cnn(1);
  hvd_nn_optimizer *o = make_opt(m, OPT_SGD, 0.0f);

  const char *nowhere = "/nonexistent-hvd-dir/ck";
  assert_int_equal(hvd_nn_checkpoint_save(nowhere, m, o, NULL), HVD_E_SYSTEM);
  assert_non_null(strstr(hvd_nn_last_error(), nowhere));
  assert_non_null(strstr(hvd_nn_last_error(), "No such file or directory"));

  /* The rename fails (a directory is in the way): the temporary file,
   * which was written, must be removed. */
  char sub[PATH_LEN + 8];
  snprintf(sub, sizeof sub, "%s/sub", tmpdir);
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(hvd_nn_checkpoint_save(sub, m, o, NULL), HVD_E_SYSTEM);
  assert_non_null(strstr(hvd_nn_last_error(), sub));
  char names[1024];
  list_dir(names, sizeof names);
  assert_string_equal(names, "sub");

  assert_int_equal(hvd_nn_checkpoint_save(NULL, m, o, NULL), HVD_E_INVALID);
  assert_int_equal(hvd_nn_checkpoint_save(ck_path, NULL, NULL, NULL), HVD_E_INVALID);

  hvd_nn_optimizer_free(o);
  hvd_nn_model_free(m);
}

/* A relative path: the directory synced is ".". */
static void test_save_relative_path(void **state) {
  (void)state;
  char cwd[PATH_LEN];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(tmpdir), 0);
  hvd_nn_model *m = small_cnn(1);
  int rc = hvd_nn_checkpoint_save("rel", m, NULL, NULL);
  assert_int_equal(chdir(cwd), 0);
  if (rc != 0) fail_msg("save: %s", hvd_nn_last_error());
  char names[1024];
  list_dir(names, sizeof names);
  assert_string_equal(names, "rel");
  hvd_nn_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_round_trip_sgd, per_test_teardown),
      cmocka_unit_test_teardown(test_round_trip_adam, per_test_teardown),
      cmocka_unit_test_teardown(test_round_trip_model_only, per_test_teardown),
      cmocka_unit_test_teardown(test_load_without_optimizer, per_test_teardown),
      cmocka_unit_test_teardown(test_overwrite, per_test_teardown),
      cmocka_unit_test_teardown(test_every_bit_flip_fails, per_test_teardown),
      cmocka_unit_test_teardown(test_truncated_and_appended, per_test_teardown),
      cmocka_unit_test_teardown(test_crafted_lengths, per_test_teardown),
      cmocka_unit_test_teardown(test_architecture_mismatch, per_test_teardown),
      cmocka_unit_test_teardown(test_optimizer_mismatch, per_test_teardown),
      cmocka_unit_test_teardown(test_load_errors, per_test_teardown),
      cmocka_unit_test_teardown(test_save_errors, per_test_teardown),
      cmocka_unit_test_teardown(test_save_relative_path, per_test_teardown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
