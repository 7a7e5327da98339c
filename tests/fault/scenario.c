/*
 * scenario.c -- what every injected fault is tried against (tests/fault).
 *
 * Phase 1: hvd_init, a collective of each kind (allreduce, allgather,
 * broadcast, alltoall, reducescatter, barrier, grouped allreduce), eight
 * asynchronous allreduces the engine fuses, a process set with a
 * collective over it, hvd_shutdown.  Phase 2, after every rank has ended
 * phase 1 (a barrier of files in HVD_FAULT_SYNC_DIR, since hvd may be
 * broken by then): hvd_init, an allreduce, hvd_shutdown again in the same
 * process.  Every step runs whatever happened before it.
 *
 * Each step prints "step NAME: ok" or "step NAME: error HVD_E_X: message".
 * What is not allowed, printed as "VIOLATION ..." with exit status 3: an
 * error without a message, a success with wrong results, and a phase 2
 * that fails although no fault fired during it ("fault: phase 2 clean"
 * says so; the sweep checks it across ranks, since a fault in one rank
 * may fail the others' phase 2).  A crash, a leak or a hang is the
 * sweep's to see.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hvd.h"

#define BARRIER_MS 120000

/* From tests/fault/fault.c, in libhvd.so built with the faults. */
unsigned long hvd__fault_fired(void) __attribute__((weak));

static int violations;
static int rank, size; /* of the job, from hvdrun's environment */

static unsigned long fired(void) { return hvd__fault_fired ? hvd__fault_fired() : 0; }

static void violation(const char *step, const char *what) {
  printf("VIOLATION %s: %s\n", step, what);
  violations++;
}

/* Reports a step: rc from hvd, ok whether its results were right. */
static int report(const char *step, int rc, int ok) {
  if (rc < 0) {
    const char *msg = hvd_last_error();
    printf("step %s: error %s: %s\n", step, hvd_err_name(rc), msg);
    if (!msg[0] || strstr(msg, "(null)")) violation(step, "an error without a message");
  } else if (!ok) {
    violation(step, "succeeded with wrong results");
  } else {
    printf("step %s: ok\n", step);
  }
  fflush(stdout);
  return rc < 0 ? rc : 0;
}

/* ---- the collectives, each against values computed here ---- */

static float val(int r, size_t i) { return (float)(r + 1) + (float)(i % 97); }

static int allreduce_step(const char *name, int process_set) {
  enum { N = 1000 };
  static float buf[N];
  for (size_t i = 0; i < N; i++) buf[i] = val(rank, i);
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = process_set;
  int rc = hvd_wait(hvd_allreduce_async_opts(buf, buf, N, HVD_FLOAT32, HVD_SUM, name, &o));
  int ok = 1;
  for (size_t i = 0; rc == 0 && i < N; i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += val(r, i);
    ok &= buf[i] == want;
  }
  return report(name, rc, ok);
}

static void allgather_step(void) {
  int32_t mine[8];
  size_t counts[64];
  void *out = NULL;
  for (int i = 0; i <= rank && i < 8; i++) mine[i] = rank * 10 + i;
  int rc = hvd_allgather(mine, (size_t)(rank < 8 ? rank + 1 : 8), HVD_INT32, &out, counts,
                         "allgather");
  int ok = 1;
  const int32_t *got = out;
  for (int r = 0, k = 0; rc == 0 && r < size; r++) {
    ok &= counts[r] == (size_t)(r < 8 ? r + 1 : 8);
    for (int i = 0; i <= r && i < 8; i++) ok &= got[k++] == r * 10 + i;
  }
  free(out);
  report("allgather", rc, ok);
}

static void broadcast_step(void) {
  double buf[100];
  for (int i = 0; i < 100; i++) buf[i] = rank == size - 1 ? i * 0.5 : -1;
  int rc = hvd_broadcast(buf, 100, HVD_FLOAT64, size - 1, "broadcast");
  int ok = 1;
  for (int i = 0; rc == 0 && i < 100; i++) ok &= buf[i] == i * 0.5;
  report("broadcast", rc, ok);
}

static void alltoall_step(void) {
  int32_t send[64 * 8];
  size_t sendcounts[64], recvcounts[64];
  void *out = NULL;
  size_t k = 0;
  for (int d = 0; d < size; d++) {
    sendcounts[d] = (size_t)(d % 3 + 1);
    for (size_t i = 0; i < sendcounts[d]; i++) send[k++] = rank * 100 + d;
  }
  int rc = hvd_alltoall(send, sendcounts, HVD_INT32, &out, recvcounts, "alltoall");
  int ok = 1;
  const int32_t *got = out;
  for (int r = 0, j = 0; rc == 0 && r < size; r++) {
    ok &= recvcounts[r] == (size_t)(rank % 3 + 1);
    for (size_t i = 0; i < recvcounts[r]; i++) ok &= got[j++] == r * 100 + rank;
  }
  free(out);
  report("alltoall", rc, ok);
}

