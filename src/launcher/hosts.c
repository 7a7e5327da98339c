/*
 * hosts.c -- which machines the job runs on (hosts.h).
 *
 * -H and --hostfile take horovodrun's syntax.  A host named twice is one
 * host whose slots add up, at the place it was first named, as mpirun
 * reads a machinefile that lists a host once per slot.  Different names
 * are different hosts even when both are this machine
 * ("localhost:2,127.0.0.1:2" is two hosts of two ranks), so that a job
 * can emulate several hosts: the ranks' HOROVOD_LOCAL_* and
 * HOROVOD_CROSS_* values follow the list (place.c).
 */
#include "hosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "rdzv/rdzv.h"
#include "rdzv/slurm_lists.h"
#include "wire/iface.h"

#define SLOTS_MAX 1000000L

static int out_of_memory(void) {
  fprintf(stderr, "hvdrun: out of memory\n");
  return -1;
}

int hosts_name_ok(const char *host) {
  size_t n = strlen(host);
  if (n == 0 || n >= HVD_HOSTNAME_MAX || host[0] == '-') return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)host[i] <= ' ' || (unsigned char)host[i] >= 0x7f) return 0;
  return 1;
}

/* Adds slots to the host of that name, or appends a new host. */
static int merge(host_plan *p, int *cap, const char *host, long slots) {
  for (int i = 0; i < p->n; i++) {
    if (strcasecmp(p->hosts[i].name, host) != 0) continue;
    p->hosts[i].slots += slots;
    return 0;
  }
  if (p->n == *cap) {
    int grown = *cap ? 2 * *cap : 8;
    host_spec *h = realloc(p->hosts, (size_t)grown * sizeof *h);
    if (!h) return out_of_memory();
    p->hosts = h;
    *cap = grown;
  }
  host_spec *h = &p->hosts[p->n];
  memset(h, 0, sizeof *h);
  h->slots = slots;
  if (!(h->name = strdup(host))) return out_of_memory();
  p->n++;
  return 0;
}

/* Adds a host with its slots (NULL: one).  `where` names the source in
 * messages ("-H", "hosts.txt:3"). */
static int add_host(const char *host, const char *slots, const char *where, host_plan *p,
                    int *cap) {
  long n = 1;
  if (!hosts_name_ok(host)) {
    fprintf(stderr, "hvdrun: %s: bad host name '%s'\n", where, host);
    return -1;
  }
  if (slots && options_parse_int(slots, 1, SLOTS_MAX, &n) < 0) {
    fprintf(stderr, "hvdrun: %s: host '%s' has slots '%s': expected a number in 1..%ld\n",
            where, host, slots, SLOTS_MAX);
    return -1;
  }
  return merge(p, cap, host, n);
}

static int is_ipv6(const char *s) {
  struct in6_addr a;
  return inet_pton(AF_INET6, s, &a) == 1;
}

int hosts_split_item(char *item, char **host, char **slots) {
  char *colon = strrchr(item, ':');
  *host = item;
  *slots = NULL;
  if (item[0] == '[') {
    char *close = strchr(item, ']');
    if (!close || (close[1] != '\0' && close[1] != ':')) return -1;
    *close = '\0';
    *host = item + 1;
    if (close[1] == ':') *slots = close + 2;
  } else if (colon) {
    int one = colon == strchr(item, ':');
    *colon = '\0';
    if (one || is_ipv6(item))
      *slots = colon + 1;
    else
      *colon = ':';
  }
  return 0;
}

static int add_item(char *item, host_plan *p, int *cap) {
  char *host, *slots;
  if (hosts_split_item(item, &host, &slots) < 0) {
    fprintf(stderr, "hvdrun: -H: malformed host '%s'\n", item);
    return -1;
  }
  return add_host(host, slots, "-H", p, cap);
}

