/*
 * ops.c -- hvd-bench's five collectives: inputs, one run, and the check.
 *
 * Inputs are small integers, so every sum is exact in float32 and each
 * run's output can be compared with what the inputs make, element by
 * element, on every rank.  Allreduce runs in place (the engine's
 * zero-copy path, as for gradients), so its buffer is refilled before each
 * run; filling and checking are never timed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "coll/coll.h"

static const char *const names[OP__COUNT] = {
    [OP_ALLREDUCE] = "allreduce", [OP_BROADCAST] = "broadcast", [OP_ALLGATHER] = "allgather",
    [OP_REDUCESCATTER] = "reducescatter", [OP_ALLTOALL] = "alltoall"};

/* allgather and alltoall return a buffer hvd allocates: kept here from the
 * run to the check, which frees it. */
static void *result;

const char *bench_op_name(bench_op op) { return names[op]; }

int bench_op_parse(const char *name, bench_op *op) {
  for (int i = 0; i < OP__COUNT; i++)
    if (strcmp(name, names[i]) == 0) {
      *op = (bench_op)i;
      return 0;
    }
  return -1;
}

double bench_bus_factor(bench_op op, int n) {
  switch (op) {
    case OP_ALLREDUCE: return 2.0 * (n - 1) / n;
    case OP_BROADCAST: return 1.0;
    default: return (double)(n - 1) / n;
  }
}

/* Elements of each kind of case. */
static size_t floats(const bench_case *c) { return c->bytes / sizeof(float); }
static size_t block(const bench_case *c) { return c->bytes / (size_t)c->size; }

static float reduce_input(int rank, size_t i) { return (float)(rank + 1) + (float)(i % 5); }
static float reduce_sum(int n, size_t i) { return (float)(n * (n + 1) / 2) + (float)n * (float)(i % 5); }
static uint8_t byte_of(int a, int b, size_t i) { return (uint8_t)(a * 13 + b * 7 + (int)(i % 251)); }

/* The inputs and outputs repeat with a short period (5 floats, 251
 * bytes), so filling and checking go a tile at a time with memcpy and
 * memcmp: at memory speed, so that the untimed work between runs stays
 * short and even across ranks (a rank still filling holds up the others'
 * next timed run).  A tile is a whole number of periods. */
#define TILE_FLOATS (5u * 800u)
#define TILE_BYTES (251u * 64u)

typedef struct {
  float f[TILE_FLOATS];
} float_tile;

/* Tiles are made once per key and kept: making one costs tens of
 * microseconds, which between two runs of an 8-byte collective would be
 * most of the untimed work, uneven across ranks sharing cores, and timed
 * in whichever rank waits for it (OpenMPI's side fills what it sends). */
typedef struct {
  float_tile tile;
  int key; /* what it was made for, -1: nothing yet */
} float_memo;

static const float *floats_of(float_memo *m, int key, float (*value)(int, size_t)) {
  if (m->key != key)
    for (size_t i = 0; i < TILE_FLOATS; i++) m->tile.f[i] = value(key, i);
  m->key = key;
  return m->tile.f;
}

static const float *float_inputs(int rank) {
  static float_memo m = {.key = -1};
  return floats_of(&m, rank, reduce_input);
}

static const float *float_sums(int size) {
  static float_memo m = {.key = -1};
  return floats_of(&m, size, reduce_sum);
}

/* Byte tiles by (a, b), in a small table: an alltoall needs one per peer. */
static const uint8_t *byte_tile(int a, int b) {
  static struct {
    int a, b;
    uint8_t t[TILE_BYTES];
  } memo[16];
  static int made[16];
  int k = (a * 31 + b * 7) & 15;
  if (!made[k] || memo[k].a != a || memo[k].b != b) {
    for (size_t i = 0; i < TILE_BYTES; i++) memo[k].t[i] = byte_of(a, b, i);
    memo[k].a = a, memo[k].b = b, made[k] = 1;
  }
  return memo[k].t;
}

/* dst[0..n) = the tile repeated. */
static void tile_fill(void *dst, size_t n, const void *tile, size_t tile_len) {
  for (size_t at = 0; at < n; at += tile_len)
    memcpy((char *)dst + at, tile, n - at < tile_len ? n - at : tile_len);
}

/* Whether buf[0..n) is the tile repeated. */
static int tile_equal(const void *buf, size_t n, const void *tile, size_t tile_len) {
  for (size_t at = 0; at < n; at += tile_len)
    if (memcmp((const char *)buf + at, tile, n - at < tile_len ? n - at : tile_len)) return 0;
  return 1;
}

void bench_fill(const bench_case *c) {
  switch (c->op) {
    case OP_ALLREDUCE:
    case OP_REDUCESCATTER:
      tile_fill(c->op == OP_ALLREDUCE ? c->out : c->in, floats(c) * sizeof(float),
                float_inputs(c->rank), sizeof(float_tile));
      break;
    case OP_BROADCAST:
      if (c->rank == 0) {
        tile_fill(c->out, c->bytes, byte_tile(0, 1), TILE_BYTES);
      } else {
        memset(c->out, 0, c->bytes);
      }
      break;
    case OP_ALLGATHER:
      tile_fill(c->in, block(c), byte_tile(c->rank, 0), TILE_BYTES);
      break;
    case OP_ALLTOALL:
      for (int d = 0; d < c->size; d++) {
        tile_fill((uint8_t *)c->in + (size_t)d * block(c), block(c), byte_tile(c->rank, d),
                  TILE_BYTES);
      }
      break;
    default: break;
  }
}

