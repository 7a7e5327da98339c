/*
 * test_bench.c -- hvd-bench's inputs and checks (apps/bench/ops.c), in a
 * job of one process: every op's output passes its check, and a single
 * wrong element anywhere fails it with a message saying which.  (The
 * multi-rank runs are tests/launcher/test_bench.py.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int setup(void **state) {
  (void)state;
  return hvd_init();
}

static int teardown(void **state) {
  (void)state;
  return hvd_shutdown();
}

static void check_op(bench_op op, size_t bytes) {
  bench_case c = {op, bytes, 0, 1, NULL, malloc(bytes), malloc(bytes), 1};
  char why[256];
  bench_fill(&c);
  assert_int_equal(bench_run(&c), 0);
  assert_int_equal(bench_check(&c, why, sizeof why), 0);

  /* Damage one byte of the output: allreduce and broadcast write `out`;
   * the others' outputs are hvd's, reached through a second run whose
   * input is damaged instead (the output copies it). */
  bench_fill(&c);
  if (op == OP_ALLREDUCE || op == OP_BROADCAST) {
    assert_int_equal(bench_run(&c), 0);
    ((unsigned char *)c.out)[bytes / 2] ^= 0x40;
  } else {
    ((unsigned char *)c.in)[bytes / 2] ^= 0x40;
    assert_int_equal(bench_run(&c), 0);
  }
  assert_int_equal(bench_check(&c, why, sizeof why), -1);
  assert_non_null(strstr(why, "expected"));
  free(c.in);
  free(c.out);
}

static void test_every_op_checks(void **state) {
  (void)state;
  static const size_t sizes[] = {8, 12, 4096, 1 << 20};
  for (int op = 0; op < OP__COUNT; op++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_op((bench_op)op, sizes[i]);
}

/* nccl-tests' bus bandwidth factors. */
static void test_bus_factors(void **state) {
  (void)state;
  assert_float_equal(bench_bus_factor(OP_ALLREDUCE, 4), 1.5, 1e-12);
  assert_float_equal(bench_bus_factor(OP_ALLGATHER, 4), 0.75, 1e-12);
  assert_float_equal(bench_bus_factor(OP_REDUCESCATTER, 2), 0.5, 1e-12);
  assert_float_equal(bench_bus_factor(OP_ALLTOALL, 8), 0.875, 1e-12);
  assert_float_equal(bench_bus_factor(OP_BROADCAST, 8), 1.0, 1e-12);
  bench_op op;
  assert_int_equal(bench_op_parse("reducescatter", &op), 0);
  assert_int_equal(op, OP_REDUCESCATTER);
  assert_int_equal(bench_op_parse("allreduc", &op), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_checks),
      cmocka_unit_test(test_bus_factors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
