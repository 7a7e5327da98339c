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

/* The hosts of -H or --hostfile (this machine with -np slots without
 * either), all of them, merged as hosts_plan() does but with no ranks
 * placed (first 0, nranks 0, no places) and no check against -np: an
 * elastic job's hosts.  0, or -1 after printing why. */
int hosts_list(const hvdrun_options *o, host_plan *p);

/* Splits one -H item in place: "host", "host:N", "[v6addr]:N" or
 * "[v6addr]", and without brackets "v6addr:N" where what comes before the
 * last ':' is an IPv6 address, else the whole item is the host ("::1",
 * "fd00::3").  *slots is NULL when the item gives none.  -1 when a
 * bracket is not closed or is followed by something other than ":N". */
int hosts_split_item(char *item, char **host, char **slots);

/* 1 for a host name hvdrun can pass to ssh as one argument and to the
 * ranks in HOROVOD_HOSTNAME: printable, no blanks, not an ssh option. */
int hosts_name_ok(const char *host);

#endif /* HVDRUN_HOSTS_H */
