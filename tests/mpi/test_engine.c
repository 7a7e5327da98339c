/*
 * test_engine.c -- the asynchronous API and the engine behind it.
 *
 *   1. Out-of-order, multi-threaded enqueue: every rank enqueues the same
 *      200 named allreduces (1 .. 50000 elements, four dtypes, three ops)
 *      in its own random order, from two threads at once, then waits for
 *      all of them; the engine must match them by name.
 *   2. Every other collective in its async form, enqueued in one burst:
 *      broadcast from each root, allgather with per-rank counts (rank 0
 *      sends nothing), alltoall, reducescatter.
 *   3. Grouped allreduce, async and blocking.
 *   4. Completion callbacks: run once per handle, off the caller's thread,
 *      with the handle and its status (a failed one too).
 *   5. prescale/postscale factors on allreduce and reducescatter.
 *   6. Ranks that disagree on count, dtype, op or root: HVD_E_MISMATCH on
 *      every rank naming the tensor, the field and both values -- and the
 *      job goes on.
 *   7. A name enqueued again while in flight: HVD_E_INVALID naming it.
 *   8. hvd_poll: 0 while a peer has not enqueued, 1 once done, then
 *      hvd_wait returns 0.
 *
 * References are computed here from each rank's inputs (a pure function
 * of rank, index and seed), in scalar double arithmetic.  Inputs are small
 * integers (and scale factors powers of two or small integers), so every
 * sum is exact and the comparison is bitwise whatever the reduction order.
 * Parts 6-8 need a second rank and are skipped in a job of size 1.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hvd.h>

#include "testing.h"

static int rank, size;
static atomic_int failures, checks; /* CHECK may run on any thread */

/* Rank `who`'s input element i of the tensor with this seed: a small
 * integer, exact in every float type (|sum| <= 4 ranks * 8 * scale). */
static double input(uint64_t seed, int who, size_t i) {
  return (double)((int)(mix(mix(seed) ^ ((uint64_t)who << 40) ^ i) % 17) - 8);
}

/* int32 inputs may be larger; sums of a few still fit comfortably. */
static double input_i32(uint64_t seed, int who, size_t i) {
  return (double)((int64_t)(mix(mix(seed) ^ ((uint64_t)who << 40) ^ i) % 200001) - 100000);
}

static double value_of(hvd_dtype t, uint64_t seed, int who, size_t i) {
  return t == HVD_INT32 ? input_i32(seed, who, i) : input(seed, who, i);
}

/* Writes x as element i of buf.  Float conversions round to nearest; the
 * values here are exact or one division away from exact. */
static void put(hvd_dtype t, void *buf, size_t i, double x) {
  switch (t) {
    case HVD_FLOAT16: ((half *)buf)[i] = (half)(float)x; break;
    case HVD_FLOAT32: ((float *)buf)[i] = (float)x; break;
    case HVD_FLOAT64: ((double *)buf)[i] = x; break;
    case HVD_INT32: ((int32_t *)buf)[i] = (int32_t)x; break;
    default: abort(); /* not used here */
  }
}

static void fill(hvd_dtype t, uint64_t seed, int who, void *buf, size_t count) {
  for (size_t i = 0; i < count; i++) put(t, buf, i, value_of(t, seed, who, i));
}

typedef struct {
  hvd_op op;
  double prescale, postscale;
} reduction;

/* The expected reduction of element i over every rank:
 * postscale * (op over ranks of prescale * x), AVERAGE dividing by the
 * number of ranks before the postscale.  Integer AVERAGE truncates. */
static double expected(hvd_dtype t, reduction r, uint64_t seed, size_t i) {
  double acc = 0;
  for (int q = 0; q < size; q++) {
    double x = r.prescale * value_of(t, seed, q, i);
    if (q == 0) acc = x;
    else if (r.op == HVD_MAX) acc = fmax(acc, x);
    else if (r.op == HVD_MIN) acc = fmin(acc, x);
    else acc += x;
  }
  if (r.op == HVD_AVERAGE) acc = t == HVD_INT32 ? trunc(acc / size) : acc / size;
  return acc * r.postscale;
}

/* Compares count elements of got with the reference for elements
 * first .. first+count-1; reports the first difference. */
