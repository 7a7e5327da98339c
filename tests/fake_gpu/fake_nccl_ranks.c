/*
 * fake_nccl_ranks.c -- the ranks of a fake NCCL communicator meeting in
 * shared memory (fake_nccl_ranks.h).
 *
 * The segment holds a barrier and one 1 MiB slot per rank.  Every
 * collective goes a chunk at a time: the ranks write their part of the
 * chunk into their slots, meet at the barrier, read what they need, and
 * meet again before the slots are reused.  Reductions add the slots in
 * rank order, so every rank computes the same bits.
 */
#include "fake_nccl_ranks.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLOT ((size_t)1 << 20)
#define WAIT_S 60

typedef struct {
  atomic_uint arrived, gen;
} header;

struct fake_ranks {
  int n, rank;
  size_t bytes;
  header *hdr;
  char *slots;
};

size_t fake_type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 0 once every rank has arrived; -1 after WAIT_S seconds. */
static int barrier(fake_ranks *g) {
  unsigned gen = atomic_load(&g->hdr->gen);
  if (atomic_fetch_add(&g->hdr->arrived, 1) + 1 == (unsigned)g->n) {
    atomic_store(&g->hdr->arrived, 0);
    atomic_fetch_add(&g->hdr->gen, 1);
    return 0;
  }
  double give_up = now_s() + WAIT_S;
  while (atomic_load(&g->hdr->gen) == gen) {
    if (now_s() > give_up) return -1;
    sched_yield();
  }
  return 0;
}

static char *slot(const fake_ranks *g, int r) { return g->slots + (size_t)r * SLOT; }

/* Opens `name` once rank 0 has made it at its full size. */
static int open_made(const char *name, size_t bytes) {
  double give_up = now_s() + WAIT_S;
  for (;;) {
    int fd = shm_open(name, O_RDWR, 0600);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size >= bytes) return fd;
    if (fd >= 0) close(fd);
    if (now_s() > give_up) return -1;
    sched_yield();
  }
}

fake_ranks *fake_ranks_join(const char *name, int n, int rank) {
  fake_ranks *g = calloc(1, sizeof *g);
  if (!g || n < 1 || rank < 0 || rank >= n) return free(g), NULL;
  g->n = n, g->rank = rank;
  g->bytes = 64 + (size_t)n * SLOT;
  int fd = rank == 0 ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600) : open_made(name, g->bytes);
  if (fd >= 0 && rank == 0 && ftruncate(fd, (off_t)g->bytes) != 0) close(fd), fd = -1;
  void *p = fd >= 0 ? mmap(NULL, g->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (p == MAP_FAILED) {
    if (rank == 0) shm_unlink(name);
    return free(g), NULL;
  }
  g->hdr = p;
  g->slots = (char *)p + 64;
  int rc = barrier(g); /* every rank has it mapped: the name can go */
  if (rank == 0) shm_unlink(name);
  if (rc != 0) return fake_ranks_leave(g), NULL;
  return g;
}

void fake_ranks_leave(fake_ranks *g) {
  if (g && g->hdr) munmap(g->hdr, g->bytes);
  free(g);
}

/* ---- reducing: acc (op)= x, element by element ---- */

/* Integers wrap (unsigned arithmetic, U), as NCCL's and hvd's do. */
#define COMBINE(T, U)                                                                     \
  do {                                                                                    \
    T *a = acc;                                                                           \
    const T *b = x;                                                                       \
    for (size_t i = 0; i < n; i++) {                                                      \
      if (red.premul) a[i] = (T)(a[i] + (T)(b[i] * (T)red.scalar));                        \
      else if (red.op == ncclSum || red.op == ncclAvg) a[i] = (T)((U)a[i] + (U)b[i]);      \
      else if (red.op == ncclProd) a[i] = (T)((U)a[i] * (U)b[i]);                          \
      else if (red.op == ncclMax) a[i] = a[i] > b[i] ? a[i] : b[i];                        \
      else a[i] = a[i] < b[i] ? a[i] : b[i];                                               \
    }                                                                                     \
  } while (0)

