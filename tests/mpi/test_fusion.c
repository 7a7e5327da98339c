/*
 * test_fusion.c -- fusing allreduces never changes a single bit.
 *
 * The engine packs ready allreduces (same dtype, op, scale factors and
 * process set) into one fusion buffer up to HOROVOD_FUSION_THRESHOLD
 * bytes.  Each tensor must still come out exactly as if it had been
 * reduced alone, so results may not depend on the threshold, nor on which
 * neighbours a tensor happened to be fused with.
 *
 * The inputs are random floats of very different magnitudes, so their
 * sums do depend on the order of the additions: any change in how an
 * element is reduced shows up in its bits.  Every rank enqueues the same
 * tensors (4 float types x 16 sizes, SUM and AVERAGE, some with scale
 * factors), each rank in its own order, as one burst of async calls,
 * STEPS times per round, and hashes every result.  Rounds (hvd_shutdown,
 * setenv, hvd_init) run with the default threshold, with fusion off (0)
 * and with a small threshold (64 KiB: partial fusion).  Every hash must
 * be equal across steps, rounds and ranks.  The first round's results are
 * also checked against a double-precision reference within rounding
 * error, so equal-but-wrong results cannot pass.  Each round also writes a
 * timeline (HOROVOD_TIMELINE), whose ALLREDUCE events say how many tensors
 * each collective carried: so the test knows the default round really
 * fused, the threshold-0 round really did not, and the 64 KiB round kept
 * its fused collectives within 64 KiB.
 *
 * Times per round are printed for information, not asserted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvd.h>

#include "testing.h"

static int rank, size, failures, checks;

#define STEPS 3

static const hvd_dtype dtypes[] = {HVD_FLOAT32, HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT64};
static const size_t sizes[] = {1,    2,    3,     7,     17,    100,   255,    1000,
                               1023, 4096, 4099,  10000, 33333, 65537, 100000, 262147};
#define NT (LEN(dtypes) * LEN(sizes))

/* Thresholds of the rounds: NULL is the default (the variable unset). */
static const char *const thresholds[] = {NULL, "0", "65536"};
#define ROUNDS LEN(thresholds)

typedef struct {
  char name[48];
  hvd_dtype dtype;
  hvd_op op;
  double pre, post;
  size_t count;
  void *in, *out;
} tensor;

/* ---- float encodings: stored bits <-> double ---- */

static void store(hvd_dtype t, void *buf, size_t i, double x) {
  switch (t) {
    case HVD_FLOAT16: ((half *)buf)[i] = (half)x; break;
    case HVD_BFLOAT16: { /* any bf16 is a fine input: truncating a float is enough */
      float f = (float)x;
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
      break;
    }
    case HVD_FLOAT32: ((float *)buf)[i] = (float)x; break;
    default: ((double *)buf)[i] = x; break;
  }
}

