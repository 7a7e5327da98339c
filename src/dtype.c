/*
 * dtype.c -- sizes and names of element types and reduction operations.
 *
 * The enums come from users who may cast any int into them, so every
 * lookup checks the range before indexing.  The comparison is done on the
 * value as unsigned: a negative value then reads as huge, and the check
 * holds whether the compiler gave the enum a signed or unsigned type.
 */
#include "common.h"
#include "reduce.h"

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {
    [HVD_UINT8] = {"uint8", 1},       [HVD_INT8] = {"int8", 1},
    [HVD_UINT16] = {"uint16", 2},     [HVD_INT16] = {"int16", 2},
    [HVD_INT32] = {"int32", 4},       [HVD_INT64] = {"int64", 8},
    [HVD_FLOAT16] = {"float16", 2},   [HVD_BFLOAT16] = {"bfloat16", 2},
    [HVD_FLOAT32] = {"float32", 4},   [HVD_FLOAT64] = {"float64", 8},
    [HVD_BOOL] = {"bool", 1},
};

static const char *const ops[] = {
    [HVD_AVERAGE] = "average", [HVD_SUM] = "sum", [HVD_ADASUM] = "adasum",
    [HVD_MIN] = "min",         [HVD_MAX] = "max", [HVD_PRODUCT] = "product",
};

int hvd__dtype_valid(int dtype) {
  return (unsigned)dtype < HVD__ARRAY_LEN(dtypes);
}

int hvd__op_valid(int op) {
  return (unsigned)op < HVD__ARRAY_LEN(ops);
}

size_t hvd_dtype_size(hvd_dtype dtype) {
  return hvd__dtype_valid((int)dtype) ? dtypes[dtype].size : 0;
}

const char *hvd_dtype_name(hvd_dtype dtype) {
  return hvd__dtype_valid((int)dtype) ? dtypes[dtype].name : "unknown";
}

const char *hvd_op_name(hvd_op op) {
  return hvd__op_valid((int)op) ? ops[op] : "unknown";
}
