/*
 * job.h -- one hvdrun job from start to exit status.
 *
 * Starts the rendezvous and every host's ranks (launch.h: forked here, or
 * over ssh), then runs the single poll() loop that forwards output, serves
 * the rendezvous, watches the ranks and reacts to signals, until every
 * rank is gone.  When a rank fails the others get a grace period to
 * notice and report it themselves, then SIGTERM, then SIGKILL: the job is
 * over within 5 s of the first failure on one host, within 10 s on many.
 */
#ifndef HVDRUN_JOB_H
#define HVDRUN_JOB_H

#include "addrs.h"
#include "hosts.h"

/* Runs a fixed job (an elastic one: job_elastic.h); returns hvdrun's exit
 * status: 0 when every rank exited with 0, else the first failure's: the rank's code (128+signal if it was
 * killed, 127 if it could not be run), 255 (HVDRUN_EXIT_HOST) when a host
 * could not be reached or was lost, or 128+signal when hvdrun itself was
 * interrupted.  The rendezvous listens where addrs says. */
int job_run(const hvdrun_options *o, const host_plan *hosts, const rdzv_addrs *addrs);

#endif /* HVDRUN_JOB_H */
