/*
 * test_nn_dataset.c -- the IDX loader (dataset.c).
 *
 * The real Fashion-MNIST files, when the machine has them, against facts
 * checked beforehand with Python's gzip module (60000 / 10000 samples of
 * 28 x 28, 6000 / 1000 per class, the first label 9 in both splits) and
 * against the raw bytes read here through zlib.  Then small files written
 * by the test, good and broken in every way the loader promises to catch:
 * each broken one must fail with a message naming the file and the
 * problem, and leave the dataset zeroed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "hvd_nn.h"
#include "slurp.h"

#define PATH_LEN 4096

static char tmpdir[256]; /* short, so that paths built on it fit PATH_LEN */

/* ---- writing test files ---- */

static void path_of(char *out, const char *split, const char *kind) {
  snprintf(out, PATH_LEN, "%s/%s-%s-ubyte.gz", tmpdir, split, kind);
}

static void write_raw(const char *path, const uint8_t *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(bytes, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, const uint8_t *bytes, size_t len) {
  gzFile gz = gzopen(path, "wb");
  assert_non_null(gz);
  if (len > 0) assert_int_equal(gzwrite(gz, bytes, (unsigned)len), (int)len);
  assert_int_equal(gzclose(gz), Z_OK);
}

static size_t put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
  return 4;
}

/* An IDX images file's header for n samples of rows x cols, followed by
 * len bytes of data, byte i = (i * 37) % 256. */
static size_t make_images(uint8_t *buf, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                          size_t len) {
  size_t off = put_be32(buf, magic);
  off += put_be32(buf + off, n);
  off += put_be32(buf + off, rows);
  off += put_be32(buf + off, cols);
  for (size_t i = 0; i < len; i++) buf[off++] = (uint8_t)(i * 37 % 256);
  return off;
}

/* An IDX labels file of n labels, label i = i % 10 unless bad_label >= 0
 * (then the last label is bad_label). */
static size_t make_labels(uint8_t *buf, uint32_t n, int bad_label) {
  size_t off = put_be32(buf, 0x00000801);
  off += put_be32(buf + off, n);
  for (uint32_t i = 0; i < n; i++) buf[off++] = (uint8_t)(i % 10);
  if (bad_label >= 0) buf[off - 1] = (uint8_t)bad_label;
  return off;
}

static char images_path[PATH_LEN], labels_path[PATH_LEN];

/* Writes split "good" with 3 samples of 4 x 5 and matching labels. */
static void write_good_pair(void) {
  uint8_t buf[256];
  write_gz(images_path, buf, make_images(buf, 0x00000803, 3, 4, 5, 60));
  write_gz(labels_path, buf, make_labels(buf, 3, -1));
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hvd_test_nn_dataset.XXXXXX");
  if (mkdtemp(tmpdir) == NULL) return -1;
  path_of(images_path, "good", "images-idx3");
  path_of(labels_path, "good", "labels-idx1");
  write_good_pair();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink(images_path);
  unlink(labels_path);
  return rmdir(tmpdir);
}

/* ---- checking failures ---- */

static void assert_zeroed(const hvd_nn_dataset *d) {
  hvd_nn_dataset zero;
  memset(&zero, 0, sizeof zero);
  assert_memory_equal(d, &zero, sizeof zero);
}

/* Loads split "good" from tmpdir, which must fail with code and a message
 * containing the file's name and every string in the NULL-terminated
 * list; then rewrites the good files for the next case. */
static void expect_failure(int code, const char *file, ...) {
  hvd_nn_dataset d;
  memset(&d, 0xab, sizeof d); /* the loader must zero it */
  assert_int_equal(hvd_nn_dataset_load_idx(&d, tmpdir, "good"), code);
  assert_zeroed(&d);

  const char *msg = hvd_nn_last_error();
  if (strstr(msg, file) == NULL) fail_msg("message '%s' does not name %s", msg, file);
  va_list ap;
  va_start(ap, file);
  for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
    if (strstr(msg, want) == NULL) fail_msg("message '%s' lacks '%s'", msg, want);
  va_end(ap);
  write_good_pair();
}

/* ---- a good small file ---- */

