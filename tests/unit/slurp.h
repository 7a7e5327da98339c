/*
 * slurp.h -- reads a whole file for the unit tests that damage files on
 * purpose (checkpoints, data sets).  Include after <cmocka.h>.
 */
#ifndef HVD_TESTS_UNIT_SLURP_H
#define HVD_TESTS_UNIT_SLURP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The bytes of path in a new buffer (the caller frees it); a missing or
 * empty file fails the test. */
static inline uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size > 0);
  rewind(f);
  uint8_t *buf = malloc((size_t)size);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *len = (size_t)size;
  return buf;
}

#endif
