/*
 * iface.h -- this host's network interfaces and addresses: which address
 * reaches a peer, which interface holds an address, which address an
 * interface named by the user has, and whether a host name is this host.
 *
 * hvdrun uses them to choose where its rendezvous listens (an address the
 * other hosts can reach) and which hosts it starts over ssh; a rank uses
 * them to listen where HOROVOD_GLOO_IFACE says, or on the interface that
 * routes to hvdrun.  Nothing here sends a packet.
 */
#ifndef HVD_IFACE_H
#define HVD_IFACE_H

#include <net/if.h>

#include "net.h"

#define HVD_IFACE_LIST_MAX 256 /* "lo, eth0, ..." in error messages */

/* The local address the kernel would use to reach `host` (a name or a
 * numeric address): a connected UDP socket, so nothing is sent.  Every
 * address the name resolves to is tried in order.  HVD_E_SYSTEM naming
 * the host when it does not resolve or no route leads there. */
int hvd__iface_route_src(const char *host, char addr[HVD_NET_ADDR_MAX]);

/* The first interface of `names` (comma-separated, as
 * HOROVOD_GLOO_IFACE and hvdrun's --network-interface take them) that
 * exists here and has an address: its IPv4 address, else its first
 * global IPv6 one.  *chosen gets its name.  HVD_E_ENV when none does,
 * naming the list and the interfaces this host has. */
int hvd__iface_addr(const char *names, char addr[HVD_NET_ADDR_MAX], char chosen[IF_NAMESIZE]);

/* The name of the interface that holds the numeric address `addr`
 * ("lo" for loopback addresses), or "?" when none does. */
void hvd__iface_of_addr(const char *addr, char name[IF_NAMESIZE]);

/* 1 when `host` is this host: "localhost", this host's name, or a name
 * or address that resolves to an address one of this host's interfaces
 * holds.  Other loopback addresses (127.0.0.2) are not: nothing holds
 * them, which lets tests reach "another host" over loopback. */
int hvd__iface_host_is_local(const char *host);

#endif /* HVD_IFACE_H */