static void reducescatter_step(void) {
  enum { PER = 10 };
  float send[PER * 64], recv[PER + 1];
  size_t n = (size_t)PER * (size_t)size, first = 0;
  for (size_t i = 0; i < n; i++) send[i] = val(rank, i);
  int rc = hvd_reducescatter(send, recv, n, HVD_FLOAT32, HVD_SUM, "reducescatter");
  for (int r = 0; r < rank; r++) first += hvd_reducescatter_count(n, r);
  int ok = 1;
  for (size_t i = 0; rc == 0 && i < hvd_reducescatter_count(n, rank); i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += val(r, first + i);
    ok &= recv[i] == want;
  }
  report("reducescatter", rc, ok);
}

static void grouped_step(void) {
  static float a[10], b[300], c[1];
  const void *sends[3] = {a, b, c};
  void *recvs[3] = {a, b, c};
  size_t counts[3] = {10, 300, 1};
  for (int t = 0; t < 3; t++)
    for (size_t i = 0; i < counts[t]; i++) ((float *)recvs[t])[i] = val(rank, i + (size_t)t);
  int rc = hvd_grouped_allreduce(sends, recvs, counts, 3, HVD_FLOAT32, HVD_SUM, "grouped");
  int ok = 1;
  for (int t = 0; rc == 0 && t < 3; t++)
    for (size_t i = 0; i < counts[t]; i++) {
      float want = 0;
      for (int r = 0; r < size; r++) want += val(r, i + (size_t)t);
      ok &= ((float *)recvs[t])[i] == want;
    }
  report("grouped_allreduce", rc, ok);
}

/* Eight small allreduces in flight at once: the engine fuses them. */
static void fusion_step(void) {
  enum { T = 8, N = 64 };
  static float buf[T][N];
  hvd_handle h[T];
  char name[32];
  for (int t = 0; t < T; t++) {
    for (size_t i = 0; i < N; i++) buf[t][i] = val(rank, i + (size_t)t);
    snprintf(name, sizeof name, "fused.%d", t);
    h[t] = hvd_allreduce_async(buf[t], buf[t], N, HVD_FLOAT32, HVD_SUM, name);
  }
  int rc = 0, ok = 1;
  for (int t = T - 1; t >= 0; t--) { /* waited in another order than enqueued */
    int r = h[t] < 0 ? (int)h[t] : hvd_wait(h[t]);
    if (r < 0 && rc == 0) rc = r;
    for (size_t i = 0; r == 0 && i < N; i++) {
      float want = 0;
      for (int q = 0; q < size; q++) want += val(q, i + (size_t)t);
      ok &= buf[t][i] == want;
    }
  }
  report("fusion", rc, ok);
}

/* A process set of every rank, listed backwards; a collective over it. */
static void process_set_step(void) {
  int ranks[64];
  for (int i = 0; i < size && i < 64; i++) ranks[i] = size - 1 - i;
  int id = hvd_add_process_set(ranks, size < 64 ? size : 64);
  if (report("add_process_set", id, 1) < 0) return;
  allreduce_step("process_set_allreduce", id);
  report("remove_process_set", hvd_remove_process_set(id), 1);
}

/* ---- between the phases ---- */

/* Waits until every rank has written its file in HVD_FAULT_SYNC_DIR. */
static void rank_barrier(void) {
  const char *dir = getenv("HVD_FAULT_SYNC_DIR");
  char path[4096];
  if (!dir || size < 2) return;
  snprintf(path, sizeof path, "%s/phase2.%d", dir, rank);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  for (int waited = 0; waited < BARRIER_MS; waited += 10) {
    int all = 1;
    for (int r = 0; r < size && all; r++) {
      struct stat st;
      snprintf(path, sizeof path, "%s/phase2.%d", dir, r);
      all = stat(path, &st) == 0;
    }
    if (all) return;
    poll(NULL, 0, 10);
  }
  violation("barrier", "the other ranks never ended phase 1 (a hang)");
}

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v ? atoi(v) : fallback;
}

int main(void) {
  rank = env_int("HOROVOD_RANK", 0);
  size = env_int("HOROVOD_SIZE", 1);
  if (size < 1 || size > 64 || rank < 0 || rank >= size) {
    fprintf(stderr, "scenario: rank %d of %d is not what hvdrun gives (1..64 ranks)\n", rank,
            size);
    return 2;
  }

  report("init", hvd_init(), 1);
  allreduce_step("allreduce", 0);
  allgather_step();
  broadcast_step();
  alltoall_step();
  reducescatter_step();
  report("barrier", hvd_barrier(), 1);
  grouped_step();
  fusion_step();
  process_set_step();
  report("shutdown", hvd_shutdown(), 1);

  rank_barrier();
  unsigned long before = fired();
  int rc = report("init2", hvd_init(), 1);
  if (rc == 0) rc = allreduce_step("allreduce2", 0);
  int down = report("shutdown2", hvd_shutdown(), 1);
  if (rc == 0) rc = down;
  /* No fault fired in this rank during phase 2 (a persistent one goes on
   * failing every call once it fired). */
  int clean = getenv("HVD_FAULT_PERSIST") ? fired() == 0 : fired() == before;
  printf("fault: phase 2 %s, %s\n", clean ? "clean" : "faulted", rc == 0 ? "ok" : "failed");
  if (size == 1 && clean && rc != 0) violation("phase 2", "hvd_init after a failed run failed");
  return violations ? 3 : 0;
}
