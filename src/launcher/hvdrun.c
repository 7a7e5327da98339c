/*
 * hvdrun.c -- the launcher's entry point.
 *
 *   hvdrun -np N [-H localhost:N] [options] prog [args...]
 *
 * starts N copies of prog as the ranks of one hvd job, with horovodrun's
 * flags and environment, serves their rendezvous, forwards their output
 * and tears the job down when one fails.  options.c reads the command
 * line, hosts.c reads the hosts and places the ranks, job.c runs the rest.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "job.h"
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

int main(int argc, char **argv) {
  hvdrun_options o;
  guard_stdio();
  switch (options_parse(argc, argv, &o)) {
    case OPTIONS_DONE: return 0;
    case OPTIONS_USAGE: return HVDRUN_EXIT_USAGE;
    case OPTIONS_RUN: break;
  }
  rank_place *places;
  if (hosts_place(&o, &places) < 0) return HVDRUN_EXIT_USAGE;
  int rc = job_run(&o, places);
  free(places);
  return rc;
}