static void test_small_file_loads(void **state) {
  (void)state;
  hvd_nn_dataset d;
  assert_int_equal(hvd_nn_dataset_load_idx(&d, tmpdir, "good"), 0);
  assert_int_equal(d.n, 3);
  assert_int_equal(d.rows, 4);
  assert_int_equal(d.cols, 5);
  for (int i = 0; i < 3 * 4 * 5; i++) {
    float want = ((float)(i * 37 % 256) / 255.0f - 0.2860f) / 0.3530f;
    assert_float_equal(d.images[i], want, 1e-6);
  }
  for (int i = 0; i < 3; i++) assert_int_equal(d.labels[i], i);
  hvd_nn_dataset_free(&d);
  assert_zeroed(&d);
  hvd_nn_dataset_free(&d); /* twice is harmless */
  hvd_nn_dataset_free(NULL);
}

static void test_uncompressed_file_loads(void **state) {
  (void)state;
  uint8_t buf[256];
  write_raw(images_path, buf, make_images(buf, 0x00000803, 3, 4, 5, 60));
  hvd_nn_dataset d;
  assert_int_equal(hvd_nn_dataset_load_idx(&d, tmpdir, "good"), 0);
  assert_int_equal(d.n, 3);
  hvd_nn_dataset_free(&d);
  write_good_pair();
}

/* ---- broken files ---- */

static void test_truncated_pixel_data(void **state) {
  (void)state;
  uint8_t buf[256];
  write_gz(images_path, buf, make_images(buf, 0x00000803, 3, 4, 5, 53));
  expect_failure(HVD_E_INVALID, images_path, "truncated",
                 "expected 60 bytes of pixel data, got 53", NULL);
}

static void test_truncated_labels(void **state) {
  (void)state;
  uint8_t buf[256];
  size_t len = make_labels(buf, 3, -1);
  write_gz(labels_path, buf, len - 1);
  expect_failure(HVD_E_INVALID, labels_path, "truncated", "expected 3 bytes of labels, got 2",
                 NULL);
}

static void test_truncated_header(void **state) {
  (void)state;
  uint8_t buf[256];
  make_images(buf, 0x00000803, 3, 4, 5, 60);
  write_gz(images_path, buf, 10);
  expect_failure(HVD_E_INVALID, images_path, "truncated", "expected a 16-byte IDX header, got 10",
                 NULL);
  write_gz(images_path, buf, 0); /* an empty file */
  expect_failure(HVD_E_INVALID, images_path, "got 0 bytes", NULL);
}

static void test_wrong_magic(void **state) {
  (void)state;
  uint8_t buf[256];
  write_gz(images_path, buf, make_images(buf, 0x00000801, 3, 4, 5, 60));
  expect_failure(HVD_E_INVALID, images_path, "magic 0x00000801, expected 0x00000803", NULL);
  /* A labels file where the images should be is the same mistake. */
  write_gz(labels_path, buf, make_images(buf, 0x00000803, 3, 4, 5, 60));
  expect_failure(HVD_E_INVALID, labels_path, "magic 0x00000803, expected 0x00000801", NULL);
}

static void test_bad_dimensions(void **state) {
  (void)state;
  uint8_t buf[256];
  write_gz(images_path, buf, make_images(buf, 0x00000803, 0, 4, 5, 0));
  expect_failure(HVD_E_INVALID, images_path, "dimension 0 is 0", NULL);
  write_gz(images_path, buf, make_images(buf, 0x00000803, 3, 4, 0, 0));
  expect_failure(HVD_E_INVALID, images_path, "dimension 2 is 0", NULL);
  write_gz(images_path, buf, make_images(buf, 0x00000803, 1, 4, 5000, 0));
  expect_failure(HVD_E_INVALID, images_path, "dimension 2 is 5000", NULL);
  /* Sides within bounds whose product with n is too much to allocate. */
  write_gz(images_path, buf, make_images(buf, 0x00000803, 10000000, 1024, 1024, 0));
  expect_failure(HVD_E_INVALID, images_path, "more than", NULL);
}

static void test_count_mismatch(void **state) {
  (void)state;
  uint8_t buf[256];
  write_gz(labels_path, buf, make_labels(buf, 2, -1));
  expect_failure(HVD_E_INVALID, images_path, labels_path, "3 images", "2 labels", NULL);
}

