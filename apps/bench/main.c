/*
 * main.c -- hvd-bench: collective time, algbw and busbw per size.
 *
 *   hvdrun -np 4 hvd-bench [--op allreduce|...|all] [--min-bytes 8] [--max-bytes 256M]
 *                          [--direct] [--csv] [--steps] [--transport shm|tcp] [--names K]
 *                          [--algorithm auto|ring|recursive_doubling|rabenseifner|shm]
 *
 * First BENCH_SETTLE_S of untimed allreduces (bench/timing.h).  Per size:
 * warm-up runs, then --batches batches of --iters runs each.  A
 * batch's time is the mean over its runs of the time spent inside the
 * collective (filling inputs and checking outputs happen between runs,
 * untimed), and its slowest rank's mean counts; the reported time is the
 * median over batches, robust to a noisy neighbour.  Every timed run's
 * output is checked on every rank.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../../bench/timing.h"
#include "api_hooks.h"
#include "bench.h"
#include "coll/coll.h"
#include "startup.h"

typedef struct {
  int ops[OP__COUNT]; /* which to run */
  size_t min_bytes, max_bytes;
  int iters, batches, warmup; /* iters 0: chosen per size */
  int direct, csv, steps;
  int names;             /* --names */
  const char *algorithm; /* HOROVOD_ALLREDUCE_ALGORITHM's value */
  const char *transport; /* --transport; NULL: the library's choice */
  const char *used;      /* the transport actually built */
} options;

/* "8", "64K", "256M", "1G" -> bytes; 0 when malformed. */
static size_t parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return 0;
  int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (shift) end++;
  if (*end || v == 0 || v > (1ull << (40 - shift))) return 0;
  return (size_t)(v << shift);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: hvdrun -np N hvd-bench [options]\n"
          "  --op NAME          allreduce, broadcast, allgather, reducescatter, alltoall or\n"
          "                     all (default); repeat to pick several\n"
          "  --min-bytes SIZE   smallest size (8); K, M, G suffixes\n"
          "  --max-bytes SIZE   largest size (256M); sizes are the powers of two between\n"
          "  --iters N          runs per batch (default: more for small sizes)\n"
          "  --batches N        batches per size; the median is reported (5)\n"
          "  --warmup N         untimed runs per size (2)\n"
          "  --direct           the collective layer alone, without the engine's negotiation\n"
          "  --names K          the allreduce through the engine under K names in turn, as\n"
          "                     a loop reducing a loss and its metrics (1; at most 8)\n"
          "  --csv              one line per size: op,bytes,time_us,algbw_GBps,busbw_GBps\n"
          "  --steps            also the rounds rank 0 made per run (sendrecvs and\n"
          "                     shared-memory syncs, negotiation included): a column\n"
          "                     steps, after the others\n"
          "  --transport NAME   shm (shared memory: every rank on one host) or tcp;\n"
          "                     default: shm where it can be used, else tcp\n"
          "  --algorithm NAME   allreduce algorithm: auto (by size and transport), ring,\n"
          "                     recursive_doubling, rabenseifner or shm (shared-memory\n"
          "                     windows);"
          "                     sets HOROVOD_ALLREDUCE_ALGORITHM\n");
}

/* --transport: HOROVOD_SHM_DISABLE picks it for the library; shm on ranks
 * that are not all on one host is an error, not a silent fallback. */
static int set_transport(options *o, const char *name) {
  if (strcmp(name, "shm") == 0 || strcmp(name, "tcp") == 0) {
    o->transport = name;
    return 0;
  }
  fprintf(stderr, "hvd-bench: --transport '%s': expected shm or tcp\n", name);
  return -1;
}

/* The library's own parser decides, so the flag takes what the variable
 * takes; its message names the variable, ours the flag. */
static int set_algorithm(options *o, const char *name) {
  hvd_ar_algo a;
  if (hvd__allreduce_algo_parse(name, &a) == 0) {
    o->algorithm = hvd__allreduce_algo_name(a);
    return 0;
  }
  fprintf(stderr,
          "hvd-bench: --algorithm '%s': expected auto, ring, recursive_doubling, rabenseifner "
          "or shm\n",
          name);
  return -1;
}

