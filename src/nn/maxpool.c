/*
 * maxpool.c -- max pooling over k x k windows with a stride, no padding
 * (torch.nn.MaxPool2d(k, stride)).
 *
 * Forward remembers where each maximum came from (the first one in row
 * order on ties), and backward sends each output's gradient there alone,
 * adding where windows overlap.
 */
#include <stdlib.h>
#include <string.h>

#include "layer.h"

typedef struct {
  hvd_nn__layer base;
  int kernel, stride;
  int *argmax;       /* per output value: its input's offset in the sample */
  size_t argmax_cap; /* bytes */
} maxpool;

/* One channel plane: y and argmax of every window of x. */
static void pool_plane(const maxpool *mp, const float *x, float *y, int *argmax, int base) {
  const hvd_nn__shape in = mp->base.in, out = mp->base.out;
  const int k = mp->kernel, s = mp->stride;
  for (int oy = 0; oy < out.h; oy++) {
    for (int ox = 0; ox < out.w; ox++) {
      int best = oy * s * in.w + ox * s;
      for (int ky = 0; ky < k; ky++) {
        const int row = (oy * s + ky) * in.w + ox * s;
        for (int kx = 0; kx < k; kx++)
          if (x[row + kx] > x[best]) best = row + kx;
      }
      *y++ = x[best];
      *argmax++ = base + best;
    }
  }
}

static int maxpool_forward(hvd_nn__layer *l, const float *x, float *y, int batch) {
  maxpool *mp = (maxpool *)l;
  const int plane_in = l->in.h * l->in.w, plane_out = l->out.h * l->out.w;
  const size_t out_size = (size_t)hvd_nn__shape_size(l->out);
  mp->argmax =
      hvd_nn__reserve(mp->argmax, &mp->argmax_cap, (size_t)batch, out_size, sizeof *mp->argmax);
  if (!mp->argmax)
    return hvd_nn__err(HVD_E_NOMEM, "layer %d (maxpool): out of memory for a batch of %d", l->index,
                       batch);
  const size_t planes = (size_t)batch * (size_t)l->in.c;
  for (size_t p = 0; p < planes; p++) {
    /* argmax offsets are within the sample: the channel's plane plus the
     * position in it */
    const int base = (int)(p % (size_t)l->in.c) * plane_in;
    pool_plane(mp, x + p * plane_in, y + p * plane_out, mp->argmax + p * plane_out, base);
  }
  return 0;
}

static void maxpool_backward(hvd_nn__layer *l, const float *x, const float *y, const float *dy,
                             float *dx, int batch) {
  (void)x;
  (void)y;
  if (!dx) return; /* no parameters: nothing else to compute */
  const maxpool *mp = (const maxpool *)l;
  const size_t in_size = (size_t)hvd_nn__shape_size(l->in);
  const size_t out_size = (size_t)hvd_nn__shape_size(l->out);
  memset(dx, 0, (size_t)batch * in_size * sizeof *dx);
  for (int i = 0; i < batch; i++) {
    float *dxi = dx + i * in_size;
    const float *dyi = dy + i * out_size;
    const int *from = mp->argmax + i * out_size;
    for (size_t j = 0; j < out_size; j++) dxi[from[j]] += dyi[j];
  }
}

static void maxpool_free(hvd_nn__layer *l) { free(((maxpool *)l)->argmax); }

static const hvd_nn__layer_ops maxpool_ops = {"maxpool", maxpool_forward, maxpool_backward,
                                              maxpool_free};

int hvd_nn__maxpool_new(hvd_nn__layer **lp, int index, hvd_nn__shape in, int kernel, int stride) {
  HVD_NN__CHECK(hvd_nn__check_arg(index, "maxpool", "kernel", kernel, 1));
  HVD_NN__CHECK(hvd_nn__check_arg(index, "maxpool", "stride", stride, 1));
  if (kernel > in.h || kernel > in.w)
    return hvd_nn__err(HVD_E_INVALID,
                       "layer %d (maxpool): kernel %d is larger than the input %dx%d", index,
                       kernel, in.h, in.w);
  hvd_nn__shape out = {in.c, (in.h - kernel) / stride + 1, (in.w - kernel) / stride + 1};
  maxpool *mp = (maxpool *)hvd_nn__layer_new(sizeof *mp, &maxpool_ops, index, in, out);
  if (!mp) return HVD_E_NOMEM;
  mp->kernel = kernel;
  mp->stride = stride;
  *lp = &mp->base;
  return 0;
}