static void compare(const char *what, hvd_dtype t, reduction r, uint64_t seed, const void *got,
                    size_t first, size_t count) {
  size_t es = hvd_dtype_size(t), bad = 0, first_bad = 0;
  unsigned char want[8];
  for (size_t i = 0; i < count; i++) {
    put(t, want, 0, expected(t, r, seed, first + i));
    if (memcmp(want, (const char *)got + i * es, es) != 0 && bad++ == 0) first_bad = i;
  }
  CHECK(bad == 0, "%s (%s %s, %zu elements): %zu differ, first at %zu", what, hvd_dtype_name(t),
        hvd_op_name(r.op), count, bad, first + first_bad);
}

/* Waits h and checks it succeeded, naming what it was. */
static void wait_ok(hvd_handle h, const char *what) {
  int rc = hvd_wait(h);
  CHECK(rc == 0, "waiting for %s: %s: %s", what, hvd_err_name(rc), hvd_last_error());
}

static const reduction plain_sum = {HVD_SUM, 1.0, 1.0};

/* ---- 1. 200 tensors, each rank in its own order, from two threads ---- */

#define NTENSORS 200

typedef struct {
  char name[32];
  hvd_dtype dtype;
  reduction red;
  size_t count;
  int in_place;
  void *in, *out;
  hvd_handle h;
  char error[256]; /* the enqueue's message, if it failed */
} tensor;

/* Sizes spread log-uniformly over 1 .. 50000 elements (both ends
 * included), identical on every rank since they depend on i only. */
static size_t tensor_count(int i) {
  if (i < 2) return i == 0 ? 1 : 50000;
  double u = (double)(mix((uint64_t)i) % 1000000) / 1e6;
  size_t n = (size_t)exp(u * log(50000.0));
  return n < 1 ? 1 : n > 50000 ? 50000 : n;
}

static void tensor_init(tensor *x, int i) {
  static const hvd_dtype dtypes[] = {HVD_FLOAT32, HVD_FLOAT64, HVD_INT32, HVD_FLOAT16};
  static const hvd_op ops[] = {HVD_SUM, HVD_AVERAGE, HVD_MAX};
  snprintf(x->name, sizeof x->name, "many.%d", i);
  x->dtype = dtypes[i % 4];
  x->red = (reduction){ops[(i / 4) % 3], 1.0, 1.0};
  x->count = tensor_count(i);
  x->in_place = (i / 12) % 2;
  size_t bytes = x->count * hvd_dtype_size(x->dtype);
  x->in = malloc(bytes);
  x->out = x->in_place ? x->in : malloc(bytes);
  fill(x->dtype, 1000 + (uint64_t)i, rank, x->in, x->count);
}

typedef struct {
  tensor *tensors;
  const int *order; /* this rank's permutation of the tensors */
  int first;        /* this thread enqueues order[first], order[first + 2], ... */
  pthread_barrier_t *start;
} enqueuer;

static void *enqueue_half(void *arg) {
  enqueuer *e = arg;
  pthread_barrier_wait(e->start); /* both threads enqueue at the same time */
  for (int k = e->first; k < NTENSORS; k += 2) {
    tensor *x = &e->tensors[e->order[k]];
    x->h = hvd_allreduce_async(x->in, x->out, x->count, x->dtype, x->red.op, x->name);
    if (x->h < 0) snprintf(x->error, sizeof x->error, "%s", hvd_last_error());
  }
  return NULL;
}

static void test_many_tensors_any_order_two_threads(void) {
  tensor *t = calloc(NTENSORS, sizeof *t);
  int order[NTENSORS];
  for (int i = 0; i < NTENSORS; i++) tensor_init(&t[i], i);
  shuffled(order, NTENSORS, 77 + (uint64_t)rank); /* seeded by rank */

  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  enqueuer e[2] = {{t, order, 0, &start}, {t, order, 1, &start}};
  pthread_t th[2];
  for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, enqueue_half, &e[k]);
  for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
  pthread_barrier_destroy(&start);

  for (int i = 0; i < NTENSORS; i++) {
    tensor *x = &t[i];
    CHECK(x->h >= 0, "enqueue of %s failed: %s: %s", x->name, hvd_err_name((int)x->h), x->error);
    if (x->h < 0) continue;
    int rc = hvd_wait(x->h); /* waited from another thread than the enqueuer */
    CHECK(rc == 0, "%s: %s: %s", x->name, hvd_err_name(rc), hvd_last_error());
    if (rc == 0) compare(x->name, x->dtype, x->red, 1000 + (uint64_t)i, x->out, 0, x->count);
  }
  for (int i = 0; i < NTENSORS; i++) {
    if (!t[i].in_place) free(t[i].out);
    free(t[i].in);
  }
  free(t);
}

