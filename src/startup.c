/*
 * startup.c -- the job's communicator, assembled once for hvd_init and
 * hvd-bench --direct (startup.h).
 */
#include "startup.h"

#include <string.h>
#include <strings.h>

#include "coll/coll.h"
#include "env.h"
#include "mpi_controller.h"

int hvd__startup_cpu_operations(int *mpi) {
  const char *v = hvd__param_raw(HVD_P_CPU_OPERATIONS);
  *mpi = v && strcasecmp(v, "mpi") == 0;
  if (v && !*mpi && strcasecmp(v, "gloo") != 0)
    return hvd__err(HVD_E_ENV, "HOROVOD_CPU_OPERATIONS='%s': expected mpi or gloo", v);
  if (*mpi && !hvd__mpi_built())
    return hvd__err(HVD_E_ENV, "HOROVOD_CPU_OPERATIONS=mpi: this hvd was built without MPI "
                    "(HVD_WITH_MPI=OFF); unset it or set it to gloo");
  return 0;
}

int hvd__startup_comm(hvd_comm *c, const hvd_job *job, hvd_transport *xport, int cpu_mpi) {
  hvd_ar_algo algo = HVD_AR_AUTO;
  int hierarchical = 0, hier_allgather = 0;
  int rc = hvd__allreduce_algo_env(&algo);
  if (rc == 0) rc = hvd__param_bool(HVD_P_HIERARCHICAL_ALLREDUCE, &hierarchical);
  if (rc == 0) rc = hvd__param_bool(HVD_P_HIERARCHICAL_ALLGATHER, &hier_allgather);
  int init = hvd__comm_init(c, job->rank, job->size, xport); /* owns xport from here */
  if (rc == 0) rc = init;
  c->allreduce_algo = (int)algo;   /* hvd__startup_agree makes rank 0's win */
  c->hierarchical = hierarchical;  /* likewise; then builds the hierarchy */
  c->hier_allgather = hier_allgather;
  c->place = (hvd_place){job->local_rank, job->local_size, job->cross_rank, job->cross_size};
  if (rc == 0 && cpu_mpi) rc = hvd__mpi_ops_attach(c);
  return rc;
}

int hvd__startup_agree(hvd_comm *c, int tunable) {
  uint64_t v[3] = {(uint64_t)c->allreduce_algo, (uint64_t)c->hierarchical,
                   (uint64_t)c->hier_allgather};
  HVD__CHECK(hvd__broadcast(c, v, sizeof v, 0));
  c->allreduce_algo = (int)v[0];
  c->hierarchical = v[1] != 0;
  c->hier_allgather = v[2] != 0;
  c->hier_tunable = tunable;
  return hvd__hier_setup(c);
}