/* The allreduce's name for this run: with --names K, K names in turn, as
 * a loop reducing a loss and its metrics calls them. */
static const char *allreduce_name(const bench_case *c) {
  static const char *const turns[BENCH_NAMES_MAX] = {
      "bench.allreduce",   "bench.allreduce.2", "bench.allreduce.3", "bench.allreduce.4",
      "bench.allreduce.5", "bench.allreduce.6", "bench.allreduce.7", "bench.allreduce.8"};
  static unsigned turn;
  return c->names > 1 ? turns[turn++ % (unsigned)c->names] : turns[0];
}

static int run_public(const bench_case *c, size_t *counts) {
  size_t n = (size_t)c->size;
  switch (c->op) {
    case OP_ALLREDUCE:
      return hvd_allreduce(c->out, c->out, floats(c), HVD_FLOAT32, HVD_SUM, allreduce_name(c));
    case OP_BROADCAST: return hvd_broadcast(c->out, c->bytes, HVD_UINT8, 0, "bench.broadcast");
    case OP_REDUCESCATTER:
      return hvd_reducescatter(c->in, c->out, floats(c), HVD_FLOAT32, HVD_SUM,
                               "bench.reducescatter");
    case OP_ALLGATHER:
      return hvd_allgather(c->in, block(c), HVD_UINT8, &result, counts, "bench.allgather");
    case OP_ALLTOALL:
      for (size_t d = 0; d < n; d++) counts[d] = block(c);
      return hvd_alltoall(c->in, counts, HVD_UINT8, &result, counts + n, "bench.alltoall");
    default: return HVD_E_INVALID;
  }
}

static int run_direct(const bench_case *c, size_t *counts) {
  size_t n = (size_t)c->size;
  switch (c->op) {
    case OP_ALLREDUCE:
      return hvd__allreduce(c->direct, c->out, c->out, floats(c), HVD_FLOAT32, HVD_SUM);
    case OP_BROADCAST: return hvd__broadcast(c->direct, c->out, c->bytes, 0);
    case OP_REDUCESCATTER:
      return hvd__reducescatter(c->direct, c->in, c->out, floats(c), HVD_FLOAT32, HVD_SUM);
    case OP_ALLGATHER: return hvd__allgather(c->direct, c->in, block(c), 1, &result, counts);
    case OP_ALLTOALL:
      for (size_t d = 0; d < n; d++) counts[d] = block(c);
      return hvd__alltoall(c->direct, c->in, counts, 1, &result, counts + n);
    default: return HVD_E_INVALID;
  }
}

int bench_run(const bench_case *c) {
  size_t stack[64], *counts = c->size <= 32 ? stack : malloc(2 * (size_t)c->size * sizeof *counts);
  if (!counts) return HVD_E_NOMEM;
  int rc = c->direct ? run_direct(c, counts) : run_public(c, counts);
  if (counts != stack) free(counts);
  return rc;
}

/* The first element of a float output that is not what the inputs make:
 * a tiled comparison first, element by element only to say which. */
static int check_floats(const float *out, size_t first, size_t n, int size, char *why, size_t len) {
  if (first % 5 == 0 && tile_equal(out, n * sizeof *out, float_sums(size), sizeof(float_tile)))
    return 0;
  for (size_t i = 0; i < n; i++) {
    float want = reduce_sum(size, first + i);
    if (out[i] != want) {
      snprintf(why, len, "element %zu is %g, expected %g", first + i, (double)out[i], (double)want);
      return -1;
    }
  }
  return 0;
}

/* The same for a byte output made of `blocks` blocks of `len` bytes,
 * block b holding byte_of(a(b), b'(b), i). */
static int check_blocks(const uint8_t *out, int blocks, size_t blen, int rank, int gathered,
                        char *why, size_t len) {
  int same = 1;
  for (int b = 0; same && b < blocks; b++)
    same = tile_equal(out + (size_t)b * blen, blen, byte_tile(b, gathered ? 0 : rank), TILE_BYTES);
  if (same) return 0;
  for (int b = 0; b < blocks; b++)
    for (size_t i = 0; i < blen; i++) {
      uint8_t want = gathered ? byte_of(b, 0, i) : byte_of(b, rank, i);
      uint8_t got = out[(size_t)b * blen + i];
      if (got != want) {
        snprintf(why, len, "byte %zu of rank %d's block is %u, expected %u", i, b, got, want);
        return -1;
      }
    }
  return 0;
}

int bench_check(const bench_case *c, char *why, size_t len) {
  int rc = 0;
  switch (c->op) {
    case OP_ALLREDUCE: rc = check_floats(c->out, 0, floats(c), c->size, why, len); break;
    case OP_REDUCESCATTER: {
      size_t off = hvd__split_offset(floats(c), c->size, c->rank);
      rc = check_floats(c->out, off, hvd__split_count(floats(c), c->size, c->rank), c->size, why,
                        len);
      break;
    }
    case OP_BROADCAST: rc = check_blocks(c->out, 1, c->bytes, 1, 0, why, len); break;
    case OP_ALLGATHER: rc = check_blocks(result, c->size, block(c), c->rank, 1, why, len); break;
    case OP_ALLTOALL: rc = check_blocks(result, c->size, block(c), c->rank, 0, why, len); break;
    default: break;
  }
  free(result);
  result = NULL;
  return rc;
}
