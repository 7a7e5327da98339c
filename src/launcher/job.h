/*
 * job.h -- one hvdrun job from start to exit status.
 *
 * Starts the ranks and the rendezvous, then runs the single poll() loop
 * that forwards output, serves the rendezvous, reaps ranks and reacts to
 * signals, until every rank is gone.  When a rank fails the others get a
 * grace period to notice and report it themselves, then SIGTERM, then
 * SIGKILL: the job is over within 5 s of the first failure.
 */
#ifndef HVDRUN_JOB_H
#define HVDRUN_JOB_H

#include "options.h"

/* Runs the job; returns hvdrun's exit status: 0 when every rank exited
 * with 0, else the first failing rank's code (128+signal if it was
 * killed, 127 if it could not be run), or 128+signal when hvdrun itself
 * was interrupted.  places[r] says where rank r runs (hosts_place()). */
int job_run(const hvdrun_options *o, const rank_place *places);

#endif /* HVDRUN_JOB_H */