static void test_label_out_of_range(void **state) {
  (void)state;
  uint8_t buf[256];
  write_gz(labels_path, buf, make_labels(buf, 3, 10));
  expect_failure(HVD_E_INVALID, labels_path, "label 10 of sample 2 is out of range", NULL);
}

static void test_garbage_not_gzip(void **state) {
  (void)state;
  uint8_t buf[256];
  for (int i = 0; i < 200; i++) buf[i] = (uint8_t)(i * 101 + 7);
  write_raw(images_path, buf, 200);
  expect_failure(HVD_E_INVALID, images_path, "magic", "not gzip-compressed", NULL);
}

static void test_corrupt_gzip(void **state) {
  (void)state;
  size_t len;
  uint8_t *gz = slurp(images_path, &len);

  /* The trailer's CRC-32 (its 8 last bytes are the CRC and the length):
   * the data decompresses fine and only the check at the end fails. */
  gz[len - 8] ^= 0x01;
  write_raw(images_path, gz, len);
  expect_failure(HVD_E_INVALID, images_path, "corrupt gzip data: incorrect data check", NULL);
  gz[len - 8] ^= 0x01;

  /* The length in the trailer. */
  gz[len - 1] ^= 0x80;
  write_raw(images_path, gz, len);
  expect_failure(HVD_E_INVALID, images_path, "corrupt gzip data: incorrect length check", NULL);
  gz[len - 1] ^= 0x80;

  /* Every byte of the compressed body in turn (the 10-byte header and the
   * trailer excluded): whatever the flip does to the stream (a bad block,
   * a different length, a CRC mismatch), the load fails, unless the bit
   * was one deflate ignores (the padding of the last byte), when the data
   * must be unchanged. */
  hvd_nn_dataset good;
  assert_int_equal(hvd_nn_dataset_load_idx(&good, tmpdir, "good"), 0);
  int failed = 0, flips = 0;
  for (size_t i = 10; i < len - 8; i++) {
    for (int bit = 0; bit < 8; bit++, flips++) {
      gz[i] ^= (uint8_t)(1u << bit);
      write_raw(images_path, gz, len);
      hvd_nn_dataset d;
      if (hvd_nn_dataset_load_idx(&d, tmpdir, "good") < 0) {
        assert_zeroed(&d);
        assert_non_null(strstr(hvd_nn_last_error(), images_path));
        failed++;
      } else {
        assert_memory_equal(d.images, good.images, 60 * sizeof(float));
        hvd_nn_dataset_free(&d);
      }
      gz[i] ^= (uint8_t)(1u << bit);
    }
  }
  assert_true(failed >= flips - 7);
  hvd_nn_dataset_free(&good);

  /* Cut short: in the body, so the data is short too; then inside the
   * trailer, where the data is complete but its CRC never arrives. */
  write_raw(images_path, gz, len / 2);
  expect_failure(HVD_E_INVALID, images_path, "truncated", "gzip stream ends early", NULL);
  write_raw(images_path, gz, len - 6);
  expect_failure(HVD_E_INVALID, images_path, "truncated", "ends before its trailer", NULL);
  free(gz);
}

static void test_trailing_bytes(void **state) {
  (void)state;
  uint8_t buf[256];
  write_gz(images_path, buf, make_images(buf, 0x00000803, 3, 4, 5, 63));
  expect_failure(HVD_E_INVALID, images_path, "trailing", "expected 60 bytes of pixel data, got 63",
                 NULL);
  /* Many, past the loader's scratch buffer. */
  uint8_t big[8192 + 32];
  memset(big, 0, sizeof big);
  size_t len = make_labels(big, 3, -1);
  write_gz(labels_path, big, len + 5000);
  expect_failure(HVD_E_INVALID, labels_path, "expected 3 bytes of labels, got 5003", NULL);
}

static void test_missing_file(void **state) {
  (void)state;
  unlink(labels_path);
  expect_failure(HVD_E_SYSTEM, labels_path, "No such file or directory", NULL);
  hvd_nn_dataset d;
  memset(&d, 0xab, sizeof d);
  assert_int_equal(hvd_nn_dataset_load_idx(&d, "/nonexistent/dir", "train"), HVD_E_SYSTEM);
  assert_zeroed(&d);
  assert_non_null(strstr(hvd_nn_last_error(), "/nonexistent/dir/train-images-idx3-ubyte.gz"));
}

