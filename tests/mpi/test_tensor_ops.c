/*
 * test_tensor_ops.c -- what hvd.torch needs of the C API beyond counts:
 *
 *   1. shapes: allreduce, reducescatter and broadcast negotiate the
 *      tensor's shape; [17, 1311] against [17, 23, 57] (the same count)
 *      fails on every rank naming the tensor and both shapes, and the
 *      next collective works; a shape whose size is not the count is
 *      refused at the call;
 *   2. scale factors on integers: every integer dtype, SUM, AVERAGE, MIN
 *      and MAX, against a reference computed here (the product in double,
 *      converted toward zero, saturating);
 *   3. grouped allgather and reducescatter: the same results as the
 *      single-tensor calls (uneven counts per rank, counts that do not
 *      divide by the size, a process set, scale factors);
 *   4. start/stop timeline: rank 0's file holds the collectives between
 *      the two calls and is closed (ends with "]") when stop returns; with
 *      a directory, every rank writes its own.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, checks, failures;

/* ---- 1. shapes ---- */

static void test_shapes(void) {
  enum { N = 17 * 1311 }; /* = 17 * 23 * 57 */
  static float buf[N];
  hvd_opts o = HVD_OPTS_INIT;
  int64_t mine[3] = {17, 23, 57}, two[2] = {17, 1311};
  o.shape = rank == 0 ? two : mine;
  o.ndims = rank == 0 ? 2 : 3;
  int rc = hvd_wait(hvd_allreduce_async_opts(buf, buf, N, HVD_FLOAT32, HVD_SUM, "shaped", &o));
  const char *msg = hvd_last_error();
  if (size > 1) {
    CHECK(rc == HVD_E_MISMATCH && strstr(msg, "Mismatched allreduce tensor shapes for 'shaped'") &&
              strstr(msg, "rank 0 sent [17, 1311]") && strstr(msg, "sent [17, 23, 57]"),
          "different shapes: %s: %s", hvd_err_name(rc), msg);
  } else {
    CHECK(rc == 0, "one rank, any shape: %s", msg);
  }
  rc = hvd_wait(hvd_broadcast_async_opts(buf, N, HVD_FLOAT32, 0, "shaped.bcast", &o));
  CHECK(size == 1 ? rc == 0 : rc == HVD_E_MISMATCH, "broadcast with different shapes: %s",
        hvd_err_name(rc));
  o.shape = mine;
  o.ndims = 3;
  rc = hvd_wait(hvd_allreduce_async_opts(buf, buf, N, HVD_FLOAT32, HVD_SUM, "same.shape", &o));
  CHECK(rc == 0, "the same shape everywhere: %s", hvd_last_error());
  hvd_handle h = hvd_reducescatter_async(buf, buf, N - 1, HVD_FLOAT32, HVD_SUM, "bad.shape", &o);
  CHECK(h == HVD_E_INVALID && strstr(hvd_last_error(), "shape [17, 23, 57] holds 22287 elements, "
                                                       "not 22286"),
        "a shape that is not the count: %s", hvd_last_error());
}

/* ---- 2. integer scale factors ---- */

/* Element i of rank q, for a dtype of `bits` bits, signed or not. */
static double input(int q, size_t i, int is_signed) {
  double x = (double)((int)(i % 11) - (is_signed ? 5 : 0)) * (q + 1);
  return i % 13 == 0 ? x * 3 + 1 : x;
}

/* Toward zero, saturating at [lo, hi]. */
static double convert(double v, double lo, double hi) {
  return v >= hi ? hi : v <= lo ? lo : trunc(v);
}

typedef struct {
  hvd_dtype dtype;
  double lo, hi;
} int_type;

static const int_type int_types[] = {
    {HVD_UINT8, 0, 255},          {HVD_INT8, -128, 127},
    {HVD_UINT16, 0, 65535},       {HVD_INT16, -32768, 32767},
    {HVD_INT32, -2147483648.0, 2147483647.0},
    {HVD_INT64, -9223372036854775808.0, 9223372036854775807.0},
};

static void put_int(hvd_dtype t, void *buf, size_t i, double v) {
  switch (t) {
    case HVD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case HVD_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case HVD_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case HVD_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case HVD_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((int64_t *)buf)[i] = v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)v; break;
  }
}