static int parse_int(const char *flag, const char *s, int min, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end || v < min || v > 1000000) {
    fprintf(stderr, "hvd-bench: %s '%s': expected an integer >= %d\n", flag, s, min);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int set_op(options *o, const char *name) {
  bench_op op;
  if (strcmp(name, "all") == 0) {
    for (int i = 0; i < OP__COUNT; i++) o->ops[i] = 1;
  } else if (bench_op_parse(name, &op) == 0) {
    o->ops[op] = 1;
  } else {
    fprintf(stderr, "hvd-bench: --op '%s': expected allreduce, broadcast, allgather, "
            "reducescatter, alltoall or all\n", name);
    return -1;
  }
  return 0;
}

/* 0: run; 1: --help shown; -1: bad usage. */
static int parse_args(options *o, int argc, char **argv) {
  static const struct option longopts[] = {
      {"op", required_argument, 0, 'o'},        {"min-bytes", required_argument, 0, 'b'},
      {"max-bytes", required_argument, 0, 'e'}, {"iters", required_argument, 0, 'n'},
      {"batches", required_argument, 0, 'B'},   {"warmup", required_argument, 0, 'w'},
      {"direct", no_argument, 0, 'd'},          {"csv", no_argument, 0, 'c'},
      {"steps", no_argument, 0, 's'},          {"names", required_argument, 0, 'N'},
      {"transport", required_argument, 0, 't'}, {"algorithm", required_argument, 0, 'a'},
      {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
  *o = (options){.min_bytes = 8, .max_bytes = 256u << 20, .batches = 5, .warmup = 2, .names = 1};
  int any_op = 0, c, rc = 0;
  while (rc == 0 && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case 'o': rc = set_op(o, optarg); any_op = 1; break;
      case 'b': rc = (o->min_bytes = parse_size(optarg)) ? 0 : -1; break;
      case 'e': rc = (o->max_bytes = parse_size(optarg)) ? 0 : -1; break;
      case 'n': rc = parse_int("--iters", optarg, 1, &o->iters); break;
      case 'B': rc = parse_int("--batches", optarg, 1, &o->batches); break;
      case 'w': rc = parse_int("--warmup", optarg, 0, &o->warmup); break;
      case 'd': o->direct = 1; break;
      case 'c': o->csv = 1; break;
      case 's': o->steps = 1; break;
      case 'N': rc = parse_int("--names", optarg, 1, &o->names); break;
      case 't': rc = set_transport(o, optarg); break;
      case 'a': rc = set_algorithm(o, optarg); break;
      case 'h': usage(stdout); return 1;
      default: rc = -1;
    }
    if (rc < 0 && (c == 'b' || c == 'e'))
      fprintf(stderr, "hvd-bench: bad size '%s' (e.g. 8, 64K, 256M)\n", optarg);
  }
  if (rc == 0 && optind < argc) {
    fprintf(stderr, "hvd-bench: unexpected argument '%s'\n", argv[optind]);
    rc = -1;
  }
  if (rc == 0 && o->names > BENCH_NAMES_MAX) {
    fprintf(stderr, "hvd-bench: --names %d: at most %d\n", o->names, BENCH_NAMES_MAX);
    rc = -1;
  }
  if (rc == 0 && o->names > 1 && o->direct) {
    fprintf(stderr, "hvd-bench: --names needs the engine (the collective layer has no names)\n");
    rc = -1;
  }
  if (rc == 0 && o->min_bytes > o->max_bytes) {
    fprintf(stderr, "hvd-bench: --min-bytes is larger than --max-bytes\n");
    rc = -1;
  }
  if (rc < 0) usage(stderr);
  if (!any_op) set_op(o, "all");
  return rc;
}

static int iters_for(const options *o, size_t bytes) {
  return o->iters ? o->iters : bench_iters(bytes);
}

/* The slowest rank's value. */
static int max_over_ranks(hvd_comm *direct, double *v) {
  if (direct) return hvd__allreduce(direct, v, v, 1, HVD_FLOAT64, HVD_MAX);
  return hvd_allreduce(v, v, 1, HVD_FLOAT64, HVD_MAX, "bench.time");
}

/* The rounds this rank has made so far (comm.h's steps). */
static uint64_t steps_now(const bench_case *c) {
  return c->direct ? c->direct->steps : hvd__steps();
}

/* Runs the case `runs` times; adds the time inside the collective to
 * *spent and the rounds to *steps.  A wrong output fails with its
 * description. */
static int timed_runs(const bench_case *c, int runs, double *spent, uint64_t *steps) {
  for (int i = 0; i < runs; i++) {
    bench_fill(c);
    uint64_t s0 = steps_now(c);
    double t0 = now_s();
    int rc = bench_run(c);
    double t1 = now_s();
    *steps += steps_now(c) - s0;
    if (rc < 0) {
      fprintf(stderr, "hvd-bench: %s of %zu bytes failed on rank %d: %s\n",
              bench_op_name(c->op), c->bytes, c->rank, hvd_last_error());
      return rc;
    }
    char why[256];
    if (bench_check(c, why, sizeof why) < 0) {
      fprintf(stderr, "hvd-bench: %s of %zu bytes: wrong result on rank %d: %s\n",
              bench_op_name(c->op), c->bytes, c->rank, why);
      return HVD_E_MISMATCH;
    }
    *spent += t1 - t0;
  }
  return 0;
}

/* The median over batches of the slowest rank's mean time per run, and
 * this rank's rounds per run. */
static int measure(const options *o, const bench_case *c, double *seconds, double *steps) {
  double spent = 0.0, batch[64];
  uint64_t rounds = 0;
  int batches = o->batches < 64 ? o->batches : 64, iters = iters_for(o, c->bytes);
  int rc = timed_runs(c, o->warmup, &spent, &rounds);
  rounds = 0;
  for (int b = 0; rc == 0 && b < batches; b++) {
    spent = 0.0;
    rc = timed_runs(c, iters, &spent, &rounds);
    batch[b] = spent / iters;
    if (rc == 0) rc = max_over_ranks(c->direct, &batch[b]);
  }
  if (rc < 0) return rc;
  qsort(batch, (size_t)batches, sizeof batch[0], by_value);
  *seconds = batch[batches / 2];
  *steps = (double)rounds / ((double)batches * iters);
  return 0;
}

static void print_header(const options *o, bench_op op, int n) {
  if (o->csv) return;
  const char *algo = getenv("HOROVOD_ALLREDUCE_ALGORITHM");
  const char *ops = getenv("HOROVOD_CPU_OPERATIONS");
  int mpi = !o->direct && ops && strcasecmp(ops, "mpi") == 0;
  printf("# hvd-bench %s, np %d, %s, transport %s, algorithm %s\n", bench_op_name(op), n,
         o->direct ? "collective layer only (--direct)" : "public calls through the engine",
         o->used, mpi ? "MPI's (HOROVOD_CPU_OPERATIONS=mpi)" : algo && *algo ? algo : "auto");
  printf("# %12s %12s %12s %12s%s\n", "bytes", "time_us", "algbw_GBps", "busbw_GBps",
         o->steps ? "        steps" : "");
}

static void print_row(const options *o, bench_op op, size_t bytes, double s, double steps,
                      int n) {
  double algbw = (double)bytes / s / 1e9, busbw = algbw * bench_bus_factor(op, n);
  if (o->csv)
    printf("%s,%zu,%.2f,%.4f,%.4f", bench_op_name(op), bytes, s * 1e6, algbw, busbw);
  else
    printf("  %12zu %12.2f %12.4f %12.4f", bytes, s * 1e6, algbw, busbw);
  if (o->steps) printf(o->csv ? ",%.2f" : " %12.2f", steps);
  printf("\n");
  fflush(stdout);
}

/* bench/timing.h's BENCH_SETTLE_S, before the first measurement. */
static int settle_in(hvd_comm *direct) {
  double t0 = now_s();
  for (float done = 0; !done;) {
    done = now_s() - t0 >= BENCH_SETTLE_S;
    int rc = direct ? hvd__allreduce(direct, &done, &done, 1, HVD_FLOAT32, HVD_MAX)
                    : hvd_allreduce(&done, &done, 1, HVD_FLOAT32, HVD_MAX, "bench.settle");
    if (rc < 0) return rc;
  }
  return 0;
}

static int bench_all(const options *o, hvd_comm *direct, int rank, int n) {
  void *in = malloc(o->max_bytes), *out = malloc(o->max_bytes);
  int rc = in && out ? 0 : HVD_E_NOMEM;
  if (rc < 0) fprintf(stderr, "hvd-bench: out of memory for 2 x %zu bytes\n", o->max_bytes);
  if (rc == 0 && (rc = settle_in(direct)) < 0)
    fprintf(stderr, "hvd-bench: settling in on rank %d: %s\n", rank, hvd_last_error());
  if (rc == 0 && o->csv && rank == 0)
    printf("op,bytes,time_us,algbw_GBps,busbw_GBps%s\n", o->steps ? ",steps" : "");
  for (int op = 0; rc == 0 && op < OP__COUNT; op++) {
    if (!o->ops[op]) continue;
    if (rank == 0) print_header(o, (bench_op)op, n);
    for (size_t bytes = o->min_bytes; rc == 0 && bytes <= o->max_bytes; bytes *= 2) {
      bench_case c = {(bench_op)op, bytes, rank, n, direct, in, out, o->names};
      double s, steps;
      rc = measure(o, &c, &s, &steps);
      if (rc == 0 && rank == 0) print_row(o, (bench_op)op, bytes, s, steps, n);
    }
  }
  free(in);
  free(out);
  return rc;
}

/* --transport shm asked for what the library could not build. */
static int check_transport(const options *o) {
  if (!o->transport || strcmp(o->used, "none") == 0 || strcmp(o->transport, o->used) == 0)
    return 0;
  fprintf(stderr, "hvd-bench: --transport %s: unavailable, the job uses %s (shm needs every "
          "rank on one host)\n", o->transport, o->used);
  return -1;
}

/* --direct: a communicator of our own, with no engine beside it, set up
 * as hvd_init sets up its own (startup.h) but always with hvd's own
 * collectives (HOROVOD_CPU_OPERATIONS=mpi is the engine's). */
static int run_direct(options *o) {
  hvd_job job;
  hvd_transport *xport = NULL;
  hvd_comm comm;
  int rc = hvd__job_from_env(&job);
  if (rc == 0) rc = hvd__bootstrap(&job, &xport);
  if (rc == 0) {
    rc = hvd__startup_comm(&comm, &job, xport, 0);
    if (rc == 0) rc = hvd__startup_agree(&comm, 0);
    if (rc < 0) hvd__comm_destroy(&comm);
  }
  if (rc < 0) {
    fprintf(stderr, "hvd-bench: starting: %s\n", hvd_last_error());
    return 1;
  }
  o->used = xport ? xport->ops->name : "none";
  rc = check_transport(o);
  if (rc == 0) rc = bench_all(o, &comm, job.rank, job.size);
  if (rc == 0) rc = hvd__barrier(&comm); /* nobody leaves while others still read */
  hvd__comm_destroy(&comm);
  return rc < 0;
}

static int run_public(options *o) {
  if (hvd_init() < 0) {
    fprintf(stderr, "hvd-bench: %s\n", hvd_last_error());
    return 1;
  }
  o->used = hvd__transport_name();
  int rc = check_transport(o);
  if (rc == 0) rc = bench_all(o, NULL, hvd_rank(), hvd_size());
  hvd_shutdown();
  return rc < 0;
}

int main(int argc, char **argv) {
  options o;
  int parsed = parse_args(&o, argc, argv);
  if (parsed != 0) return parsed < 0 ? 2 : 0;
  /* Both paths read it: hvd_init() and run_direct(). */
  if (o.algorithm) setenv("HOROVOD_ALLREDUCE_ALGORITHM", o.algorithm, 1);
  if (o.transport && strcmp(o.transport, "tcp") == 0) setenv("HOROVOD_SHM_DISABLE", "1", 1);
  if (o.transport && strcmp(o.transport, "shm") == 0) unsetenv("HOROVOD_SHM_DISABLE");
  return o.direct ? run_direct(&o) : run_public(&o);
}