static int parse_list(const char *list, host_plan *p, int *cap) {
  if (list[0] == '\0' || list[strlen(list) - 1] == ',' || strstr(list, ",,")) {
    fprintf(stderr, "hvdrun: -H: empty host in '%s'\n", list);
    return -1;
  }
  char *copy = strdup(list), *save = NULL;
  if (!copy) return out_of_memory();
  int rc = 0;
  for (char *item = strtok_r(copy, ",", &save); rc == 0 && item; item = strtok_r(NULL, ",", &save))
    rc = add_item(item, p, cap);
  free(copy);
  return rc;
}

/* One hostfile line: "host" or "host slots=N"; '#' starts a comment. */
static int parse_line(char *line, const char *where, host_plan *p, int *cap) {
  char *save = NULL, *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  char *host = strtok_r(line, " \t\r\n", &save);
  if (!host) return 0;
  char *slots = strtok_r(NULL, " \t\r\n", &save);
  if ((slots && strncmp(slots, "slots=", 6) != 0) || strtok_r(NULL, " \t\r\n", &save)) {
    fprintf(stderr, "hvdrun: %s: expected 'host slots=N'\n", where);
    return -1;
  }
  return add_host(host, slots ? slots + 6 : NULL, where, p, cap);
}

static int parse_file(const char *path, host_plan *p, int *cap) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "hvdrun: cannot open hostfile '%s': %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL, where[512];
  size_t linecap = 0;
  int rc = 0;
  for (long no = 1; rc == 0 && getline(&line, &linecap, f) >= 0; no++) {
    snprintf(where, sizeof where, "%s:%ld", path, no);
    rc = parse_line(line, where, p, cap);
  }
  free(line);
  fclose(f);
  return rc;
}

/* Neither -H nor --hostfile: this machine, by its name, with np slots. */
static int this_machine(const hvdrun_options *o, host_plan *p, int *cap) {
  char self[HVD_HOSTNAME_MAX] = "localhost";
  gethostname(self, sizeof self - 1);
  if (merge(p, cap, self, o->np) < 0) return -1;
  p->hosts[0].local = 1;
  return 0;
}

/* Inside a SLURM allocation (salloc, an sbatch script). */
static int in_allocation(void) {
  const char *id = getenv("SLURM_JOB_ID"), *nodes = getenv("SLURM_JOB_NODELIST");
  return id && id[0] && nodes && nodes[0];
}

/* The allocation's nodes, each with its tasks (or CPUs) as slots. */
static int slurm_nodes(host_plan *p, int *cap, const char **where) {
  const char *per = getenv("SLURM_TASKS_PER_NODE") ? "SLURM_TASKS_PER_NODE"
                                                   : "SLURM_JOB_CPUS_PER_NODE";
  hvd_hostlist nodes;
  int *slots = NULL, n = 0, rc = -1;
  *where = per;
  if (hvd__slurm_hostlist("SLURM_JOB_NODELIST", getenv("SLURM_JOB_NODELIST"), &nodes) < 0) {
    fprintf(stderr, "hvdrun: %s\n", hvd_last_error());
    return -1;
  }
  if (!getenv(per) || hvd__slurm_counts(per, getenv(per), &slots, &n) < 0)
    fprintf(stderr, "hvdrun: %s\n", getenv(per) ? hvd_last_error()
                                                  : "SLURM_JOB_CPUS_PER_NODE is not set");
  else if (n != nodes.n)
    fprintf(stderr, "hvdrun: %s='%s' counts %d nodes, SLURM_JOB_NODELIST %d\n", per,
            getenv(per), n, nodes.n);
  else
    rc = 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    char count[24];
    snprintf(count, sizeof count, "%d", slots[i]);
    rc = add_host(nodes.names[i], count, "SLURM_JOB_NODELIST", p, cap);
  }
  free(slots);
  hvd__slurm_hostlist_free(&nodes);
  return rc;
}

/* --launcher auto: srun inside an allocation; local: the hosts must be
 * this machine (checked once they are known). */
