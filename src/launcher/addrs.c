/*
 * addrs.c -- choosing where the rendezvous listens (addrs.h).
 */
#include "addrs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/iface.h"

/* The index of addr in a, added if new; -1 when a is full. */
static int add_addr(rdzv_addrs *a, const char *addr) {
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->addr[i], addr) == 0) return (int)i;
  if (a->n == HVD_RDZV_LISTEN_MAX) {
    fprintf(stderr, "hvdrun: the hosts are reached from more than %d addresses here\n",
            HVD_RDZV_LISTEN_MAX);
    return -1;
  }
  snprintf(a->addr[a->n], sizeof a->addr[a->n], "%s", addr);
  a->list[a->n] = a->addr[a->n];
  return (int)a->n++;
}

static int same_for_all(rdzv_addrs *a, const host_plan *p, const char *addr) {
  int i = add_addr(a, addr);
  for (int h = 0; h < p->n; h++) a->of_host[h] = i;
  return i < 0 ? -1 : 0;
}

/* The first NIC of --network-interface that exists here, if any. */
static int nic_addr(const hvdrun_options *o, char addr[HVD_NET_ADDR_MAX]) {
  char nic[IF_NAMESIZE];
  if (!o->nics) return -1;
  if (hvd__iface_addr(o->nics, addr, nic) == 0) return 0;
  if (o->verbose)
    fprintf(stderr, "hvdrun: --network-interface: %s; the rendezvous listens where the routes "
            "to the hosts lead instead\n", hvd_last_error());
  return -1;
}

/* Each other host: the address of the route to it; this machine's hosts:
 * the first of those. */
static int by_route(rdzv_addrs *a, const host_plan *p) {
  int first = -1;
  for (int h = 0; h < p->n; h++) {
    char addr[HVD_NET_ADDR_MAX];
    if (p->hosts[h].local) continue;
    if (hvd__iface_route_src(p->hosts[h].name, addr) < 0) {
      fprintf(stderr, "hvdrun: %s\n", hvd_last_error());
      return -1;
    }
    if ((a->of_host[h] = add_addr(a, addr)) < 0) return -1;
    if (first < 0) first = a->of_host[h];
  }
  for (int h = 0; h < p->n; h++)
    if (p->hosts[h].local) a->of_host[h] = first;
  return 0;
}

int addrs_plan(const hvdrun_options *o, const host_plan *p, rdzv_addrs *a) {
  char addr[HVD_NET_ADDR_MAX];
  int remote = 0, rc;
  memset(a, 0, sizeof *a);
  a->of_host = calloc((size_t)p->n, sizeof *a->of_host);
  if (!a->of_host) {
    fprintf(stderr, "hvdrun: out of memory\n");
    return -1;
  }
  for (int h = 0; h < p->n; h++) remote |= !p->hosts[h].local;
  if (nic_addr(o, addr) == 0)
    rc = same_for_all(a, p, addr);
  else
    rc = remote ? by_route(a, p) : same_for_all(a, p, "127.0.0.1");
  for (size_t i = 0; i < a->n; i++) hvd__iface_of_addr(a->addr[i], a->iface[i]);
  if (rc < 0) addrs_free(a);
  return rc;
}

void addrs_free(rdzv_addrs *a) {
  free(a->of_host);
  a->of_host = NULL;
}
