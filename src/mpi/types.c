/*
 * types.c -- hvd's dtypes and ops as MPI's (mpi_int.h).
 *
 * Where MPI's own operation computes what hvd's does, bit for bit, it is
 * used: SUM and PRODUCT of 32- and 64-bit integers (two's complement
 * wrap-around) and of float32/float64 (IEEE addition and multiplication
 * commute exactly), MIN and MAX of integers.  (Not SUM of 8- and 16-bit
 * integers: Open MPI 4.1's vectorised kernels saturate them instead of
 * wrapping around.)  Everywhere else MPI gets a user-defined op that
 * runs reduce.c's kernel, so the semantics are hvd's: float16 and
 * bfloat16 widen to float32, combine and round once (as Horovod's MPI ops
 * for them do); MIN/MAX of floats propagate NaN; bool is logical or/and.
 * Those of MIN and MAX are declared non-commutative -- which of -0 and +0,
 * or of two NaNs, survives depends on the order -- so MPI reduces them
 * in one order and every rank gets the same bits.
 *
 * float16, bfloat16 and bool travel as datatypes of their own (2, 2 and 1
 * bytes), so a user op knows which kernel to run from the datatype it is
 * handed.
 */
#include "reduce.h"
#include "mpi_int.h"

enum { OP_SUM, OP_PRODUCT, OP_MIN, OP_MAX, N_OPS };

static struct {
  int made;
  MPI_Datatype f16, bf16, boolean;
  MPI_Op ops[N_OPS];
} t = {0, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL,
       {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

static hvd_dtype dtype_of(MPI_Datatype d) {
  if (d == t.f16) return HVD_FLOAT16;
  if (d == t.bf16) return HVD_BFLOAT16;
  if (d == t.boolean) return HVD_BOOL;
  if (d == MPI_UINT8_T) return HVD_UINT8;
  if (d == MPI_INT8_T) return HVD_INT8;
  if (d == MPI_UINT16_T) return HVD_UINT16;
  if (d == MPI_INT16_T) return HVD_INT16;
  return d == MPI_DOUBLE ? HVD_FLOAT64 : HVD_FLOAT32;
}

/* MPI's rule: inout[i] = in[i] (op) inout[i]. */
static void run(void *in, void *inout, int *len, MPI_Datatype *d, hvd_op op) {
  hvd__reduce(inout, in, (size_t)*len, dtype_of(*d), op);
}

static void op_sum(void *in, void *inout, int *len, MPI_Datatype *d) { run(in, inout, len, d, HVD_SUM); }
static void op_product(void *in, void *inout, int *len, MPI_Datatype *d) { run(in, inout, len, d, HVD_PRODUCT); }
static void op_min(void *in, void *inout, int *len, MPI_Datatype *d) { run(in, inout, len, d, HVD_MIN); }
static void op_max(void *in, void *inout, int *len, MPI_Datatype *d) { run(in, inout, len, d, HVD_MAX); }

static int make(void) {
  static MPI_User_function *const fns[N_OPS] = {op_sum, op_product, op_min, op_max};
  static const int commute[N_OPS] = {1, 1, 0, 0};
  if (t.made) return 0;
  int rc = MPI_Type_contiguous(2, MPI_BYTE, &t.f16);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t.f16);
  if (rc == MPI_SUCCESS) rc = MPI_Type_contiguous(2, MPI_BYTE, &t.bf16);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t.bf16);
  if (rc == MPI_SUCCESS) rc = MPI_Type_contiguous(1, MPI_BYTE, &t.boolean);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t.boolean);
  for (int i = 0; rc == MPI_SUCCESS && i < N_OPS; i++) rc = MPI_Op_create(fns[i], commute[i], &t.ops[i]);
  t.made = 1; /* even half made: hvd__mpi_types_free() takes what there is */
  return rc == MPI_SUCCESS ? 0 : hvd__mpi_fail(rc, "creating hvd's MPI datatypes and ops");
}

int hvd__mpi_type(hvd_dtype dtype, MPI_Datatype *type) {
  HVD__CHECK(make());
  switch (dtype) {
    case HVD_UINT8: *type = MPI_UINT8_T; break;
    case HVD_INT8: *type = MPI_INT8_T; break;
    case HVD_UINT16: *type = MPI_UINT16_T; break;
    case HVD_INT16: *type = MPI_INT16_T; break;
    case HVD_INT32: *type = MPI_INT32_T; break;
    case HVD_INT64: *type = MPI_INT64_T; break;
    case HVD_FLOAT16: *type = t.f16; break;
    case HVD_BFLOAT16: *type = t.bf16; break;
    case HVD_FLOAT32: *type = MPI_FLOAT; break;
    case HVD_FLOAT64: *type = MPI_DOUBLE; break;
    case HVD_BOOL: *type = t.boolean; break;
    default: return hvd__err(HVD_E_INVALID, "dtype %d has no MPI datatype", (int)dtype);
  }
  return 0;
}

/* MPI's own op for an integer or float32/64 reduction where it is hvd's. */
static MPI_Op builtin(hvd_dtype dtype, hvd_op op) {
  int integer = dtype <= HVD_INT64, ieee = dtype == HVD_FLOAT32 || dtype == HVD_FLOAT64;
  int wide = dtype == HVD_INT32 || dtype == HVD_INT64 || ieee;
  if (wide && (op == HVD_SUM || op == HVD_AVERAGE)) return MPI_SUM;
  if ((integer || ieee) && op == HVD_PRODUCT) return MPI_PROD;
  if (integer && op == HVD_MIN) return MPI_MIN;
  if (integer && op == HVD_MAX) return MPI_MAX;
  return MPI_OP_NULL;
}

int hvd__mpi_op(hvd_dtype dtype, hvd_op op, MPI_Datatype *type, MPI_Op *mop) {
  HVD__CHECK(hvd__mpi_type(dtype, type));
  *mop = builtin(dtype, op);
  if (*mop != MPI_OP_NULL) return 0;
  switch (op) {
    case HVD_SUM:
    case HVD_AVERAGE: *mop = t.ops[OP_SUM]; break;
    case HVD_PRODUCT: *mop = t.ops[OP_PRODUCT]; break;
    case HVD_MIN: *mop = t.ops[OP_MIN]; break;
    case HVD_MAX: *mop = t.ops[OP_MAX]; break;
    default: return hvd__err(HVD_E_UNSUPPORTED, "%s has no MPI op", hvd_op_name(op));
  }
  return 0;
}

void hvd__mpi_types_free(void) {
  if (!t.made) return;
  MPI_Datatype *types[] = {&t.f16, &t.bf16, &t.boolean};
  for (int i = 0; i < 3; i++)
    if (*types[i] != MPI_DATATYPE_NULL) MPI_Type_free(types[i]);
  for (int i = 0; i < N_OPS; i++)
    if (t.ops[i] != MPI_OP_NULL) MPI_Op_free(&t.ops[i]);
  t.made = 0;
}
