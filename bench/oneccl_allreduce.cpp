/*
 * oneccl_allreduce.cpp -- Intel oneCCL's allreduce (float32 sum, in place,
 * ccl::allreduce on host memory) for bench/peers, timed by
 * allreduce_loop.h exactly as mpi_allreduce.c times MPI_Allreduce and
 * hvd-bench hvd_allreduce.
 *
 * Run under hvdrun (HOROVOD_RANK, HOROVOD_SIZE): rank 0 makes oneCCL's main
 * key-value store and writes its address to --kvs FILE; the others wait for
 * the file and join it.
 *
 * Build (the oneccl and oneccl-devel wheels, bench/peers-venv.sh):
 *   g++ -O2 -I$VENV/include -o oneccl_allreduce oneccl_allreduce.cpp \
 *       -L$VENV/lib -Wl,-rpath,$VENV/lib -lccl
 */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <oneapi/ccl.hpp>

#include "allreduce_loop.h"

static ccl::communicator *comm;

static void sum(float *buf, size_t n) {
  ccl::allreduce(buf, buf, n, ccl::datatype::float32, ccl::reduction::sum, *comm).wait();
}

static double max(double v) {
  ccl::allreduce(&v, &v, 1, ccl::datatype::float64, ccl::reduction::max, *comm).wait();
  return v;
}

static void abort_job(void) { std::abort(); }

/* Rank 0's main store, its address handed over through `path`. */
static std::shared_ptr<ccl::kvs> kvs_at(const char *path, int rank) {
  ccl::kvs::address_type addr;
  if (rank == 0) {
    auto kvs = ccl::create_main_kvs();
    addr = kvs->get_address();
    std::string tmp = std::string(path) + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(addr.data(), 1, addr.size(), f) != addr.size() || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), path) != 0) {
      std::perror(path);
      std::exit(1);
    }
    return kvs;
  }
  FILE *f;
  while (!(f = std::fopen(path, "rb"))) usleep(10000);
  if (std::fread(addr.data(), 1, addr.size(), f) != addr.size()) std::exit(1);
  std::fclose(f);
  return ccl::create_kvs(addr);
}

int main(int argc, char **argv) {
  const char *path = NULL, *r = std::getenv("HOROVOD_RANK"), *s = std::getenv("HOROVOD_SIZE");
  if (!r || !s) r = std::getenv("PMI_RANK"), s = std::getenv("PMI_SIZE"); /* Intel MPI's mpiexec */
  for (int i = 1; i + 1 < argc; i++)
    if (std::strcmp(argv[i], "--kvs") == 0) path = argv[i + 1];
  if (!path || !r || !s) {
    std::fprintf(stderr, "usage: hvdrun -np N oneccl_allreduce --kvs FILE [--min-bytes B] [--max-bytes B]\n");
    return 2;
  }
  peer_lib p = {std::atoi(r), std::atoi(s), sum, max, abort_job};
  ccl::init();
  auto kvs = kvs_at(path, p.rank);
  ccl::communicator c = ccl::create_communicator(p.size, p.rank, kvs);
  comm = &c;
  int rc = allreduce_loop(&p, argc, argv);
  comm = NULL;
  return rc;
}
