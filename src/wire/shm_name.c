/*
 * shm_name.c -- the name of a job's shared-memory segment (shm_name.h).
 */
#include "shm_name.h"

#include <stdint.h>
#include <stdio.h>

void hvd__shm_name(const hvd_secret *key, int leader, char *out, size_t cap) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a: the secret is random already */
  for (size_t i = 0; i < sizeof key->bytes; i++) h = (h ^ key->bytes[i]) * 1099511628211ull;
  snprintf(out, cap, "/hvd-%016llx-%d", (unsigned long long)h, leader);
}
