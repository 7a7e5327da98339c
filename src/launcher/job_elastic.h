/*
 * job_elastic.h -- one elastic hvdrun job from start to exit status.
 *
 * The plain job (job.h) with the elastic driver over it: workers come
 * and go as hosts are discovered, lost and added, and a worker's failure
 * is the driver's to judge (elastic.c), not the job's.
 */
#ifndef HVDRUN_JOB_ELASTIC_H
#define HVDRUN_JOB_ELASTIC_H

#include "addrs.h"
#include "hosts.h"

/* An elastic job's first hosts, for addrs_plan() and the driver's first
 * listing: the discovery script's output (run once, now), or -H /
 * --hostfile's hosts (all of them, nothing placed; this machine with -np
 * slots without either).  0, or -1 after printing why. */
int job_elastic_first_hosts(const hvdrun_options *o, host_plan *p);

/* Runs the elastic job over those hosts; returns hvdrun's exit status as
 * job_run() does. */
int job_elastic_run(const hvdrun_options *o, const host_plan *hosts, const rdzv_addrs *addrs);

#endif /* HVDRUN_JOB_ELASTIC_H */