/* ---- 2. every collective, async, in one burst ---- */

/* Encodes (from, to, k) in one exactly representable number, so a block
 * that lands in the wrong place is easy to see. */
static int32_t tag(int from, int to, size_t k) {
  return (int32_t)(from * 1000000 + to * 10000 + (int)k);
}

static size_t gather_count(int who) { return (size_t)who * 3; } /* rank 0 sends nothing */
static size_t a2a_count(int from, int to) { return (size_t)((from + 2 * to) % 3 + to); }

static void test_async_collectives(void) {
  enum { BC = 777, RS = 1001 };
  /* broadcast: one tensor per root, all in flight together */
  int32_t(*bc)[BC] = malloc((size_t)size * sizeof *bc);
  hvd_handle *bh = malloc((size_t)size * sizeof *bh);
  for (int root = 0; root < size; root++) {
    for (size_t k = 0; k < BC; k++) bc[root][k] = rank == root ? tag(root, 0, k) : -1;
    char name[32];
    snprintf(name, sizeof name, "async.bcast.%d", root);
    CALL(bh[root] = hvd_broadcast_async(bc[root], BC, HVD_INT32, root, name));
  }
  /* allgather: rank r sends 3r doubles */
  size_t mine = gather_count(rank);
  double *gin = malloc((mine + 1) * sizeof *gin);
  for (size_t k = 0; k < mine; k++) gin[k] = tag(rank, 0, k);
  void *gout = NULL;
  size_t *gcounts = calloc((size_t)size, sizeof *gcounts);
  hvd_handle gh;
  CALL(gh = hvd_allgather_async(gin, mine, HVD_FLOAT64, &gout, gcounts, "async.gather", NULL));
  /* alltoall */
  size_t *sc = calloc((size_t)size, sizeof *sc), *acounts = calloc((size_t)size, sizeof *sc);
  size_t total = 0;
  for (int d = 0; d < size; d++) total += sc[d] = a2a_count(rank, d);
  int32_t *ain = malloc((total + 1) * sizeof *ain), *p = ain;
  for (int d = 0; d < size; d++)
    for (size_t k = 0; k < sc[d]; k++) *p++ = tag(rank, d, k);
  void *aout = NULL;
  hvd_handle ah;
  CALL(ah = hvd_alltoall_async(ain, sc, HVD_INT32, &aout, acounts, "async.a2a", NULL));
  /* reducescatter */
  float *rin = malloc(RS * sizeof *rin);
  size_t own = hvd_reducescatter_count(RS, rank), first = 0;
  for (int q = 0; q < rank; q++) first += hvd_reducescatter_count(RS, q);
  float *rout = malloc((own + 1) * sizeof *rout);
  fill(HVD_FLOAT32, 31, rank, rin, RS);
  hvd_handle rh;
  CALL(rh = hvd_reducescatter_async(rin, rout, RS, HVD_FLOAT32, HVD_SUM, "async.rs", NULL));

  for (int root = 0; root < size; root++) {
    wait_ok(bh[root], "async broadcast");
    size_t bad = 0;
    for (size_t k = 0; k < BC; k++) bad += bc[root][k] != tag(root, 0, k);
    CHECK(bad == 0, "async broadcast from root %d: %zu of %d elements differ", root, bad, BC);
  }
  wait_ok(gh, "async allgather");
  size_t off = 0;
  for (int q = 0; q < size; q++) {
    CHECK(gcounts[q] == gather_count(q), "async allgather: rank %d's count %zu, expected %zu", q,
          gcounts[q], gather_count(q));
    size_t bad = 0;
    for (size_t k = 0; k < gather_count(q); k++) bad += ((double *)gout)[off + k] != tag(q, 0, k);
    CHECK(bad == 0, "async allgather: rank %d's block: %zu elements differ", q, bad);
    off += gather_count(q);
  }
  wait_ok(ah, "async alltoall");
  off = 0;
  for (int q = 0; q < size; q++) {
    size_t n = a2a_count(q, rank), bad = 0;
    CHECK(acounts[q] == n, "async alltoall: %zu from rank %d, expected %zu", acounts[q], q, n);
    for (size_t k = 0; k < n; k++) bad += ((int32_t *)aout)[off + k] != tag(q, rank, k);
    CHECK(bad == 0, "async alltoall: block from rank %d: %zu elements differ", q, bad);
    off += n;
  }
  wait_ok(rh, "async reducescatter");
  compare("async reducescatter", HVD_FLOAT32, plain_sum, 31, rout, first, own);

  free(bc);
  free(bh);
  free(gin);
  free(gout);
  free(gcounts);
  free(sc);
  free(acounts);
  free(ain);
  free(aout);
  free(rin);
  free(rout);
}

