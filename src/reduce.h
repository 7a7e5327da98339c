/*
 * reduce.h -- element-wise reduction kernels, one per dtype x op.
 *
 * The collectives call these on chunks as they arrive; they know nothing
 * about ranks or the network.  float16 and bfloat16 are widened to float32,
 * combined, and rounded back to nearest even, so a reduction of two
 * half-precision values is exactly what the float32 operation would give
 * rounded once.
 */
#ifndef HVD_REDUCE_H
#define HVD_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

/* A function compiled for AVX-512, AVX2 and the baseline (SSE2 on
 * x86-64); the loader picks the best the CPU has when the library is
 * loaded (gcc's function multiversioning, an ifunc), so one binary runs
 * everywhere and still uses the widest vectors there are.  The clones
 * compute the same bits: element-wise IEEE operations, no contraction into
 * FMAs (ISO C, -ffp-contract=off), no reassociation. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) /* TSan instruments the resolver, which runs before TSan */
#define HVD_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HVD_MULTIVERSION
#endif

/* 1 if dtype is one of hvd_dtype's values, else 0. */
int hvd__dtype_valid(int dtype);

/* 1 if op is one of hvd_op's values, else 0. */
int hvd__op_valid(int op);

/* Checks that `op` can reduce `dtype`: HVD_E_INVALID for an unknown
 * dtype/op, HVD_E_UNSUPPORTED for HVD_AVERAGE on HVD_BOOL and for
 * HVD_ADASUM on anything but float32/float64, with a message naming both.
 * HVD_ADASUM passes here but is no element-wise kernel: hvd__reduce does
 * nothing with it (coll/adasum.c reduces whole vectors). */
int hvd__reduce_check(hvd_dtype dtype, hvd_op op);

/* inout[i] = inout[i] (op) in[i] for i < count.  HVD_AVERAGE accumulates
 * like HVD_SUM here; the division happens once, in hvd__reduce_average().
 * MIN/MAX of equal values (-0 and +0) keep inout's.  inout == in is
 * allowed; buffers need no alignment.  The caller has checked the pair
 * with hvd__reduce_check(). */
void hvd__reduce(void *inout, const void *in, size_t count, hvd_dtype dtype, hvd_op op);

/* buf[i] = buf[i] / divisor: the last step of HVD_AVERAGE.  Floats divide
 * (half types in float32, rounded once); integers divide exactly, rounding
 * toward zero.  divisor >= 1. */
void hvd__reduce_average(void *buf, size_t count, hvd_dtype dtype, int divisor);

/* Checks a prescale/postscale factor for dtype: 1.0 always passes; other
 * finite factors only on floating-point dtypes (HVD_E_UNSUPPORTED
 * otherwise, HVD_E_INVALID for inf/NaN). */
int hvd__scale_check(hvd_dtype dtype, double factor);

/* buf[i] *= factor with Horovod's arithmetic: float32, float16 and bfloat16
 * in float with the factor rounded to float first, float64 in double,
 * integers in double and back toward zero (saturating). */
void hvd__reduce_scale(void *buf, size_t count, hvd_dtype dtype, double factor);

/* IEEE binary16 <-> binary32 and bfloat16 <-> binary32, round to nearest
 * even, NaN stays NaN (quiet), infinities and subnormals exact. */
float hvd__half_to_float(uint16_t h);
uint16_t hvd__float_to_half(float f);
float hvd__bf16_to_float(uint16_t b);
uint16_t hvd__float_to_bf16(float f);

/* The same conversions over n elements, bit for bit, written so that the
 * compiler vectorises them: the kernels convert whole blocks with these
 * (and a SIMD build can replace them, e.g. with F16C). */
void hvd__half_to_float_n(float *dst, const uint16_t *src, size_t n);
void hvd__float_to_half_n(uint16_t *dst, const float *src, size_t n);
void hvd__bf16_to_float_n(float *dst, const uint16_t *src, size_t n);
void hvd__float_to_bf16_n(uint16_t *dst, const float *src, size_t n);

#endif /* HVD_REDUCE_H */
