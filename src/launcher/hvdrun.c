/*
 * hvdrun.c -- the launcher's entry point.
 *
 *   hvdrun -np N [-H host:slots,...] [options] prog [args...]
 *
 * starts N copies of prog as the ranks of one hvd job, on this machine
 * and over ssh (or srun, in a SLURM allocation) on others, with
 * horovodrun's flags and environment,
 * serves their rendezvous, forwards their output and tears the job down
 * when one fails.  options.c reads the command line, hosts.c reads the
 * hosts and places the ranks, addrs.c chooses where the rendezvous
 * listens, job.c runs the rest (job_elastic.c over it for an elastic
 * job).  With --mpi, mpirun runs it (mpirun.c).
 *
 *   hvdrun --agent
 *
 * is hvdrun on another host, started by ssh: it takes its part of the
 * job from its stdin (agent.c).  Not for people.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addrs.h"
#include "agent.h"
#include "hosts.h"
#include "job.h"
#include "job_elastic.h"
#include "mpirun.h"
#include "options.h"

/* With 0, 1 or 2 closed, the first pipe would take its number and a
 * rank's output would land somewhere odd: point them at /dev/null. */
static void guard_stdio(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int null = open("/dev/null", O_RDWR); /* the lowest free number: fd */
    if (null > 2) close(null);
  }
}

/* The job as the options say: mpirun's, or hvdrun's own. */
static int run(const hvdrun_options *o) {
  host_plan hosts;
  rdzv_addrs addrs;
  if (o->mpi) {
    if (hosts_plan(o, &hosts) < 0) return HVDRUN_EXIT_USAGE;
    int rc = mpirun_exec(o, &hosts);
    hosts_plan_free(&hosts);
    return rc;
  }
  if ((o->elastic ? job_elastic_first_hosts(o, &hosts) : hosts_plan(o, &hosts)) < 0)
    return HVDRUN_EXIT_USAGE;
  if (addrs_plan(o, &hosts, &addrs) < 0) {
    hosts_plan_free(&hosts);
    return HVDRUN_EXIT_USAGE;
  }
  int rc = o->elastic ? job_elastic_run(o, &hosts, &addrs) : job_run(o, &hosts, &addrs);
  addrs_free(&addrs);
  hosts_plan_free(&hosts);
  return rc;
}

int main(int argc, char **argv) {
  hvdrun_options o;
  guard_stdio();
  if (argc == 2 && strcmp(argv[1], "--agent") == 0) return agent_main();
  options_result parsed = options_parse(argc, argv, &o);
  int rc = parsed == OPTIONS_DONE ? 0 : parsed == OPTIONS_USAGE ? HVDRUN_EXIT_USAGE : run(&o);
  options_free(&o);
  return rc;
}