/* ---- 3. grouped allreduce ---- */

static void test_grouped(void) {
  static const size_t counts[] = {1, 100, 5000, 3, 77, 1024};
  enum { N = LEN(counts) };
  float *in[N], *out[N];
  double *io[N];
  for (int i = 0; i < N; i++) {
    in[i] = malloc(counts[i] * sizeof(float));
    out[i] = malloc(counts[i] * sizeof(float));
    io[i] = malloc(counts[i] * sizeof(double));
    fill(HVD_FLOAT32, 200 + (uint64_t)i, rank, in[i], counts[i]);
    fill(HVD_FLOAT64, 300 + (uint64_t)i, rank, io[i], counts[i]);
  }
  hvd_handle h;
  CALL(h = hvd_grouped_allreduce_async((const void *const *)in, (void *const *)out, counts, N,
                                       HVD_FLOAT32, HVD_SUM, "group", NULL));
  wait_ok(h, "grouped allreduce 'group'");
  for (int i = 0; i < N; i++)
    compare("grouped allreduce", HVD_FLOAT32, plain_sum, 200 + (uint64_t)i, out[i], 0,
            counts[i]);

  int rc = hvd_grouped_allreduce((const void *const *)io, (void *const *)io, counts, N,
                                 HVD_FLOAT64, HVD_AVERAGE, "group.blocking");
  CHECK(rc == 0, "blocking grouped allreduce: %s: %s", hvd_err_name(rc), hvd_last_error());
  reduction avg = {HVD_AVERAGE, 1.0, 1.0};
  for (int i = 0; i < N && rc == 0; i++)
    compare("blocking grouped allreduce in place", HVD_FLOAT64, avg, 300 + (uint64_t)i, io[i],
            0, counts[i]);
  for (int i = 0; i < N; i++) {
    free(in[i]);
    free(out[i]);
    free(io[i]);
  }
}

/* ---- 4. callbacks ---- */

static pthread_t main_thread;

typedef struct {
  atomic_int *completed;
  atomic_int calls; /* must end at exactly 1 */
  hvd_handle handle;
  int status;
  int on_main_thread;
} completion;

static void on_complete(hvd_handle h, int status, void *arg) {
  completion *c = arg;
  c->handle = h;
  c->status = status;
  c->on_main_thread = pthread_equal(pthread_self(), main_thread) != 0;
  c->calls++;
  atomic_fetch_add_explicit(c->completed, 1, memory_order_release);
}