/* An exact sum wrapped into the dtype's range, as integer sums wrap. */
static double wrap(double v, const int_type *t) {
  double span = t->hi - t->lo + 1;
  if (span > 1e18) return v; /* int64: the sums here stay far inside */
  v = fmod(v - t->lo, span);
  return (v < 0 ? v + span : v) + t->lo;
}

/* The reference: every rank's input scaled and converted, reduced (a sum
 * wraps), AVERAGE divided toward zero, then scaled and converted again. */
static double reference(const int_type *t, hvd_op op, double pre, double post, size_t i) {
  double acc = 0;
  for (int q = 0; q < size; q++) {
    double x = convert(pre * input(q, i, t->lo < 0), t->lo, t->hi);
    if (q == 0) acc = x;
    else if (op == HVD_MIN) acc = fmin(acc, x);
    else if (op == HVD_MAX) acc = fmax(acc, x);
    else acc += x;
  }
  if (op == HVD_SUM || op == HVD_AVERAGE) acc = wrap(acc, t);
  if (op == HVD_AVERAGE) acc = trunc(acc / size);
  return convert(post * acc, t->lo, t->hi);
}

static void test_int_scaling(void) {
  enum { COUNT = 143 };
  static const struct {
    hvd_op op;
    double pre, post;
  } cases[] = {{HVD_SUM, 0.5, 1.0},     {HVD_SUM, -1.5, 2.5},   {HVD_AVERAGE, 2.5, 0.3},
               {HVD_MIN, 1.0, -0.7},    {HVD_MAX, 3.0, 1e6},    {HVD_SUM, 1.0, -1e300}};
  for (size_t k = 0; k < LEN(int_types); k++) {
    const int_type *t = &int_types[k];
    size_t es = hvd_dtype_size(t->dtype);
    for (size_t c = 0; c < LEN(cases); c++) {
      unsigned char in[COUNT * 8], got[COUNT * 8], want[8];
      char name[64];
      hvd_opts o = HVD_OPTS_INIT;
      o.prescale_factor = cases[c].pre;
      o.postscale_factor = cases[c].post;
      for (size_t i = 0; i < COUNT; i++) put_int(t->dtype, in, i, input(rank, i, t->lo < 0));
      snprintf(name, sizeof name, "int.scale.%s.%zu", hvd_dtype_name(t->dtype), c);
      int rc = hvd_wait(hvd_allreduce_async_opts(in, got, COUNT, t->dtype, cases[c].op, name, &o));
      CHECK(rc == 0, "%s: %s", name, hvd_last_error());
      size_t bad = 0, first = 0;
      for (size_t i = 0; rc == 0 && i < COUNT; i++) {
        put_int(t->dtype, want, 0, reference(t, cases[c].op, cases[c].pre, cases[c].post, i));
        if (memcmp(want, got + i * es, es) != 0 && bad++ == 0) first = i;
      }
      CHECK(bad == 0, "%s (%s pre %g post %g): %zu elements differ, first %zu", name,
            hvd_op_name(cases[c].op), cases[c].pre, cases[c].post, bad, first);
    }
  }
  /* bool has nothing to scale */
  hvd_opts o = HVD_OPTS_INIT;
  o.prescale_factor = 2.0;
  uint8_t b = 1;
  CHECK(hvd_allreduce_async_opts(&b, &b, 1, HVD_BOOL, HVD_SUM, "bool.scale", &o) ==
            HVD_E_UNSUPPORTED, "scaling a bool: %s", hvd_last_error());
}

/* ---- 3. grouped allgather and reducescatter ---- */

#define NG 3

static float value(int q, int g, size_t i) { return (float)(q * 1000 + g * 100) + (float)i; }