static double load(hvd_dtype t, const void *buf, size_t i) {
  switch (t) {
    case HVD_FLOAT16: return (double)((const half *)buf)[i];
    case HVD_BFLOAT16: {
      uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case HVD_FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
  }
}

/* Rank who's input element i of tensor k: uniform in [-1, 1) times 2^e,
 * e in [-8, 7], so magnitudes differ and rounding depends on order. */
static void fill(const tensor *x, int k, int who, void *buf) {
  for (size_t i = 0; i < x->count; i++) {
    uint64_t r = mix(((uint64_t)k << 48) ^ ((uint64_t)who << 40) ^ i);
    double u = (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    store(x->dtype, buf, i, ldexp(u, (int)(r % 16) - 8));
  }
}

static void tensors_init(tensor *t) {
  for (size_t k = 0; k < NT; k++) {
    tensor *x = &t[k];
    x->dtype = dtypes[k % LEN(dtypes)];
    x->count = sizes[k / LEN(dtypes)];
    x->op = k % 3 == 1 ? HVD_AVERAGE : HVD_SUM;
    int scaled = k % 5 == 2; /* factors that round: they must round the same when fused */
    x->pre = scaled ? 0.3 : 1.0;
    x->post = scaled ? 1.7 : 1.0;
    snprintf(x->name, sizeof x->name, "fusion.%s.%zu.%s%s", hvd_dtype_name(x->dtype), x->count,
             hvd_op_name(x->op), scaled ? ".scaled" : "");
    size_t bytes = x->count * hvd_dtype_size(x->dtype);
    x->in = malloc(bytes);
    x->out = malloc(bytes);
    fill(x, (int)k, rank, x->in);
  }
}

/* The result checked against a double-precision reference within a few
 * rounding errors of the dtype (relative to the sum of magnitudes). */
static void check_close(const tensor *x, int k) {
  static const double eps[] = {[HVD_FLOAT16] = 1e-3, [HVD_BFLOAT16] = 8e-3,
                               [HVD_FLOAT32] = 1e-6, [HVD_FLOAT64] = 1e-14};
  size_t es = hvd_dtype_size(x->dtype), bad = 0, first_bad = 0;
  char *all = malloc((size_t)size * x->count * es);
  for (int q = 0; q < size; q++) fill(x, k, q, all + (size_t)q * x->count * es);
  for (size_t i = 0; i < x->count; i++) {
    double sum = 0, mag = 0;
    for (int q = 0; q < size; q++) {
      double v = x->pre * load(x->dtype, all + (size_t)q * x->count * es, i);
      sum += v;
      mag += fabs(v);
    }
    if (x->op == HVD_AVERAGE) sum /= size, mag /= size;
    sum *= x->post;
    mag *= x->post;
    double got = load(x->dtype, x->out, i);
    double tiny = x->dtype == HVD_FLOAT16 ? 1e-7 * size : 0; /* float16 subnormals */
    if (!(fabs(got - sum) <= 4 * size * eps[x->dtype] * mag + tiny) && bad++ == 0)
      first_bad = i;
  }
  CHECK(bad == 0, "%s: %zu elements far from the reference, first at %zu", x->name, bad,
        first_bad);
  free(all);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One round: STEPS bursts; hash[k] is tensor k's result hash.  Returns
 * the median seconds of a burst (enqueue all, wait all). */
/* What rank 0's timeline says about fusion: the most tensors one
 * ALLREDUCE carried, and the most bytes of one that carried several (its
 * "B" event has args {"tensors": k, "bytes": n}). */
static void fusion_seen(const char *path, long *max_tensors, long *max_fused_bytes) {
  *max_tensors = *max_fused_bytes = 0;
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "rank 0 wrote no timeline at %s", path);
  if (!f) return;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    const char *k = strstr(line, "\"tensors\":"), *b = strstr(line, "\"bytes\":");
    if (!strstr(line, "\"ALLREDUCE\"") || !k || !b) continue;
    long tensors = strtol(k + 10, NULL, 10), bytes = strtol(b + 8, NULL, 10);
    if (tensors > *max_tensors) *max_tensors = tensors;
    if (tensors > 1 && bytes > *max_fused_bytes) *max_fused_bytes = bytes;
  }
  fclose(f);
}

static void check_fusion_happened(const char *path, const char *threshold) {
  long most, bytes;
  fusion_seen(path, &most, &bytes);
  if (!threshold)
    CHECK(most > 1, "default threshold: no ALLREDUCE fused several tensors (timeline %s)", path);
  else if (strcmp(threshold, "0") == 0)
    CHECK(most == 1, "threshold 0: an ALLREDUCE carried %ld tensors", most);
  else
    CHECK(most > 1 && bytes <= atol(threshold),
          "threshold %s: fused at most %ld tensors, at most %ld bytes", threshold, most, bytes);
}

static double run_round(tensor *t, const int *order, const char *threshold, int check_values,
                        uint64_t *hash) {
  if (threshold) setenv("HOROVOD_FUSION_THRESHOLD", threshold, 1);
  else unsetenv("HOROVOD_FUSION_THRESHOLD");
  char timeline[64];
  snprintf(timeline, sizeof timeline, "/tmp/hvd_test_fusion.%d.%ld.json", rank, (long)getpid());
  setenv("HOROVOD_TIMELINE", timeline, 1);
  CALL(hvd_init());
  double times[STEPS];
  hvd_handle h[NT];
  for (int step = 0; step < STEPS; step++) {
    for (size_t k = 0; k < NT; k++) memset(t[k].out, 0, t[k].count * hvd_dtype_size(t[k].dtype));
    CALL(hvd_barrier());
    double t0 = now();
    for (size_t j = 0; j < NT; j++) {
      tensor *x = &t[order[j]];
      hvd_opts opts = HVD_OPTS_INIT;
      opts.prescale_factor = x->pre;
      opts.postscale_factor = x->post;
      CALL(h[order[j]] = hvd_allreduce_async_opts(x->in, x->out, x->count, x->dtype, x->op,
                                                  x->name, &opts));
    }
    for (size_t k = 0; k < NT; k++) CALL(hvd_wait(h[k]));
    times[step] = now() - t0;
    for (size_t k = 0; k < NT; k++) {
      uint64_t v = fnv(t[k].out, t[k].count * hvd_dtype_size(t[k].dtype));
      if (step == 0) hash[k] = v;
      else CHECK(v == hash[k], "threshold %s: %s differs between step 0 and step %d",
                 threshold ? threshold : "default", t[k].name, step);
      if (step == 0 && check_values) check_close(&t[k], (int)k);
    }
  }
  /* Every rank must hold the same bits. */
  uint64_t *all = NULL;
  CALL(hvd_allgather(hash, NT, HVD_INT64, (void **)&all, NULL, "fusion.hashes"));
  for (int q = 0; q < size; q++)
    for (size_t k = 0; k < NT; k++)
      CHECK(all[(size_t)q * NT + k] == hash[k], "threshold %s: %s differs between rank %d and %d",
            threshold ? threshold : "default", t[k].name, rank, q);
  free(all);
  CALL(hvd_shutdown());
  if (rank == 0) check_fusion_happened(timeline, threshold);
  unlink(timeline);
  unsetenv("HOROVOD_TIMELINE");
  qsort(times, STEPS, sizeof times[0], by_value);
  return times[STEPS / 2];
}

int main(void) {
  limit_stalls();
  /* Rank and size are needed to build the inputs before the first round. */
  if (learn_job(&rank, &size) != 0) return 1;

  tensor *t = calloc(NT, sizeof *t);
  tensors_init(t);
  int order[NT];
  shuffled(order, NT, 1234 + (uint64_t)rank); /* each rank its own order */

  static uint64_t hash[ROUNDS][NT];
  double seconds[ROUNDS];
  for (size_t r = 0; r < ROUNDS; r++)
    seconds[r] = run_round(t, order, thresholds[r], r == 0, hash[r]);
  for (size_t r = 1; r < ROUNDS; r++)
    for (size_t k = 0; k < NT; k++)
      CHECK(hash[r][k] == hash[0][k], "%s differs between the default threshold and %s",
            t[k].name, thresholds[r]);

  if (rank == 0)
    for (size_t r = 0; r < ROUNDS; r++)
      printf("fusion threshold %-9s: %zu allreduces in %.2f ms (median of %d bursts)\n",
             thresholds[r] ? thresholds[r] : "default", NT, seconds[r] * 1e3, STEPS);
  for (size_t k = 0; k < NT; k++) {
    free(t[k].in);
    free(t[k].out);
  }
  free(t);
  return report_checks("test_fusion", rank, size, checks, failures);
}
