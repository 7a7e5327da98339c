/*
 * launch_srun.c -- the backend that runs a host's ranks inside a SLURM
 * allocation (launch.h, launch_session.h): one job step per host,
 *
 *   srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap --mpi=none --quiet
 *        --kill-on-bad-exit=1 --export=ALL /path/of/hvdrun --agent
 *
 * which SLURM starts on that node, its stdin and stdout forwarded to
 * hvdrun byte for byte -- the same agent and protocol as over ssh.  The
 * step takes one task of the allocation and overlaps whatever else runs
 * (the ranks are the agent's children, inside the step); when hvdrun or
 * srun dies, the step's stdin ends and the agent stops its ranks.
 */
#include <stdio.h>

#include "common.h"
#include "launch_session.h"

static const char *srun_program(const launch_host *h) {
  (void)h;
  return "srun";
}

static int srun_build(const launch_host *h, session_cmd *c) {
  snprintf(c->buf[0], sizeof c->buf[0], "--nodelist=%s", h->spec->name);
  snprintf(c->what, sizeof c->what, "%s --agent", c->self);
  char *argv[] = {"srun", "--nodes=1", "--ntasks=1", c->buf[0], "--overlap", "--mpi=none",
                  "--quiet", "--kill-on-bad-exit=1", "--export=ALL", c->self, "--agent"};
  if (session_words(c, "", HVD__ARRAY_LEN(argv)) < 0) return -1;
  for (size_t i = 0; i < HVD__ARRAY_LEN(argv); i++) c->argv[i] = argv[i];
  return 0;
}

static const session_kind srun_kind = {"srun", srun_program, srun_build};

static int srun_start(launch_host *h) { return session_start(h, &srun_kind); }

const launch_backend launch_srun = SESSION_BACKEND("srun", srun_start);
