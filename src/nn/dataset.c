/*
 * dataset.c -- Fashion-MNIST (and MNIST) IDX files, gzip-compressed.
 *
 * An IDX file is a big-endian u32 magic (0x00000803: u8 data, 3 dims;
 * 0x00000801: u8 data, 1 dim), one big-endian u32 per dimension, then the
 * data, row-major.  The files come from outside the program, so every
 * number in them is checked before it sizes anything, and the data must be
 * exactly as long as the header says: a truncated download and a file with
 * something appended both fail, naming the file and the two lengths.
 *
 * zlib's gzread reads an uncompressed file as it is, which we accept; a
 * file that is neither gzip nor IDX fails on the magic.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nn_int.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_DIMS 3

/* Bounds that no real data set comes near but that keep a corrupt header
 * from asking for terabytes: n fits an int, a sample is at most 1024 x
 * 1024, the images at most 2^30 pixels (4 GiB as floats). */
#define MAX_SAMPLES 10000000u
#define MAX_SIDE 1024u
#define MAX_PIXELS (1u << 30)

#define NUM_CLASSES 10
#define PIXEL_MEAN 0.2860f
#define PIXEL_STD 0.3530f

#define PATH_LEN 4096
#define READ_CHUNK (1u << 20) /* gzread takes an unsigned int length */

/* The error of a failed gzread: a system error, or the compressed data is
 * corrupt (a bad block, a CRC or length mismatch in the trailer). */
static int gz_failure(gzFile gz, const char *path) {
  int zerr;
  const char *msg = gzerror(gz, &zerr);
  if (zerr == Z_ERRNO) return hvd_nn__err_sys(HVD_E_SYSTEM, errno, "%s: read failed", path);
  /* zlib's message starts with the path, which ours already has. */
  size_t n = strlen(path);
  if (strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0) msg += n + 2;
  return hvd_nn__err(HVD_E_INVALID, "%s: corrupt gzip data: %s", path, msg);
}

/* At the end of the file, whether the gzip stream ended early: gzread
 * reports that as a plain end of file, with the error kept for gzerror. */
static const char *gz_cut_note(gzFile gz) {
  int zerr;
  gzerror(gz, &zerr);
  return zerr == Z_BUF_ERROR ? " (the gzip stream ends early)" : "";
}

/* Reads up to len bytes; *got is how many came before the end of the file. */
static int gz_read_upto(gzFile gz, const char *path, uint8_t *buf, size_t len, size_t *got) {
  *got = 0;
  while (*got < len) {
    size_t want = len - *got;
    if (want > READ_CHUNK) want = READ_CHUNK;
    int n = gzread(gz, buf + *got, (unsigned)want);
    if (n < 0) return gz_failure(gz, path);
    if (n == 0) break;
    *got += (size_t)n;
  }
  return 0;
}

/* Opens path for reading, through gzip if it is compressed. */
static int idx_open(const char *path, gzFile *gz) {
  errno = 0;
  *gz = gzopen(path, "rb");
  if (*gz == NULL) {
    /* gzopen leaves errno 0 when zlib itself ran out of memory. */
    if (errno == 0) return hvd_nn__err(HVD_E_NOMEM, "%s: out of memory opening it", path);
    return hvd_nn__err_sys(HVD_E_SYSTEM, errno, "cannot open %s", path);
  }
  return 0;
}

/* Reads and checks the header: magic, then ndims big-endian u32 dimensions
 * into dims.  The first dimension is the number of samples; the others
 * are the sides of a sample. */
static int idx_read_header(gzFile gz, const char *path, uint32_t magic, int ndims,
                           uint32_t *dims) {
  uint8_t raw[4 * (1 + IDX_MAX_DIMS)];
  size_t len = 4 * (size_t)(1 + ndims), got;
  HVD_NN__CHECK(gz_read_upto(gz, path, raw, len, &got));
  if (got < len)
    return hvd_nn__err(HVD_E_INVALID,
                       "%s: truncated: expected a %zu-byte IDX header, got %zu bytes%s", path,
                       len, got, gz_cut_note(gz));

  uint32_t words[1 + IDX_MAX_DIMS];
  for (int i = 0; i <= ndims; i++)
    words[i] = (uint32_t)raw[4 * i] << 24 | (uint32_t)raw[4 * i + 1] << 16 |
               (uint32_t)raw[4 * i + 2] << 8 | (uint32_t)raw[4 * i + 3];
  if (words[0] != magic)
    return hvd_nn__err(HVD_E_INVALID,
                       "%s: not an IDX file of %d dimension%s: magic 0x%08x, expected 0x%08x%s",
                       path, ndims, ndims == 1 ? "" : "s", (unsigned)words[0], (unsigned)magic,
                       gzdirect(gz) ? " (and it is not gzip-compressed)" : "");

  for (int i = 0; i < ndims; i++) {
    dims[i] = words[1 + i];
    uint32_t max = i == 0 ? MAX_SAMPLES : MAX_SIDE;
    if (dims[i] == 0 || dims[i] > max)
      return hvd_nn__err(HVD_E_INVALID, "%s: dimension %d is %u, expected 1 to %u", path, i,
                         (unsigned)dims[i], (unsigned)max);
  }
  return 0;
}

/* Reads the len bytes of data after the header and checks that the file
 * ends right there.  Reading to the end also makes zlib check the gzip
 * trailer's CRC, which it only does once it gets there. */