static void test_callbacks(void) {
  enum { N = 40, COUNT = 333 };
  /* One more at np >= 2: a mismatched tensor, whose callback gets the error. */
  int n = size > 1 ? N + 1 : N;
  atomic_int completed = 0;
  completion c[N + 1];
  hvd_handle returned[N + 1];
  float(*buf)[COUNT] = malloc((N + 1) * sizeof *buf);
  for (int i = 0; i < n; i++) {
    c[i] = (completion){&completed, 0, -1, 1, 0};
    hvd_opts opts = HVD_OPTS_INIT;
    opts.callback = on_complete;
    opts.callback_arg = &c[i];
    char name[32];
    snprintf(name, sizeof name, i < N ? "cb.%d" : "cb.mismatched", i);
    size_t count = i < N ? COUNT : COUNT - (size_t)(rank == 0);
    fill(HVD_FLOAT32, 400 + (uint64_t)i, rank, buf[i], COUNT);
    CALL(returned[i] = hvd_allreduce_async_opts(buf[i], buf[i], count, HVD_FLOAT32, HVD_SUM,
                                                name, &opts));
  }
  /* The handles are not waited: the callbacks release them.  Bounded wait. */
  double deadline = now() + 30;
  while (atomic_load_explicit(&completed, memory_order_acquire) < n && now() < deadline)
    sleep_ms(1);
  sleep_ms(50); /* a second call for the same handle would show up now */
  CHECK(atomic_load_explicit(&completed, memory_order_acquire) == n,
        "%d of %d callbacks ran within 30 s", (int)completed, n);
  for (int i = 0; i < n; i++) {
    CHECK(c[i].calls == 1, "callback %d ran %d times", i, (int)c[i].calls);
    CHECK(c[i].handle == returned[i], "callback %d got handle %lld, the enqueue returned %lld", i,
          (long long)c[i].handle, (long long)returned[i]);
    CHECK(!c[i].on_main_thread, "callback %d ran on the enqueuing thread", i);
    if (i < N) {
      CHECK(c[i].status == 0, "callback %d status %s", i, hvd_err_name(c[i].status));
      if (c[i].status == 0)
        compare("allreduce with callback", HVD_FLOAT32, plain_sum, 400 + (uint64_t)i, buf[i], 0,
                COUNT);
    } else {
      CHECK(c[i].status == HVD_E_MISMATCH, "mismatched tensor's callback got status %s",
            hvd_err_name(c[i].status));
    }
  }
  free(buf);
}

/* ---- 5. prescale and postscale ---- */

static void test_scale_factors(void) {
  static const struct {
    hvd_dtype dtype;
    reduction red;
  } cases[] = {
      {HVD_FLOAT32, {HVD_SUM, 0.5, 4.0}},     {HVD_FLOAT32, {HVD_AVERAGE, 3.0, 0.25}},
      {HVD_FLOAT64, {HVD_SUM, 0.25, 2.0}},    {HVD_FLOAT64, {HVD_AVERAGE, 0.5, 8.0}},
      {HVD_FLOAT16, {HVD_SUM, 0.5, 2.0}},     {HVD_FLOAT16, {HVD_AVERAGE, 2.0, 0.5}},
      {HVD_FLOAT32, {HVD_SUM, 1.0, 1.0}}, /* the plain tensor fused beside the scaled ones */
  };
  enum { COUNT = 1234, N = LEN(cases) };
  void *ar[N], *rs_in[N], *rs_out[N];
  hvd_handle ah[N], rh[N];
  size_t own = hvd_reducescatter_count(COUNT, rank), first = 0;
  for (int q = 0; q < rank; q++) first += hvd_reducescatter_count(COUNT, q);
  for (int i = 0; i < N; i++) {
    hvd_dtype t = cases[i].dtype;
    size_t es = hvd_dtype_size(t);
    hvd_opts opts = HVD_OPTS_INIT;
    opts.prescale_factor = cases[i].red.prescale;
    opts.postscale_factor = cases[i].red.postscale;
    char name[32];
    ar[i] = malloc(COUNT * es);
    rs_in[i] = malloc(COUNT * es);
    rs_out[i] = malloc((own + 1) * es);
    fill(t, 500 + (uint64_t)i, rank, ar[i], COUNT);
    fill(t, 500 + (uint64_t)i, rank, rs_in[i], COUNT);
    snprintf(name, sizeof name, "scaled.ar.%d", i);
    CALL(ah[i] = hvd_allreduce_async_opts(ar[i], ar[i], COUNT, t, cases[i].red.op, name, &opts));
    snprintf(name, sizeof name, "scaled.rs.%d", i);
    CALL(rh[i] = hvd_reducescatter_async(rs_in[i], rs_out[i], COUNT, t, cases[i].red.op, name,
                                         &opts));
  }
  for (int i = 0; i < N; i++) {
    char what[96];
    snprintf(what, sizeof what, "allreduce prescale %g postscale %g", cases[i].red.prescale,
             cases[i].red.postscale);
    wait_ok(ah[i], what);
    compare(what, cases[i].dtype, cases[i].red, 500 + (uint64_t)i, ar[i], 0, COUNT);
    snprintf(what, sizeof what, "reducescatter prescale %g postscale %g", cases[i].red.prescale,
             cases[i].red.postscale);
    wait_ok(rh[i], what);
    compare(what, cases[i].dtype, cases[i].red, 500 + (uint64_t)i, rs_out[i], first, own);
    free(ar[i]);
    free(rs_in[i]);
    free(rs_out[i]);
  }
}

