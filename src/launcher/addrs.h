/*
 * addrs.h -- where hvdrun's rendezvous listens, and which of those
 * addresses each host's ranks are told (HOROVOD_GLOO_RENDEZVOUS_ADDR).
 *
 * A rank listens for its peers on the local end of its rendezvous
 * connection, so the address a host is told must be one that host
 * reaches and one its peers on other hosts reach back through:
 *
 *   all hosts this machine     127.0.0.1
 *   --network-interface NICs   the first of them that exists here, for every host
 *   otherwise                  per other host, this machine's address on the
 *                              route to it (iface.h); this machine's own
 *                              ranks get the first other host's address
 *
 * The rendezvous listens on each distinct address, and on nothing else.
 */
#ifndef HVDRUN_ADDRS_H
#define HVDRUN_ADDRS_H

#include <net/if.h>

#include "hosts.h"
#include "rdzv/rdzv_server.h"
#include "wire/net.h"

typedef struct {
  char addr[HVD_RDZV_LISTEN_MAX][HVD_NET_ADDR_MAX]; /* distinct, in order of first use */
  char iface[HVD_RDZV_LISTEN_MAX][IF_NAMESIZE];     /* for --verbose */
  const char *list[HVD_RDZV_LISTEN_MAX];            /* addr[i], for hvd__rdzv_server_start() */
  size_t n;
  int *of_host; /* per host of the plan: its index into addr */
} rdzv_addrs;

/* Chooses the addresses for the hosts of p.  0, or -1 after printing why
 * (a host that does not resolve or that no route reaches). */
int addrs_plan(const hvdrun_options *o, const host_plan *p, rdzv_addrs *a);
void addrs_free(rdzv_addrs *a);

#endif /* HVDRUN_ADDRS_H */