static int combine(void *acc, const void *x, size_t n, ncclDataType_t t, fake_red red) {
  switch (t) {
    case ncclInt8: COMBINE(int8_t, uint8_t); return 0;
    case ncclUint8: COMBINE(uint8_t, uint8_t); return 0;
    case ncclInt32: COMBINE(int32_t, uint32_t); return 0;
    case ncclInt64: COMBINE(int64_t, uint64_t); return 0;
    case ncclFloat16: COMBINE(half, half); return 0;
    case ncclFloat32: COMBINE(float, float); return 0;
    case ncclFloat64: COMBINE(double, double); return 0;
    default: return -1;
  }
}

/* The first contribution as the reduction starts it: itself, or times
 * the scalar; and an average's division at the end. */
#define SCALE(T, F)                                                          \
  do {                                                                       \
    T *a = acc;                                                              \
    for (size_t i = 0; i < n; i++) a[i] = (T)(a[i] F);                       \
  } while (0)

static void first(void *acc, size_t n, ncclDataType_t t, fake_red red) {
  if (!red.premul) return;
  if (t == ncclFloat16) SCALE(half, *(half)red.scalar);
  else if (t == ncclFloat32) SCALE(float, *(float)red.scalar);
  else if (t == ncclFloat64) SCALE(double, *red.scalar);
}

static void average(void *acc, size_t n, ncclDataType_t t, int ranks) {
  if (t == ncclFloat32) SCALE(float, / (float)ranks);
  else if (t == ncclFloat64) SCALE(double, / (double)ranks);
  else if (t == ncclInt32) SCALE(int32_t, / ranks);
  else if (t == ncclInt64) SCALE(int64_t, / ranks);
}

/* Every rank's slot, reduced in rank order into out (n elements). */
static ncclResult_t reduce_slots(const fake_ranks *g, void *out, size_t n, ncclDataType_t t,
                                 fake_red red) {
  size_t es = fake_type_size(t);
  memmove(out, slot(g, 0), n * es);
  first(out, n, t, red);
  for (int r = 1; r < g->n; r++)
    if (combine(out, slot(g, r), n, t, red) != 0) return ncclInvalidArgument;
  if (!red.premul && red.op == ncclAvg) average(out, n, t, g->n);
  return ncclSuccess;
}

/* ---- the collectives, a slot's worth at a time ---- */

static size_t chunk_elems(ncclDataType_t t) { return SLOT / fake_type_size(t); }

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* This rank's n elements at src into its slot, then a barrier: every
 * rank's are there. */
static int post(fake_ranks *g, const void *src, size_t bytes) {
  memcpy(slot(g, g->rank), src, bytes);
  return barrier(g);
}

/* One round of a reduction: every rank posts its n elements; the slots
 * are reduced into out (NULL: not this rank's part); a barrier before
 * the slots are written again. */
static ncclResult_t reduce_round(fake_ranks *g, const char *src, char *out, size_t n,
                                 ncclDataType_t t, fake_red red) {
  if (post(g, src, n * fake_type_size(t))) return ncclSystemError;
  ncclResult_t r = out ? reduce_slots(g, out, n, t, red) : ncclSuccess;
  if (barrier(g)) return ncclSystemError;
  return r;
}

ncclResult_t fake_ranks_allreduce(fake_ranks *g, const void *send, void *recv, size_t count,
                                  ncclDataType_t t, fake_red red) {
  size_t es = fake_type_size(t);
  if (!es) return ncclInvalidArgument;
  ncclResult_t r = ncclSuccess;
  for (size_t off = 0; r == ncclSuccess && off < count; off += chunk_elems(t))
    r = reduce_round(g, (const char *)send + off * es, (char *)recv + off * es,
                     min_size(chunk_elems(t), count - off), t, red);
  return r;
}