/* ---- 6. mismatches ---- */

/* Waits h, which must fail with HVD_E_MISMATCH; the message must name the
 * tensor in quotes, the field, and the value each side sent. */
static void expect_mismatch(hvd_handle h, const char *name, const char *field, const char *v0,
                            const char *v1) {
  if (h < 0) {
    CHECK(0, "enqueue of '%s' failed: %s: %s", name, hvd_err_name((int)h), hvd_last_error());
    return;
  }
  int rc = hvd_wait(h);
  const char *msg = hvd_last_error();
  char quoted[64];
  snprintf(quoted, sizeof quoted, "'%s'", name);
  CHECK(rc == HVD_E_MISMATCH, "'%s': expected HVD_E_MISMATCH, got %s: %s", name,
        hvd_err_name(rc), msg);
  CHECK(strstr(msg, quoted) && strcasestr(msg, field) && strstr(msg, v0) && strstr(msg, v1),
        "'%s': the message should name the tensor, '%s', '%s' and '%s': %s", name, field, v0, v1,
        msg);
}

static void test_mismatch(void) {
  float f[16] = {0};
  int32_t n[16] = {0};
  int r0 = rank == 0;
  /* Rank 0 disagrees with the others on one field of each tensor. */
  hvd_handle count = hvd_allreduce_async(f, f, r0 ? 10 : 12, HVD_FLOAT32, HVD_SUM, "mm.count");
  hvd_handle dtype = hvd_allreduce_async(r0 ? (void *)f : (void *)n, r0 ? (void *)f : (void *)n,
                                         8, r0 ? HVD_FLOAT32 : HVD_INT32, HVD_SUM, "mm.dtype");
  hvd_handle op = hvd_allreduce_async(f, f, 8, HVD_FLOAT32, r0 ? HVD_SUM : HVD_MAX, "mm.op");
  float b[8] = {0};
  hvd_handle root = hvd_broadcast_async(b, 8, HVD_FLOAT32, r0 ? size - 1 : 0, "mm.root");
  expect_mismatch(count, "mm.count", "count", "10", "12");
  expect_mismatch(dtype, "mm.dtype", "dtype", "float32", "int32");
  expect_mismatch(op, "mm.op", "op", "sum", "max");
  char last[16];
  snprintf(last, sizeof last, "%d", size - 1);
  expect_mismatch(root, "mm.root", "root", last, "0");

  /* The communicator is not broken: the next step works. */
  float x[5];
  fill(HVD_FLOAT32, 600, rank, x, 5);
  int rc = hvd_allreduce(x, x, 5, HVD_FLOAT32, HVD_SUM, "mm.after");
  CHECK(rc == 0, "allreduce after the mismatches: %s: %s", hvd_err_name(rc), hvd_last_error());
  if (rc == 0) compare("allreduce after the mismatches", HVD_FLOAT32, plain_sum, 600, x, 0, 5);
}

/* ---- 7. a name already in flight ---- */

