/*
 * hosts.h -- the machines a job runs on: read from -H or --hostfile,
 * repeated names merged, the ranks placed on them, and for each whether it
 * is this machine (its ranks are forked here) or another (over ssh).
 */
#ifndef HVDRUN_HOSTS_H
#define HVDRUN_HOSTS_H

#include "options.h"
#include "place.h"

typedef struct {
  char *name;  /* as -H or the hostfile writes it, without an IPv6 address' brackets */
  long slots;
  int local;   /* this machine (iface.h: hvd__iface_host_is_local()) */
  int first, nranks; /* the ranks placed there: first .. first + nranks - 1 */
} host_spec;

typedef struct {
  host_spec *hosts; /* the hosts that got ranks, in the order given */
  int n;
  rank_place *places; /* np entries: where each rank is among the hosts */
  launcher_kind launcher; /* how the other hosts' ranks start: SSH or SRUN (resolved) */
} host_plan;

/* Reads -H or --hostfile (neither: inside a SLURM allocation its nodes,
 * SLURM_JOB_NODELIST, with SLURM_TASKS_PER_NODE slots each -- or
 * SLURM_JOB_CPUS_PER_NODE without it -- unless --launcher local; else this
 * machine, by its host name, with np slots), merges a host named twice (case-insensitively) into one at
 * its first place with the slots added up, checks that the slots cover
 * np and places the ranks host by host.  Hosts beyond the first np slots
 * are dropped unexamined.  Prints the error and returns -1 on failure. */
int hosts_plan(const hvdrun_options *o, host_plan *p);
void hosts_plan_free(host_plan *p);

#endif /* HVDRUN_HOSTS_H */
