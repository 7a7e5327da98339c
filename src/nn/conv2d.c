/*
 * conv2d.c -- 2-D convolution (cross-correlation, as torch.nn.Conv2d) with
 * square kernels, a stride and zero padding.
 *
 * Each sample is lowered with im2col: column (oy, ox) of a matrix of
 * in_c * k * k rows holds the input values under the kernel at output
 * position (oy, ox), zeros where the kernel hangs over the padding.  The
 * convolution is then the product W (out_c x in_c*k*k) times that matrix,
 * one cblas_sgemm, which writes the output in NCHW order directly.
 * Backward uses the same matrix for d(W) and goes back from the gradient
 * of the matrix to d(x) with col2im, which adds each entry into the input
 * position it was copied from.  Both walk the same index mapping (walk()).
 *
 * The columns are rebuilt in backward rather than kept from forward: that
 * is cheap beside the products and keeps the memory at one sample's.
 */
#include <cblas.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

typedef struct {
  hvd_nn__layer base;
  int kernel, stride, padding;
  int rows;   /* in_c * k * k: the length of a column, the width of W */
  int cols;   /* out_h * out_w: output positions */
  float *col; /* rows x cols, for one sample (and its gradient in backward) */
} conv2d;

/* The output positions o in [0, n_out) whose input position o * stride +
 * off falls in [0, n_in), as [*lo, *hi). */
static void inside(int off, int stride, int n_in, int n_out, int *lo, int *hi) {
  *lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  *hi = n_in - 1 - off < 0 ? 0 : (n_in - 1 - off) / stride + 1;
  if (*hi > n_out) *hi = n_out;
  if (*lo > *hi) *lo = *hi;
}

enum { IM2COL, COL2IM };

/* The one mapping between one sample's image and its columns: im2col
 * copies image values into the columns (zeros over the padding), col2im
 * adds the columns back into the image.  Inlined with a constant dir, so
 * each direction compiles to its own loop. */
static inline void walk(const conv2d *cv, float *img, float *col, int dir) {
  const hvd_nn__shape in = cv->base.in, out = cv->base.out;
  const int k = cv->kernel, s = cv->stride, p = cv->padding;
  for (int c = 0; c < in.c; c++) {
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++, col += cv->cols) {
        int ylo, yhi, xlo, xhi;
        inside(ky - p, s, in.h, out.h, &ylo, &yhi);
        inside(kx - p, s, in.w, out.w, &xlo, &xhi);
        if (dir == IM2COL && (ylo > 0 || yhi < out.h || xlo > 0 || xhi < out.w))
          memset(col, 0, (size_t)cv->cols * sizeof *col);
        for (int oy = ylo; oy < yhi; oy++) {
          float *crow = col + (ptrdiff_t)oy * out.w;
          /* img[at + ox * s] is the input under kernel tap (ky, kx) at (oy, ox) */
          ptrdiff_t at = ((ptrdiff_t)c * in.h + oy * s + ky - p) * in.w + kx - p;
          /* stride 1, the common case, separately: contiguous runs, which
           * the compiler vectorises */
          if (dir == IM2COL && s == 1)
            for (int ox = xlo; ox < xhi; ox++) crow[ox] = img[at + ox];
          else if (dir == IM2COL)
            for (int ox = xlo; ox < xhi; ox++) crow[ox] = img[at + (ptrdiff_t)ox * s];
          else if (s == 1)
            for (int ox = xlo; ox < xhi; ox++) img[at + ox] += crow[ox];
          else
            for (int ox = xlo; ox < xhi; ox++) img[at + (ptrdiff_t)ox * s] += crow[ox];
        }
      }
    }
  }
}

/* im2col only reads img: walk() takes it non-const to serve both ways. */
static void im2col(const conv2d *cv, const float *img, float *col) {
  walk(cv, (float *)img, col, IM2COL);
}

static void col2im(const conv2d *cv, float *img, float *col) { walk(cv, img, col, COL2IM); }

static int conv2d_forward(hvd_nn__layer *l, const float *x, float *y, int batch) {
  const conv2d *cv = (const conv2d *)l;
  const int out_c = l->out.c;
  const size_t in_size = (size_t)hvd_nn__shape_size(l->in);
  const size_t out_size = (size_t)out_c * (size_t)cv->cols;
  const float *w = l->params[HVD_NN__WEIGHT].value, *b = l->params[HVD_NN__BIAS].value;
  for (int i = 0; i < batch; i++) {
    float *yi = y + i * out_size;
    im2col(cv, x + i * in_size, cv->col);
    for (int o = 0; o < out_c; o++)
      for (int j = 0; j < cv->cols; j++) yi[(size_t)o * cv->cols + j] = b[o];
    /* y_i += W col */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out_c, cv->cols, cv->rows, 1.0f, w,
                cv->rows, cv->col, cv->cols, 1.0f, yi, cv->cols);
  }
  return 0;
}

