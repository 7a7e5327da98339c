/*
 * request.h -- what a rank tells the others about a tensor it enqueued.
 *
 * A request carries exactly the fields that must agree across ranks for a
 * collective to run: its kind, dtype, element count and shape, op, root,
 * scale factors, process set, grouping and whether its buffers are in
 * host or device memory.  Buffers stay local.  For allgather
 * and alltoall the count is not negotiated (each rank may send a
 * different amount) and is always 0 in a request; what is negotiated is
 * the tensor's dimensions after the first, when the caller gave a shape.
 */
#ifndef HVD_REQUEST_H
#define HVD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

#define HVD_NAME_MAX 256 /* bytes of a tensor name, NUL included */

typedef enum {
  HVD_REQ_ALLREDUCE,
  HVD_REQ_BROADCAST,
  HVD_REQ_ALLGATHER,
  HVD_REQ_ALLTOALL,
  HVD_REQ_REDUCESCATTER,
  HVD_REQ_BARRIER,
  HVD_REQ_PSET_ADD,    /* count: number of ranks, root: hash of the sorted ranks */
  HVD_REQ_PSET_REMOVE, /* root: the set's id */
  HVD_REQ__COUNT
} hvd_req_type;

typedef struct {
  char name[HVD_NAME_MAX];
  uint8_t type;  /* hvd_req_type */
  uint8_t dtype; /* hvd_dtype */
  uint8_t op;    /* hvd_op (allreduce, reducescatter) */
  int32_t root;  /* broadcast */
  uint64_t count;
  /* Allreduce, reducescatter, broadcast: the tensor's shape (the product
   * of its ndims sizes is count).  Allgather, alltoall: the tensor's
   * shape with shape[0] 0 (each rank's first dimension is its own, and an
   * allgather whose first dimension changes from step to step still hits
   * the response cache), or 0 dims when the caller gave none.  0 dims for
   * the other collectives. */
  uint32_t ndims;
  int64_t shape[HVD_MAX_DIMS];
  double prescale, postscale;
  int32_t process_set;
  /* Grouped allreduce: tensor group_index of group_size (0 when not
   * grouped); the group is named by `name` up to its last '.'. */
  uint32_t group_size, group_index;
  /* HVD_MEM_*: the buffers are in device memory (hvd_opts.device is a
   * CUDA ordinal), to run on the staged or the NCCL path (the knob as this
   * rank read it at the call: ranks whose knobs differ are a mismatch in
   * negotiation, not two paths meeting), or in host memory.  Only this
   * is negotiated, not the ordinal: every rank may have its own GPU.  0
   * for barrier and process sets. */
  uint8_t on_device;
} hvd_request;

enum { HVD_MEM_HOST = 0, HVD_MEM_STAGED = 1, HVD_MEM_NCCL = 2 };

/* "allreduce", "broadcast", ... */
const char *hvd__req_type_name(int type);

/* 1 if a and b may run as one collective (every negotiated field equal). */
int hvd__request_equal(const hvd_request *a, const hvd_request *b);

/* 1 if the collective negotiates a shape (allreduce, reducescatter,
 * broadcast). */
int hvd__request_has_shape(int type);

/* 1 if the collective negotiates the dimensions after the first
 * (allgather, alltoall), when the caller gives a shape. */
int hvd__request_has_rows(int type);

/* Checks that shape[0..ndims) is a shape of rows (allgather, alltoall):
 * ndims 0, or 1..HVD_MAX_DIMS with shape[0] 0 and the other sizes >= 0.
 * 0, or -1 with why (at most cap bytes). */
int hvd__rows_check(const int64_t *shape, uint32_t ndims, char *why, size_t cap);

/* 1 if the collective moves tensors (not barrier, not process sets). */
int hvd__request_moves_tensors(int type);

/* Checks that shape[0..ndims) is a shape of count elements: ndims in
 * 1..HVD_MAX_DIMS, sizes >= 0, product equal to count (no overflow).
 * 0, or -1 with why (at most cap bytes) saying what is wrong. */
int hvd__shape_check(const int64_t *shape, uint32_t ndims, uint64_t count, char *why,
                     size_t cap);

/* "[17, 23, 57]" into out, cut with "...]" if it does not fit. */
void hvd__shape_print(const int64_t *shape, uint32_t ndims, char *out, size_t cap);

/* Checks the requests of one tensor from every rank that submitted it
 * (reqs[i] from rank ranks[i]).  Returns 0 if they agree; otherwise
 * HVD_E_MISMATCH with a message in Horovod's style naming the tensor, the
 * field and what each rank sent, e.g.
 *   "Mismatched allreduce tensor counts for 'grad': rank 0 sent 10,
 *    rank 1 sent 12". */
int hvd__requests_check(const hvd_request *const *reqs, const int *ranks, int n);

#endif /* HVD_REQUEST_H */
