/*
 * engine_bench.c -- what tensor fusion buys on a real model's gradients.
 *
 *   hvdrun -np 2 ./engine_bench [steps]
 *   hvdrun -np 2 ./engine_bench --trace STEPS FILE
 *
 * The gradients are ResNet-50's: the 161 parameter tensors of torchvision's
 * resnet50 (25,557,032 float32 values, 102 MB), built below from the
 * architecture in named_parameters() order.  Each step averages all of
 * them, three ways:
 *
 *   engine      every tensor enqueued asynchronously in backward order (fc
 *               first, as autograd produces them), then all waited: the
 *               engine fuses them (HOROVOD_FUSION_THRESHOLD as set, default
 *               128 MiB)
 *   hand-fused  one hvd_allreduce of one buffer holding all 102 MB: the
 *               floor that fusion aims for
 *   unfused     the engine again after hvd_shutdown/hvd_init with
 *               HOROVOD_FUSION_THRESHOLD=0: one collective per tensor
 *
 * Prints the median step time of each (rank 0's clock, after a barrier),
 * the bandwidth, and the ratios engine/hand-fused and unfused/hand-fused.
 * Nothing is asserted: this is a measurement.
 *
 * --trace runs STEPS engine steps with the settings the environment gives
 * (HOROVOD_AUTOTUNE among them: bench/autotune-curve) and has rank 0 write
 * each step's time in milliseconds to FILE, one per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hvd.h>

/* ---- ResNet-50's parameters, in torchvision's order ---- */

#define MAX_PARAMS 200

typedef struct {
  char name[80];
  size_t count;
} param;

static int nparams;
static param params[MAX_PARAMS];

static void add(const char *prefix, const char *what, size_t count) {
  param *p = &params[nparams++];
  snprintf(p->name, sizeof p->name, "%s%s", prefix, what);
  p->count = count;
}

/* A convolution's weight (out x in x k x k, no bias: a batch norm follows)
 * and that batch norm's weight and bias. */
static void conv_bn(const char *prefix, const char *conv, const char *bn, size_t out,
                    size_t in, size_t k) {
  char name[40];
  snprintf(name, sizeof name, "%s.weight", conv);
  add(prefix, name, out * in * k * k);
  snprintf(name, sizeof name, "%s.weight", bn);
  add(prefix, name, out);
  snprintf(name, sizeof name, "%s.bias", bn);
  add(prefix, name, out);
}

/* torchvision.models.resnet50: a 7x7 stem, then four stages of 3, 4, 6
 * and 3 bottlenecks (1x1 reduce, 3x3, 1x1 expand by 4; the first block of
 * each stage also projects its input with a 1x1 "downsample"), then the
 * 2048 -> 1000 classifier. */
static void build_resnet50(void) {
  static const int blocks[4] = {3, 4, 6, 3};
  size_t inplanes = 64;
  conv_bn("", "conv1", "bn1", 64, 3, 7);
  for (int stage = 0; stage < 4; stage++) {
    size_t planes = (size_t)64 << stage;
    for (int b = 0; b < blocks[stage]; b++) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "layer%d.%d.", stage + 1, b);
      conv_bn(prefix, "conv1", "bn1", planes, inplanes, 1);
      conv_bn(prefix, "conv2", "bn2", planes, planes, 3);
      conv_bn(prefix, "conv3", "bn3", planes * 4, planes, 1);
      if (b == 0) conv_bn(prefix, "downsample.0", "downsample.1", planes * 4, inplanes, 1);
      inplanes = planes * 4;
    }
  }
  add("", "fc.weight", 1000 * inplanes);
  add("", "fc.bias", 1000);
}

/* ---- timing ---- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int fail(const char *what) {
  fprintf(stderr, "engine_bench: %s: %s\n", what, hvd_last_error());
  return 1;
}

/* One step through the engine: enqueue in backward order, wait for all. */
static int engine_step(float **grads, hvd_handle *h) {
  for (int i = nparams - 1; i >= 0; i--) {
    h[i] = hvd_allreduce_async(grads[i], grads[i], params[i].count, HVD_FLOAT32, HVD_AVERAGE,
                               params[i].name);
    if (h[i] < 0) return (int)h[i];
  }
  int rc = 0;
  for (int i = nparams - 1; i >= 0; i--) {
    int r = hvd_wait(h[i]);
    if (rc == 0) rc = r;
  }
  return rc;
}

static float *fused_buf;
static size_t fused_count;