ncclResult_t fake_ranks_reduce_scatter(fake_ranks *g, const void *send, void *recv,
                                       size_t recvcount, ncclDataType_t t, fake_red red) {
  size_t es = fake_type_size(t);
  if (!es) return ncclInvalidArgument;
  ncclResult_t r = ncclSuccess;
  for (int owner = 0; owner < g->n; owner++) {
    const char *part = (const char *)send + (size_t)owner * recvcount * es;
    for (size_t off = 0; r == ncclSuccess && off < recvcount; off += chunk_elems(t))
      r = reduce_round(g, part + off * es, owner == g->rank ? (char *)recv + off * es : NULL,
                       min_size(chunk_elems(t), recvcount - off), t, red);
  }
  return r;
}

ncclResult_t fake_ranks_allgather(fake_ranks *g, const void *send, void *recv, size_t count,
                                  ncclDataType_t t) {
  size_t es = fake_type_size(t);
  if (!es) return ncclInvalidArgument;
  for (size_t off = 0; off < count; off += chunk_elems(t)) {
    size_t n = min_size(chunk_elems(t), count - off);
    if (post(g, (const char *)send + off * es, n * es)) return ncclSystemError;
    for (int r = 0; r < g->n; r++)
      memcpy((char *)recv + ((size_t)r * count + off) * es, slot(g, r), n * es);
    if (barrier(g)) return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t fake_ranks_broadcast(fake_ranks *g, const void *send, void *recv, size_t count,
                                  ncclDataType_t t, int root) {
  size_t es = fake_type_size(t);
  if (!es || root < 0 || root >= g->n) return ncclInvalidArgument;
  for (size_t off = 0; off < count; off += chunk_elems(t)) {
    size_t n = min_size(chunk_elems(t), count - off);
    if (g->rank == root) memcpy(slot(g, root), (const char *)send + off * es, n * es);
    if (barrier(g)) return ncclSystemError;
    memcpy((char *)recv + off * es, slot(g, root), n * es);
    if (barrier(g)) return ncclSystemError;
  }
  return ncclSuccess;
}

/* Every rank's sbytes, as a matrix: all[s * n + d] is what s sends d. */
static int share_sizes(fake_ranks *g, const size_t *sbytes, size_t *all) {
  size_t row = (size_t)g->n * sizeof *sbytes;
  if (post(g, sbytes, row)) return -1;
  for (int r = 0; r < g->n; r++) memcpy(all + (size_t)r * (size_t)g->n, slot(g, r), row);
  return barrier(g);
}

static size_t chunks_of(size_t bytes) { return (bytes + SLOT - 1) / SLOT; }

ncclResult_t fake_ranks_exchange(fake_ranks *g, const void *const *send, const size_t *sbytes,
                                 void *const *recv, const size_t *rbytes) {
  size_t n = (size_t)g->n, me = (size_t)g->rank;
  size_t *all = malloc(n * n * sizeof *all);
  if (!all || share_sizes(g, sbytes, all)) return free(all), ncclSystemError;
  /* Round k: every rank s sends to s + k and receives from s - k, in
   * as many steps as the largest of those messages needs. */
  for (size_t k = 0; k < n; k++) {
    size_t to = (me + k) % n, from = (me + n - k) % n, steps = 0;
    for (size_t s = 0; s < n; s++)
      if (chunks_of(all[s * n + (s + k) % n]) > steps) steps = chunks_of(all[s * n + (s + k) % n]);
    if (all[from * n + me] != rbytes[from]) return free(all), ncclInvalidUsage;
    for (size_t j = 0; j < steps; j++) {
      size_t out = sbytes[to] > j * SLOT ? min_size(SLOT, sbytes[to] - j * SLOT) : 0;
      size_t in = rbytes[from] > j * SLOT ? min_size(SLOT, rbytes[from] - j * SLOT) : 0;
      const char *src = out ? (const char *)send[to] + j * SLOT : "";
      if (post(g, src, out)) return free(all), ncclSystemError;
      if (in) memcpy((char *)recv[from] + j * SLOT, slot(g, (int)from), in);
      if (barrier(g)) return free(all), ncclSystemError;
    }
  }
  free(all);
  return ncclSuccess;
}