static void resolve_launcher(const hvdrun_options *o, host_plan *p) {
  p->launcher = o->launcher;
  if (p->launcher == LAUNCHER_AUTO) p->launcher = in_allocation() ? LAUNCHER_SRUN : LAUNCHER_SSH;
}

static int load(const hvdrun_options *o, host_plan *p) {
  int cap = 0;
  const char *where = o->hosts ? "-H" : o->hostfile;
  resolve_launcher(o, p);
  if (!o->hosts && !o->hostfile && (p->launcher == LAUNCHER_LOCAL || !in_allocation()))
    return this_machine(o, p, &cap);
  int rc = o->hosts      ? parse_list(o->hosts, p, &cap)
           : o->hostfile ? parse_file(o->hostfile, p, &cap)
                         : slurm_nodes(p, &cap, &where);
  if (rc) return -1;
  long total = 0;
  for (int i = 0; i < p->n; i++) total += p->hosts[i].slots;
  if (total < o->np) {
    fprintf(stderr, "hvdrun: -np %d needs %d slots, but %s gives only %ld%s\n", o->np, o->np,
            where, total, o->hosts || o->hostfile ? "" : " (ask salloc/sbatch for as many "
            "tasks: -n, --ntasks-per-node)");
    return -1;
  }
  return 0;
}

/* --launcher local runs every rank here. */
static int check_local(const host_plan *p) {
  for (int i = 0; p->launcher == LAUNCHER_LOCAL && i < p->n; i++) {
    if (p->hosts[i].local) continue;
    fprintf(stderr, "hvdrun: --launcher local: host '%s' is not this machine\n",
            p->hosts[i].name);
    return -1;
  }
  return 0;
}

/* Places the ranks, drops the hosts that got none, and finds out which
 * of the rest are this machine. */
static int place(const hvdrun_options *o, host_plan *p) {
  long *slots = calloc((size_t)p->n, sizeof *slots);
  p->places = calloc((size_t)o->np, sizeof *p->places);
  if (!slots || !p->places) {
    free(slots);
    return out_of_memory();
  }
  for (int i = 0; i < p->n; i++) slots[i] = p->hosts[i].slots;
  int rc = place_ranks(slots, p->n, o->np, p->places);
  free(slots);
  if (rc < 0) return out_of_memory(); /* load() checked the slots */
  int first = 0, used = 0;
  for (; used < p->n && first < o->np; used++) {
    host_spec *h = &p->hosts[used];
    h->first = first;
    h->nranks = p->places[first].local_size;
    first += h->nranks;
    if (!h->local) h->local = hvd__iface_host_is_local(h->name);
  }
  for (int i = used; i < p->n; i++) free(p->hosts[i].name);
  p->n = used;
  return 0;
}

int hosts_list(const hvdrun_options *o, host_plan *p) {
  int cap = 0;
  memset(p, 0, sizeof *p);
  int rc = !o->hosts && !o->hostfile ? this_machine(o, p, &cap)
           : o->hosts                ? parse_list(o->hosts, p, &cap)
                                     : parse_file(o->hostfile, p, &cap);
  for (int i = 0; rc == 0 && i < p->n; i++)
    if (o->hosts || o->hostfile) p->hosts[i].local = hvd__iface_host_is_local(p->hosts[i].name);
  if (rc < 0) hosts_plan_free(p);
  return rc;
}

int hosts_plan(const hvdrun_options *o, host_plan *p) {
  memset(p, 0, sizeof *p);
  if (load(o, p) < 0 || place(o, p) < 0 || check_local(p) < 0) {
    hosts_plan_free(p);
    return -1;
  }
  return 0;
}

void hosts_plan_free(host_plan *p) {
  for (int i = 0; i < p->n; i++) free(p->hosts[i].name);
  free(p->hosts);
  free(p->places);
  memset(p, 0, sizeof *p);
}