static void test_grouped_allgather(int pset, int members, int me) {
  size_t counts[NG], got_counts[NG * 8], one_counts[8];
  float *in[NG];
  void *out[NG];
  char name[32];
  snprintf(name, sizeof name, "grouped.ag.%d", pset);
  for (int g = 0; g < NG; g++) {
    counts[g] = (size_t)(me * 3 + g * 7 + 1);
    in[g] = malloc(counts[g] * sizeof(float));
    for (size_t i = 0; i < counts[g]; i++) in[g][i] = value(me, g, i);
  }
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = pset;
  CALL(hvd_wait(hvd_grouped_allgather_async((const void *const *)in, counts, NG, HVD_FLOAT32,
                                            out, got_counts, name, &o)));
  for (int g = 0; g < NG; g++) {
    void *single = NULL;
    char one[48];
    snprintf(one, sizeof one, "single.ag.%d.%d", pset, g);
    CALL(hvd_wait(hvd_allgather_async(in[g], counts[g], HVD_FLOAT32, &single, one_counts, one,
                                      &o)));
    size_t total = 0;
    for (int q = 0; q < members; q++) {
      CHECK(got_counts[g * members + q] == one_counts[q], "grouped allgather %d: rank %d's count "
            "%zu, single %zu", g, q, got_counts[g * members + q], one_counts[q]);
      total += one_counts[q];
    }
    CHECK(total == 0 || (out[g] && memcmp(out[g], single, total * sizeof(float)) == 0),
          "grouped allgather %d differs from the single call", g);
    free(single);
    free(out[g]);
    free(in[g]);
  }
}

static void test_grouped_reducescatter(int pset, int members, int me) {
  size_t counts[NG] = {7, (size_t)members * 5 + 1, 1000};
  float *in[NG], *out[NG], *single[NG];
  char name[32];
  snprintf(name, sizeof name, "grouped.rs.%d", pset);
  hvd_opts o = HVD_OPTS_INIT;
  o.process_set = pset;
  o.prescale_factor = 0.5;
  o.postscale_factor = 4.0;
  for (int g = 0; g < NG; g++) {
    size_t own = counts[g] / (size_t)members + ((size_t)me < counts[g] % (size_t)members);
    in[g] = malloc(counts[g] * sizeof(float));
    out[g] = malloc((own + 1) * sizeof(float));
    single[g] = malloc((own + 1) * sizeof(float));
    for (size_t i = 0; i < counts[g]; i++) in[g][i] = value(me, g, i);
  }
  CALL(hvd_wait(hvd_grouped_reducescatter_async((const void *const *)in, (void *const *)out,
                                                counts, NG, HVD_FLOAT32, HVD_AVERAGE, name, &o)));
  for (int g = 0; g < NG; g++) {
    char one[48];
    size_t own = counts[g] / (size_t)members + ((size_t)me < counts[g] % (size_t)members);
    snprintf(one, sizeof one, "single.rs.%d.%d", pset, g);
    CALL(hvd_wait(hvd_reducescatter_async(in[g], single[g], counts[g], HVD_FLOAT32, HVD_AVERAGE,
                                          one, &o)));
    CHECK(memcmp(out[g], single[g], own * sizeof(float)) == 0,
          "grouped reducescatter %d differs from the single call", g);
    free(in[g]);
    free(out[g]);
    free(single[g]);
  }
}

static void test_grouped(void) {
  test_grouped_allgather(0, size, rank);
  test_grouped_reducescatter(0, size, rank);
  if (size < 2) return;
  int evens[8], n = 0;
  for (int q = 0; q < size; q += 2) evens[n++] = q;
  int id = hvd_add_process_set(evens, n);
  CHECK(id > 0, "add_process_set: %s", hvd_last_error());
  if (id > 0 && rank % 2 == 0) {
    test_grouped_allgather(id, n, rank / 2);
    test_grouped_reducescatter(id, n, rank / 2);
  }
  if (id > 0) CALL(hvd_remove_process_set(id));
  /* A name in flight cannot be enqueued again.  It stays in flight until
   * the last rank enqueues it, which it does after a barrier that the
   * others reach only after trying (the last rank itself cannot know
   * that its group has not completed at once). */
  size_t count = 1;
  float x = 1, *in[1] = {&x};
  void *out[1];
  int last = rank == size - 1;
  if (last) CALL(hvd_barrier());
  hvd_handle h = hvd_grouped_allgather_async((const void *const *)in, &count, 1, HVD_FLOAT32,
                                             out, NULL, "twice", NULL);
  if (!last) {
    hvd_handle again = hvd_grouped_allgather_async((const void *const *)in, &count, 1,
                                                   HVD_FLOAT32, out, NULL, "twice", NULL);
    CHECK(again == HVD_E_INVALID, "the same group twice in flight: %lld", (long long)again);
    CALL(hvd_barrier());
  }
  CALL(hvd_wait(h));
  free(out[0]);
}

/* ---- 4. start and stop a timeline ---- */

