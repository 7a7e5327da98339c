/*
 * iface.c -- this host's interfaces and addresses (iface.h).
 *
 * Everything goes through getifaddrs() and getaddrinfo(): no netlink, no
 * /proc parsing, nothing that needs privileges.  Addresses are compared
 * as bytes of the same family, never as text ("::ffff:10.0.0.1" and
 * "10.0.0.1" are different hosts to a socket anyway).
 */
#include "iface.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* The bytes of an IPv4/IPv6 address inside sa; 0 for other families. */
static size_t addr_bytes(const struct sockaddr *sa, const void **bytes) {
  if (sa && sa->sa_family == AF_INET) {
    *bytes = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    return sizeof(struct in_addr);
  }
  if (sa && sa->sa_family == AF_INET6) {
    *bytes = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return sizeof(struct in6_addr);
  }
  return 0;
}

static int same_addr(const struct sockaddr *a, const struct sockaddr *b) {
  const void *x, *y;
  size_t n = addr_bytes(a, &x);
  return n && a->sa_family == b->sa_family && addr_bytes(b, &y) == n && memcmp(x, y, n) == 0;
}

static int to_text(const struct sockaddr *sa, char out[HVD_NET_ADDR_MAX]) {
  const void *bytes;
  if (!addr_bytes(sa, &bytes)) return -1;
  return inet_ntop(sa->sa_family, bytes, out, HVD_NET_ADDR_MAX) ? 0 : -1;
}

/* A link-local IPv6 address needs a scope to be reached: never offer one. */
static int is_global(const struct sockaddr *sa) {
  if (sa->sa_family != AF_INET6) return 1;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
  return !IN6_IS_ADDR_LINKLOCAL(a);
}

int hvd__iface_route_src(const char *host, char addr[HVD_NET_ADDR_MAX]) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res;
  int rc = getaddrinfo(host, "9", &hints, &res);
  if (rc != 0)
    return hvd__err(HVD_E_SYSTEM, "host '%s': cannot resolve: %s", host,
                    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
  int err = EHOSTUNREACH;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
        to_text((struct sockaddr *)&ss, addr) == 0) {
      close(fd);
      freeaddrinfo(res);
      return 0;
    }
    err = errno;
    close(fd);
  }
  freeaddrinfo(res);
  return hvd__err_sys(HVD_E_SYSTEM, err, "host '%s': no route from this host", host);
}

/* "lo, eth0" into out: the interfaces with an address, each once. */
static void list_ifaces(const struct ifaddrs *all, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  for (const struct ifaddrs *i = all; i; i = i->ifa_next) {
    const void *b;
    if (!addr_bytes(i->ifa_addr, &b)) continue;
    int seen = 0;
    for (const struct ifaddrs *j = all; j != i && !seen; j = j->ifa_next)
      seen = addr_bytes(j->ifa_addr, &b) && strcmp(j->ifa_name, i->ifa_name) == 0;
    if (!seen && len < cap)
      len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "", i->ifa_name);
  }
}

/* The address of interface `name`: IPv4 first, else a global IPv6. */
static int addr_of(const struct ifaddrs *all, const char *name, char addr[HVD_NET_ADDR_MAX]) {
  for (int family = AF_INET; ; family = AF_INET6) {
    for (const struct ifaddrs *i = all; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == family && strcmp(i->ifa_name, name) == 0 &&
          is_global(i->ifa_addr) && to_text(i->ifa_addr, addr) == 0)
        return 0;
    if (family == AF_INET6) return -1;
  }
}

int hvd__iface_addr(const char *names, char addr[HVD_NET_ADDR_MAX], char chosen[IF_NAMESIZE]) {
  struct ifaddrs *all;
  char name[IF_NAMESIZE], have[HVD_IFACE_LIST_MAX];
  if (getifaddrs(&all) != 0) return hvd__err_sys(HVD_E_SYSTEM, errno, "getifaddrs");
  for (const char *p = names; *p;) {
    size_t n = strcspn(p, ",");
    if (n > 0 && n < sizeof name) {
      memcpy(name, p, n);
      name[n] = '\0';
      if (addr_of(all, name, addr) == 0) {
        snprintf(chosen, IF_NAMESIZE, "%s", name);
        freeifaddrs(all);
        return 0;
      }
    }
    p += n + (p[n] == ',');
  }
  list_ifaces(all, have, sizeof have);
  freeifaddrs(all);
  return hvd__err(HVD_E_ENV, "no network interface %s'%s' with an address here (this host has: %s)",
                  strchr(names, ',') ? "of " : "", names, have);
}

void hvd__iface_of_addr(const char *addr, char name[IF_NAMESIZE]) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST}, *res;
  struct ifaddrs *all;
  snprintf(name, IF_NAMESIZE, "?");
  if (getaddrinfo(addr, NULL, &hints, &res) != 0) return;
  if (getifaddrs(&all) == 0) {
    for (const struct ifaddrs *i = all; i; i = i->ifa_next)
      if (same_addr(i->ifa_addr, res->ai_addr)) {
        snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
        break;
      }
    freeifaddrs(all);
  }
  freeaddrinfo(res);
}

static int held_here(const struct ifaddrs *all, const struct sockaddr *sa) {
  for (const struct ifaddrs *i = all; i; i = i->ifa_next)
    if (same_addr(i->ifa_addr, sa)) return 1;
  return 0;
}

int hvd__iface_host_is_local(const char *host) {
  char self[256];
  if (strcasecmp(host, "localhost") == 0) return 1;
  if (gethostname(self, sizeof self) == 0) {
    self[sizeof self - 1] = '\0';
    if (strcasecmp(host, self) == 0) return 1;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  struct ifaddrs *all;
  if (getaddrinfo(host, NULL, &hints, &res) != 0) return 0;
  int local = 0;
  if (getifaddrs(&all) == 0) {
    for (const struct addrinfo *ai = res; ai && !local; ai = ai->ai_next)
      local = held_here(all, ai->ai_addr);
    freeifaddrs(all);
  }
  freeaddrinfo(res);
  return local;
}