static int idx_read_data(gzFile gz, const char *path, const char *what, uint8_t *buf,
                         size_t len) {
  size_t got, extra;
  HVD_NN__CHECK(gz_read_upto(gz, path, buf, len, &got));
  if (got < len)
    return hvd_nn__err(HVD_E_INVALID, "%s: truncated: expected %zu bytes of %s, got %zu%s", path,
                       len, what, got, gz_cut_note(gz));

  uint8_t scratch[4096];
  do {
    HVD_NN__CHECK(gz_read_upto(gz, path, scratch, sizeof scratch, &extra));
    got += extra;
  } while (extra == sizeof scratch);
  if (got > len)
    return hvd_nn__err(HVD_E_INVALID, "%s: trailing bytes: expected %zu bytes of %s, got %zu", path,
                       len, what, got);
  if (*gz_cut_note(gz) != '\0')
    return hvd_nn__err(HVD_E_INVALID, "%s: truncated: the gzip stream ends before its trailer",
                       path);
  return 0;
}

/* Loads one IDX file: its dimensions into dims and its data into a new
 * buffer at *data (*len bytes).  Frees everything on failure. */
static int idx_load(const char *path, uint32_t magic, int ndims, const char *what,
                    uint32_t *dims, uint8_t **data, size_t *len) {
  gzFile gz;
  *data = NULL;
  HVD_NN__CHECK(idx_open(path, &gz));

  int rc = idx_read_header(gz, path, magic, ndims, dims);
  if (rc == 0) {
    /* Each side is at most MAX_SIDE, so the product of the sides cannot
     * overflow; bounding it by MAX_PIXELS / n keeps the total in range. */
    size_t per_sample = 1;
    for (int i = 1; i < ndims; i++) per_sample *= dims[i];
    if (per_sample > MAX_PIXELS / dims[0]) {
      rc = hvd_nn__err(HVD_E_INVALID, "%s: %u samples of %zu values each is more than %u values",
                       path, (unsigned)dims[0], per_sample, MAX_PIXELS);
    } else {
      *len = (size_t)dims[0] * per_sample;
      *data = malloc(*len);
      if (*data == NULL)
        rc = hvd_nn__err(HVD_E_NOMEM, "%s: out of memory for %zu bytes of %s", path, *len, what);
    }
  }
  if (rc == 0) rc = idx_read_data(gz, path, what, *data, *len);

  gzclose(gz);
  if (rc < 0) {
    free(*data);
    *data = NULL;
  }
  return rc;
}

static int build_path(char *out, const char *dir, const char *split, const char *kind) {
  int n = snprintf(out, PATH_LEN, "%s/%s-%s-ubyte.gz", dir, split, kind);
  if (n < 0 || n >= PATH_LEN)
    return hvd_nn__err(HVD_E_INVALID, "dataset path %s/%s-%s-ubyte.gz is too long", dir, split,
                       kind);
  return 0;
}

/* Scales the images to [0, 1] and normalises them, and checks the labels,
 * into the dataset's own arrays. */
static int fill_dataset(hvd_nn_dataset *d, const char *labels_path, const uint8_t *pixels,
                        size_t npixels, const uint8_t *labels) {
  d->images = malloc(npixels * sizeof *d->images);
  d->labels = malloc((size_t)d->n * sizeof *d->labels);
  if (d->images == NULL || d->labels == NULL)
    return hvd_nn__err(HVD_E_NOMEM, "out of memory for %d samples", d->n);

  for (int i = 0; i < d->n; i++) {
    if (labels[i] >= NUM_CLASSES)
      return hvd_nn__err(HVD_E_INVALID, "%s: label %d of sample %d is out of range [0, %d)",
                         labels_path, labels[i], i, NUM_CLASSES);
    d->labels[i] = labels[i];
  }
  for (size_t i = 0; i < npixels; i++)
    d->images[i] = ((float)pixels[i] / 255.0f - PIXEL_MEAN) / PIXEL_STD;
  return 0;
}

int hvd_nn_dataset_load_idx(hvd_nn_dataset *d, const char *dir, const char *split) {
  if (d == NULL) return hvd_nn__err(HVD_E_INVALID, "hvd_nn_dataset_load_idx: dataset is NULL");
  memset(d, 0, sizeof *d);
  if (dir == NULL || split == NULL)
    return hvd_nn__err(HVD_E_INVALID, "hvd_nn_dataset_load_idx: dir or split is NULL");

  char images_path[PATH_LEN], labels_path[PATH_LEN];
  HVD_NN__CHECK(build_path(images_path, dir, split, "images-idx3"));
  HVD_NN__CHECK(build_path(labels_path, dir, split, "labels-idx1"));

  uint32_t image_dims[3] = {0}, label_dims[1] = {0};
  uint8_t *pixels = NULL, *labels = NULL;
  size_t npixels = 0, nlabels = 0;
  int rc = idx_load(images_path, IDX_MAGIC_IMAGES, 3, "pixel data", image_dims, &pixels, &npixels);
  if (rc == 0)
    rc = idx_load(labels_path, IDX_MAGIC_LABELS, 1, "labels", label_dims, &labels, &nlabels);
  if (rc == 0 && image_dims[0] != label_dims[0])
    rc = hvd_nn__err(HVD_E_INVALID, "%s has %u images but %s has %u labels", images_path,
                     (unsigned)image_dims[0], labels_path, (unsigned)label_dims[0]);
  if (rc == 0) {
    d->n = (int)image_dims[0];
    d->rows = (int)image_dims[1];
    d->cols = (int)image_dims[2];
    rc = fill_dataset(d, labels_path, pixels, npixels, labels);
  }

  free(pixels);
  free(labels);
  if (rc < 0) hvd_nn_dataset_free(d);
  return rc;
}

void hvd_nn_dataset_free(hvd_nn_dataset *d) {
  if (d == NULL) return;
  free(d->images);
  free(d->labels);
  memset(d, 0, sizeof *d);
}