static void conv2d_backward(hvd_nn__layer *l, const float *x, const float *y, const float *dy,
                            float *dx, int batch) {
  (void)y;
  const conv2d *cv = (const conv2d *)l;
  const int out_c = l->out.c;
  const size_t in_size = (size_t)hvd_nn__shape_size(l->in);
  const size_t out_size = (size_t)out_c * (size_t)cv->cols;
  hvd_nn_param *w = &l->params[HVD_NN__WEIGHT], *b = &l->params[HVD_NN__BIAS];
  for (int i = 0; i < batch; i++) {
    const float *dyi = dy + i * out_size;
    im2col(cv, x + i * in_size, cv->col);
    /* dW += dy_i col^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out_c, cv->rows, cv->cols, 1.0f, dyi,
                cv->cols, cv->col, cv->cols, 1.0f, w->grad, cv->rows);
    /* db += dy_i summed over positions */
    for (int o = 0; o < out_c; o++) {
      const float *row = dyi + (size_t)o * cv->cols;
      float sum = 0.0f;
      for (int j = 0; j < cv->cols; j++) sum += row[j];
      b->grad[o] += sum;
    }
    if (!dx) continue;
    /* d(col) = W^T dy_i, into the columns (no longer needed), then dx_i */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cv->rows, cv->cols, out_c, 1.0f, w->value,
                cv->rows, dyi, cv->cols, 0.0f, cv->col, cv->cols);
    float *dxi = dx + i * in_size;
    memset(dxi, 0, in_size * sizeof *dxi);
    col2im(cv, dxi, cv->col);
  }
}

static void conv2d_free(hvd_nn__layer *l) { free(((conv2d *)l)->col); }

static const hvd_nn__layer_ops conv2d_ops = {"conv2d", conv2d_forward, conv2d_backward,
                                             conv2d_free};

/* Output size along one axis, or an error when the kernel does not fit. */
static int out_len(int index, const char *axis, int n, int kernel, int stride, int padding,
                   int *len) {
  long long padded = (long long)n + 2LL * padding;
  if (padded < kernel)
    return hvd_nn__err(HVD_E_INVALID,
                       "layer %d (conv2d): kernel %d is larger than the input's %s %d "
                       "with padding %d on each side",
                       index, kernel, axis, n, padding);
  long long m = (padded - kernel) / stride + 1;
  *len = m > INT_MAX ? -1 : (int)m;
  return 0;
}

int hvd_nn__conv2d_new(hvd_nn__layer **lp, int index, hvd_nn__shape in, int out_channels,
                       int kernel, int stride, int padding) {
  HVD_NN__CHECK(hvd_nn__check_arg(index, "conv2d", "out_channels", out_channels, 1));
  HVD_NN__CHECK(hvd_nn__check_arg(index, "conv2d", "kernel", kernel, 1));
  HVD_NN__CHECK(hvd_nn__check_arg(index, "conv2d", "stride", stride, 1));
  HVD_NN__CHECK(hvd_nn__check_arg(index, "conv2d", "padding", padding, 0));
  hvd_nn__shape out = {out_channels, 0, 0};
  HVD_NN__CHECK(out_len(index, "height", in.h, kernel, stride, padding, &out.h));
  HVD_NN__CHECK(out_len(index, "width", in.w, kernel, stride, padding, &out.w));
  const int rows = hvd_nn__imul(hvd_nn__imul(in.c, kernel), kernel);
  const int cols = hvd_nn__imul(out.h, out.w);
  if (hvd_nn__shape_size(out) < 0 || hvd_nn__imul(rows, cols) < 0 ||
      hvd_nn__imul(rows, out_channels) < 0)
    return hvd_nn__err(HVD_E_INVALID, "layer %d (conv2d): sizes too large", index);

  conv2d *cv = (conv2d *)hvd_nn__layer_new(sizeof *cv, &conv2d_ops, index, in, out);
  if (!cv) return HVD_E_NOMEM;
  cv->kernel = kernel;
  cv->stride = stride;
  cv->padding = padding;
  cv->rows = rows;
  cv->cols = cols;
  cv->base.fan_in = rows;
  cv->col = malloc((size_t)rows * (size_t)cols * sizeof *cv->col);
  int rc = cv->col
               ? 0
               : hvd_nn__err(HVD_E_NOMEM, "layer %d (conv2d): out of memory for %d x %d columns",
                             index, rows, cols);
  if (rc == 0)
    rc = hvd_nn__layer_alloc_params(&cv->base, (size_t)rows * (size_t)out_channels,
                                    (size_t)out_channels);
  if (rc < 0) {
    hvd_nn__layer_free(&cv->base);
    return rc;
  }
  *lp = &cv->base;
  return 0;
}