static void test_duplicate_in_flight(void) {
  float a[4], b[4];
  fill(HVD_FLOAT32, 700, rank, a, 4);
  hvd_handle first = -1;
  if (rank == 0) {
    /* The others enqueue "dup" only after the barrier below, so rank 0's
     * first "dup" is certainly still in flight here. */
    CALL(first = hvd_allreduce_async(a, a, 4, HVD_FLOAT32, HVD_SUM, "dup"));
    hvd_handle again = hvd_allreduce_async(b, b, 4, HVD_FLOAT32, HVD_SUM, "dup");
    CHECK(again == HVD_E_INVALID && strstr(hvd_last_error(), "dup"),
          "enqueueing 'dup' while in flight returned %s (%s), expected HVD_E_INVALID naming it",
          again < 0 ? hvd_err_name((int)again) : "a handle", hvd_last_error());
  }
  CALL(hvd_barrier());
  if (rank != 0) CALL(first = hvd_allreduce_async(a, a, 4, HVD_FLOAT32, HVD_SUM, "dup"));
  wait_ok(first, "'dup' after the refused second enqueue");
  compare("'dup'", HVD_FLOAT32, plain_sum, 700, a, 0, 4);
}

/* A refused enqueue leaves the caller's result pointer as it was: it may
 * be the pointer of an operation still in flight, which the engine thread
 * writes when that operation finishes (possibly at that very moment). */
static void test_refused_keeps_result(void) {
  int32_t mine = 900 + rank;
  void *out = NULL;
  hvd_handle h = -1;
  if (rank == 0) {
    /* The others enqueue "kept" after the barrier: it is in flight here. */
    CALL(h = hvd_allgather_async(&mine, 1, HVD_INT32, &out, NULL, "kept", NULL));
    void *untouched = &mine;
    hvd_handle again = hvd_allgather_async(&mine, 1, HVD_INT32, &untouched, NULL, "kept", NULL);
    CHECK(again == HVD_E_INVALID, "enqueueing 'kept' while in flight returned %lld",
          (long long)again);
    CHECK(untouched == &mine, "the refused enqueue wrote its result pointer (%p)", untouched);
  }
  CALL(hvd_barrier());
  if (rank != 0) CALL(h = hvd_allgather_async(&mine, 1, HVD_INT32, &out, NULL, "kept", NULL));
  int rc = hvd_wait(h);
  CHECK(rc == 0, "hvd_wait of 'kept': %s: %s", hvd_err_name(rc), hvd_last_error());
  for (int r = 0; rc == 0 && out && r < size; r++)
    CHECK(((int32_t *)out)[r] == 900 + r, "'kept'[%d] = %d, expected %d", r,
          ((int32_t *)out)[r], 900 + r);
  free(out);
}

/* ---- 8. hvd_poll ---- */

static void test_poll(void) {
  float a[3];
  fill(HVD_FLOAT32, 800, rank, a, 3);
  hvd_handle h = -1;
  if (rank == 0) {
    CALL(h = hvd_allreduce_async(a, a, 3, HVD_FLOAT32, HVD_SUM, "polled"));
    /* With peers, they enqueue "polled" only after the barrier below. */
    int p = hvd_poll(h);
    if (size > 1)
      CHECK(p == 0, "hvd_poll before the other ranks enqueued returned %d, expected 0", p);
  }
  if (size > 1) CALL(hvd_barrier());
  if (rank != 0) CALL(h = hvd_allreduce_async(a, a, 3, HVD_FLOAT32, HVD_SUM, "polled"));
  int p = 0;
  double deadline = now() + 30;
  while ((p = hvd_poll(h)) == 0 && now() < deadline) sleep_ms(1);
  CHECK(p == 1, "hvd_poll never returned 1 (last %d: %s)", p, p < 0 ? hvd_last_error() : "");
  if (p != 1) return;
  CHECK(hvd_poll(h) == 1, "hvd_poll of a done, unwaited handle is not 1 the second time");
  int rc = hvd_wait(h);
  CHECK(rc == 0, "hvd_wait after hvd_poll returned 1: %s: %s", hvd_err_name(rc),
        hvd_last_error());
  compare("polled allreduce", HVD_FLOAT32, plain_sum, 800, a, 0, 3);
}

int main(void) {
  main_thread = pthread_self();
  limit_stalls();
  CALL(hvd_init());
  rank = hvd_rank();
  size = hvd_size();
  test_many_tensors_any_order_two_threads();
  test_async_collectives();
  test_grouped();
  test_callbacks();
  test_scale_factors();
  if (size > 1) {
    test_mismatch();
    test_duplicate_in_flight();
    test_refused_keeps_result();
  }
  test_poll();
  CALL(hvd_shutdown());
  return report_checks("test_engine", rank, size, (int)checks, (int)failures);
}