static int hand_fused_step(float **grads, hvd_handle *h) {
  (void)grads;
  (void)h;
  return hvd_allreduce(fused_buf, fused_buf, fused_count, HVD_FLOAT32, HVD_AVERAGE,
                       "hand_fused");
}

/* The median seconds of `steps` steps, after one warm-up step. */
static int time_steps(int (*step)(float **, hvd_handle *), float **grads, hvd_handle *h,
                      int steps, double *median) {
  double *t = malloc((size_t)steps * sizeof *t);
  int rc = 0;
  for (int s = -1; s < steps && rc == 0; s++) {
    rc = hvd_barrier();
    double t0 = now();
    if (rc == 0) rc = step(grads, h);
    if (s >= 0) t[s] = now() - t0;
  }
  if (rc == 0) {
    qsort(t, (size_t)steps, sizeof *t, by_value);
    *median = t[steps / 2];
  }
  free(t);
  return rc;
}

/* --trace: every step's time into path (rank 0). */
static int trace(float **grads, hvd_handle *h, int steps, const char *path) {
  FILE *f = NULL;
  if (hvd_init() != 0) return fail("hvd_init");
  if (hvd_rank() == 0 && !(f = fopen(path, "w"))) {
    perror(path);
    return 1;
  }
  for (int s = 0; s < steps; s++) {
    if (hvd_barrier() != 0) return fail("barrier");
    double t0 = now();
    if (engine_step(grads, h) != 0) return fail("engine step");
    if (f) fprintf(f, "%.3f\n", (now() - t0) * 1e3);
  }
  if (f) fclose(f);
  hvd_shutdown();
  return 0;
}

int main(int argc, char **argv) {
  int tracing = argc == 4 && strcmp(argv[1], "--trace") == 0;
  int steps = argc > 1 ? atoi(argv[tracing ? 2 : 1]) : 10;
  if (steps < 1) steps = 1;
  build_resnet50();
  size_t total = 0;
  for (int i = 0; i < nparams; i++) total += params[i].count;

  float **grads = malloc((size_t)nparams * sizeof *grads);
  hvd_handle *h = malloc((size_t)nparams * sizeof *h);
  for (int i = 0; i < nparams; i++) {
    grads[i] = malloc(params[i].count * sizeof(float));
    for (size_t k = 0; k < params[i].count; k++) grads[i][k] = 1.0f;
  }
  if (tracing) return trace(grads, h, steps, argv[3]);
  fused_count = total;
  fused_buf = malloc(total * sizeof(float));
  for (size_t k = 0; k < total; k++) fused_buf[k] = 1.0f;

  const char *threshold = getenv("HOROVOD_FUSION_THRESHOLD");
  double engine, hand_fused, unfused;
  if (hvd_init() != 0) return fail("hvd_init");
  int rank = hvd_rank(), size = hvd_size();
  if (rank == 0)
    printf("ResNet-50 gradients: %d tensors, %zu float32 (%.1f MB); np=%d, median of %d steps\n",
           nparams, total, (double)total * 4 / 1e6, size, steps);
  if (time_steps(engine_step, grads, h, steps, &engine) != 0) return fail("engine step");
  if (time_steps(hand_fused_step, grads, h, steps, &hand_fused) != 0)
    return fail("hand-fused step");
  hvd_shutdown();

  setenv("HOROVOD_FUSION_THRESHOLD", "0", 1);
  if (hvd_init() != 0) return fail("hvd_init with fusion off");
  if (time_steps(engine_step, grads, h, steps, &unfused) != 0) return fail("unfused step");
  hvd_shutdown();

  if (rank == 0) {
    double mb = (double)total * 4 / 1e6;
    printf("%-34s %10s %12s\n", "", "ms/step", "algbw GB/s");
    char label[64];
    snprintf(label, sizeof label, "engine (threshold %s)", threshold ? threshold : "default");
    printf("%-34s %10.1f %12.3f\n", label, engine * 1e3, mb / 1e3 / engine);
    printf("%-34s %10.1f %12.3f\n", "hand-fused (one allreduce)", hand_fused * 1e3,
           mb / 1e3 / hand_fused);
    printf("%-34s %10.1f %12.3f\n", "unfused (threshold 0)", unfused * 1e3, mb / 1e3 / unfused);
    printf("engine / hand-fused:  %.2f\n", engine / hand_fused);
    printf("unfused / hand-fused: %.2f\n", unfused / hand_fused);
  }
  for (int i = 0; i < nparams; i++) free(grads[i]);
  free(grads);
  free(h);
  free(fused_buf);
  return 0;
}
