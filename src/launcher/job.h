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

/* Runs the job; returns hvdrun's exit status: 0 when every rank exited
 * with 0, else the first failure's: the rank's code (128+signal if it was
 * killed, 127 if it could not be run), 255 (HVDRUN_EXIT_HOST) when a host
 * could not be reached or was lost, or 128+signal when hvdrun itself was
 * interrupted.  The rendezvous listens where addrs says. */
int job_run(const hvdrun_options *o, const host_plan *hosts, const rdzv_addrs *addrs);

/* An elastic job's first hosts, for addrs_plan() and the driver's first
 * listing: the discovery script's output (run once, now), or -H /
 * --hostfile's hosts (all of them, nothing placed; this machine with -np
 * slots without either).  0, or -1 after printing why. */
int job_elastic_first_hosts(const hvdrun_options *o, host_plan *p);

#endif /* HVDRUN_JOB_H */