static void test_bad_arguments(void **state) {
  (void)state;
  hvd_nn_dataset d;
  assert_int_equal(hvd_nn_dataset_load_idx(NULL, tmpdir, "good"), HVD_E_INVALID);
  memset(&d, 0xab, sizeof d);
  assert_int_equal(hvd_nn_dataset_load_idx(&d, NULL, "good"), HVD_E_INVALID);
  assert_zeroed(&d);
  assert_int_equal(hvd_nn_dataset_load_idx(&d, tmpdir, NULL), HVD_E_INVALID);
  assert_zeroed(&d);
}

/* ---- the real data ---- */

/* The raw bytes of a file's first len bytes after skip, read here through
 * zlib independently of the loader. */
static void read_raw_gz(const char *path, size_t skip, uint8_t *out, size_t len) {
  gzFile gz = gzopen(path, "rb");
  assert_non_null(gz);
  uint8_t header[16];
  assert_true(skip <= sizeof header);
  assert_int_equal(gzread(gz, header, (unsigned)skip), (int)skip);
  assert_int_equal(gzread(gz, out, (unsigned)len), (int)len);
  gzclose(gz);
}

static void check_split(const char *split, int n, int first_label) {
  hvd_nn_dataset d;
  int rc = hvd_nn_dataset_load_idx(&d, HVD_NN_FASHION_MNIST_DIR, split);
  if (rc != 0) fail_msg("%s: %s", split, hvd_nn_last_error());
  assert_int_equal(d.n, n);
  assert_int_equal(d.rows, 28);
  assert_int_equal(d.cols, 28);
  assert_int_equal(d.labels[0], first_label);

  int histogram[10] = {0};
  for (int i = 0; i < d.n; i++) {
    assert_in_range(d.labels[i], 0, 9);
    histogram[d.labels[i]]++;
  }
  for (int c = 0; c < 10; c++) assert_int_equal(histogram[c], n / 10);

  /* The first two images' pixels, from the raw bytes. */
  char path[PATH_LEN];
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", HVD_NN_FASHION_MNIST_DIR, split);
  uint8_t raw[2 * 28 * 28];
  read_raw_gz(path, 16, raw, sizeof raw);
  int nonzero = 0;
  for (size_t i = 0; i < sizeof raw; i++) {
    float want = ((float)raw[i] / 255.0f - 0.2860f) / 0.3530f;
    assert_float_equal(d.images[i], want, 1e-6);
    nonzero += raw[i] != 0;
  }
  assert_true(nonzero > 100); /* a real image, not zeros */
  /* The extremes: black is -0.2860 / 0.3530, white (1 - 0.2860) / 0.3530. */
  float lo = d.images[0], hi = d.images[0];
  for (size_t i = 0; i < (size_t)n * 28 * 28; i++) {
    if (d.images[i] < lo) lo = d.images[i];
    if (d.images[i] > hi) hi = d.images[i];
  }
  assert_float_equal(lo, -0.2860f / 0.3530f, 1e-6);
  assert_float_equal(hi, (1.0f - 0.2860f) / 0.3530f, 1e-6);
  hvd_nn_dataset_free(&d);
}

static void test_fashion_mnist(void **state) {
  (void)state;
  if (access(HVD_NN_FASHION_MNIST_DIR, R_OK) != 0) skip();
  check_split("train", 60000, 9);
  check_split("t10k", 10000, 9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_file_loads),
      cmocka_unit_test(test_uncompressed_file_loads),
      cmocka_unit_test(test_truncated_pixel_data),
      cmocka_unit_test(test_truncated_labels),
      cmocka_unit_test(test_truncated_header),
      cmocka_unit_test(test_wrong_magic),
      cmocka_unit_test(test_bad_dimensions),
      cmocka_unit_test(test_count_mismatch),
      cmocka_unit_test(test_label_out_of_range),
      cmocka_unit_test(test_garbage_not_gzip),
      cmocka_unit_test(test_corrupt_gzip),
      cmocka_unit_test(test_trailing_bytes),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_fashion_mnist),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