/* 1 if the timeline shows tensor `name`'s ALLREDUCE (not only its
 * negotiation): its row's pid, then an ALLREDUCE event of that pid. */
static int ran_in(const char *text, const char *name) {
  char key[128], event[64];
  snprintf(key, sizeof key, "\"args\":{\"name\":\"%s\"}", name);
  const char *row = strstr(text, key);
  if (!row) return 0;
  const char *start = row;
  while (start > text && start[-1] != '\n') start--;
  const char *pid = strstr(start, "\"pid\":");
  if (!pid || pid > row) return 0;
  int n = atoi(pid + 6);
  for (const char *p = strstr(text, "\"name\":\"ALLREDUCE\""); p;
       p = strstr(p + 1, "\"name\":\"ALLREDUCE\"")) {
    const char *end = strchr(p, '\n');
    snprintf(event, sizeof event, "\"pid\":%d,", n);
    const char *at = strstr(p, event);
    if (at && (!end || at < end)) return 1;
  }
  return 0;
}

static void test_timeline(const char *path) {
  float x = 1;
  CALL(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "before.start"));
  CALL(hvd_start_timeline(path, 1));
  CALL(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "while.recording"));
  CALL(hvd_start_timeline(path, 0)); /* again: replaces it */
  CALL(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after.restart"));
  CALL(hvd_stop_timeline());
  CALL(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "after.stop"));
  CALL(hvd_stop_timeline()); /* without one: nothing to do */
  CHECK(hvd_start_timeline("", 0) == HVD_E_INVALID, "an empty path: %s", hvd_last_error());
  if (rank != 0) return;
  CHECK(hvd_start_timeline("/nonexistent/dir/t.json", 0) == HVD_E_SYSTEM &&
            strstr(hvd_last_error(), "/nonexistent/dir/t.json"),
        "a path that cannot be created: %s", hvd_last_error());
  FILE *f = fopen(path, "r");
  static char text[1 << 16];
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ')) text[--n] = '\0';
  CHECK(n > 0 && text[0] == '[' && text[n - 1] == ']', "the timeline is a closed JSON array");
  /* Another rank may already have asked for "after.stop" before rank 0
   * stopped: its negotiation may show, never its allreduce, which needs
   * rank 0's request. */
  CHECK(ran_in(text, "after.restart") && !ran_in(text, "after.stop") &&
            !strstr(text, "before.start"),
        "the timeline holds what ran between start and stop only:\n%s", text);
}

/* Every rank its own file: HOROVOD_TIMELINE's directory form, through
 * hvd_start_timeline too. */
static void test_timeline_per_rank(const char *dir) {
  float x = 1;
  char spec[300], mine[320], job[80];
  snprintf(spec, sizeof spec, "%s/", dir);
  CALL(hvd_start_timeline(spec, 0));
  CALL(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "per.rank"));
  CALL(hvd_stop_timeline());
  snprintf(mine, sizeof mine, "%s/rank.%d.json", dir, rank);
  FILE *f = fopen(mine, "r");
  static char text[1 << 16];
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  snprintf(job, sizeof job, "\"hvd_job\",\"ph\":\"M\",\"pid\":0,\"args\":{\"rank\":%d,", rank);
  CHECK(n > 2 && strstr(text, "per.rank") && strstr(text, job) && strstr(text, "\n]\n"),
        "rank %d's own timeline %s is complete and its own:\n%s", rank, mine, text);
  CALL(hvd_barrier());
  unlink(mine);
  CALL(hvd_barrier());
  if (rank == 0) rmdir(dir);
}

int main(int argc, char **argv) {
  limit_stalls();
  if (init_or_complain() != 0) return 1;
  rank = hvd_rank();
  size = hvd_size();
  test_shapes();
  test_int_scaling();
  test_grouped();
  char path[256];
  snprintf(path, sizeof path, "%s/hvd-timeline-%d.json", argc > 1 ? argv[1] : "/tmp",
           (int)getppid());
  test_timeline(path);
  char dir[256];
  snprintf(dir, sizeof dir, "%s/hvd-timelines-%d", argc > 1 ? argv[1] : "/tmp", (int)getppid());
  test_timeline_per_rank(dir);
  CALL(hvd_barrier());
  if (rank == 0) unlink(path);
  hvd_shutdown();
  return report_checks("test_tensor_ops", rank, size, checks, failures);
}
