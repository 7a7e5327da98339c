/*
 * bench.h -- hvd-bench: what its parts share.
 *
 * hvd-bench times one collective per size the way nccl-tests does:
 *   algbw = bytes / time
 *   busbw = algbw * factor, factor = 2(n-1)/n for allreduce, (n-1)/n for
 *           allgather, reducescatter and alltoall, 1 for broadcast: the
 *           bandwidth each rank's link carries in a bandwidth-optimal
 *           algorithm, comparable across job sizes and with the hardware.
 * "bytes" is nccl-tests' size: the buffer of allreduce and broadcast, the
 * gathered output of allgather, the input of reducescatter, and everything
 * one rank sends in alltoall.
 *
 * Two paths: the public blocking calls through the engine (what users
 * get; the default), or --direct, the collective layer on a communicator
 * of its own without negotiation.
 */
#ifndef HVD_BENCH_H
#define HVD_BENCH_H

#include <stddef.h>

#include "comm.h"

typedef enum { OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL,
               OP__COUNT } bench_op;

/* One timed collective of one size, with its inputs and a check. */
typedef struct {
  bench_op op;
  size_t bytes;     /* nccl-tests' size (above) */
  int rank, size;
  hvd_comm *direct; /* NULL: the public API */
  void *in, *out;   /* buffers of at least `bytes` */
  int names;        /* --names: the public allreduce's names taken in turn */
} bench_case;

/* --names: at most this many. */
#define BENCH_NAMES_MAX 8

const char *bench_op_name(bench_op op);
int bench_op_parse(const char *name, bench_op *op);
double bench_bus_factor(bench_op op, int n);

/* Writes the inputs of one run (not timed). */
void bench_fill(const bench_case *c);
/* Runs the collective once: 0 or an HVD_E_* code. */
int bench_run(const bench_case *c);
/* 0 when the output is what the inputs make, else -1 with a message in
 * why (the first wrong element, expected vs got). */
int bench_check(const bench_case *c, char *why, size_t len);

#endif
