/*
 * fault.c -- fault injection for libhvd.so (HVD_FAULT_INJECTION=ON).
 *
 * SQLite's way of testing error paths: make the n-th call to an
 * allocator or a system call fail, once, for every n, and check that
 * each failure is handled.  libhvd.so is linked with -Wl,--wrap=SYMBOL
 * for each function below (tests/fault/fault.cmake), so only the calls
 * hvd's own code makes come here; libc, OpenSSL and the sanitizers call
 * the real functions.  Nothing in src/ knows about it.
 *
 * Every call of a countable kind is numbered (1, 2, ...) across the
 * process's threads.  The environment says which one fails:
 *
 *   HVD_FAULT_AT=n          the n-th countable call
 *   HVD_FAULT_SITE=0xOFF[:k] the k-th (default 1st) call made from the
 *                           call site at offset OFF in libhvd.so (a site is
 *                           the return address of the call, so one line
 *                           of hvd that calls malloc is one site)
 *   HVD_FAULT_ERRNO=hard    the function's realistic failure (default):
 *                           ENOMEM, ECONNRESET, EMFILE, ... (table below)
 *                 =eintr    EINTR, only for functions a signal interrupts
 *                 =eagain   EAGAIN, only for non-blocking socket calls
 *   HVD_FAULT_KINDS=alloc,io,sys  which functions count (default all;
 *                           with eintr/eagain only those that can fail so)
 *   HVD_FAULT_PERSIST=1     every countable call from that one on fails too
 *                           (SQLite's persistent mode: the error paths must
 *                           cope with more failures)
 *   HVD_FAULT_RANK=r        armed only in the process whose HOROVOD_RANK
 *                           is r (unset: any process; hvdrun has none)
 *   HVD_FAULT_REPORT=DIR    at exit, DIR/fault.PID says how many countable
 *                           calls the process made, whether and where the
 *                           fault fired, and every site with its count
 *
 * A call that fails returns what the real function returns on that
 * failure (NULL, -1 with errno, an error number, EAI_MEMORY) and, like
 * the real failure, does nothing (an interrupted connect() goes on).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

enum { K_ALLOC = 1, K_IO = 2, K_SYS = 4 };
enum { M_HARD, M_EINTR, M_EAGAIN };

/* The wrapped functions: kind, and the errno each mode gives (0: that
 * mode never fails it). */
enum {
  F_MALLOC, F_CALLOC, F_REALLOC, F_STRDUP, F_SOCKET, F_BIND, F_LISTEN, F_ACCEPT4, F_CONNECT,
  F_SEND, F_SENDMSG, F_RECV, F_RECVMSG, F_READ, F_WRITE, F_POLL, F_OPEN, F_SHM_OPEN, F_FTRUNCATE,
  F_MMAP, F_GETRANDOM, F_PTHREAD_CREATE, F_GETADDRINFO, F_GETIFADDRS, F__COUNT
};

static const struct {
  const char *name;
  int kind;
  int err[3]; /* hard, eintr, eagain */
} fns[F__COUNT] = {
    [F_MALLOC] = {"malloc", K_ALLOC, {ENOMEM, 0, 0}},
    [F_CALLOC] = {"calloc", K_ALLOC, {ENOMEM, 0, 0}},
    [F_REALLOC] = {"realloc", K_ALLOC, {ENOMEM, 0, 0}},
    [F_STRDUP] = {"strdup", K_ALLOC, {ENOMEM, 0, 0}},
    [F_SOCKET] = {"socket", K_IO, {EMFILE, 0, 0}},
    [F_BIND] = {"bind", K_IO, {EADDRINUSE, 0, 0}},
    [F_LISTEN] = {"listen", K_IO, {EADDRINUSE, 0, 0}},
    [F_ACCEPT4] = {"accept4", K_IO, {EMFILE, EINTR, EAGAIN}},
    [F_CONNECT] = {"connect", K_IO, {ECONNREFUSED, EINTR, 0}},
    [F_SEND] = {"send", K_IO, {ECONNRESET, EINTR, EAGAIN}},
    [F_SENDMSG] = {"sendmsg", K_IO, {ECONNRESET, EINTR, EAGAIN}},
    [F_RECV] = {"recv", K_IO, {ECONNRESET, EINTR, EAGAIN}},
    [F_RECVMSG] = {"recvmsg", K_IO, {ECONNRESET, EINTR, EAGAIN}},
    [F_READ] = {"read", K_IO, {EIO, EINTR, 0}},
    [F_WRITE] = {"write", K_IO, {ENOSPC, EINTR, 0}},
    [F_POLL] = {"poll", K_IO, {ENOMEM, EINTR, 0}},
    [F_OPEN] = {"open", K_IO, {EMFILE, EINTR, 0}},
    [F_SHM_OPEN] = {"shm_open", K_IO, {EMFILE, 0, 0}},
    [F_FTRUNCATE] = {"ftruncate", K_IO, {EFBIG, EINTR, 0}},
    [F_MMAP] = {"mmap", K_IO, {ENOMEM, 0, 0}},
    [F_GETRANDOM] = {"getrandom", K_IO, {ENOSYS, EINTR, 0}},
    [F_PTHREAD_CREATE] = {"pthread_create", K_SYS, {EAGAIN, 0, 0}},
    [F_GETADDRINFO] = {"getaddrinfo", K_SYS, {EAI_MEMORY, 0, 0}},
    [F_GETIFADDRS] = {"getifaddrs", K_SYS, {ENOMEM, 0, 0}},
};

/* Sites seen, for HVD_FAULT_REPORT: an open-addressing table that
 * threads fill without a lock (a slot's key is claimed with a CAS). */
#define SITES 8192
typedef struct {
  _Atomic uintptr_t off; /* 0: free */
  _Atomic int fn;
  _Atomic unsigned long calls;
} site_slot;

static struct {
  int armed, mode, persist;
  unsigned kinds;
  unsigned long at;       /* HVD_FAULT_AT, 0: none */
  uintptr_t site;         /* HVD_FAULT_SITE, 0: none */
  unsigned long site_nth;
  const char *report;     /* HVD_FAULT_REPORT */
  uintptr_t base;         /* where libhvd.so is mapped */
  char lib[512];
  _Atomic unsigned long calls, site_calls;
  _Atomic int fired;
  unsigned long fired_call; /* written once, by the thread that fired */
  uintptr_t fired_site;
  int fired_fn;
  site_slot sites[SITES];
} F;

static unsigned parse_kinds(const char *s) {
  unsigned k = 0;
  if (!s || !*s) return K_ALLOC | K_IO | K_SYS;
  if (strstr(s, "alloc")) k |= K_ALLOC;
  if (strstr(s, "io")) k |= K_IO;
  if (strstr(s, "sys")) k |= K_SYS;
  return k;
}

__attribute__((constructor)) static void fault_init(void) {
  const char *at = getenv("HVD_FAULT_AT"), *site = getenv("HVD_FAULT_SITE");
  const char *rank = getenv("HVD_FAULT_RANK"), *mine = getenv("HOROVOD_RANK");
  const char *mode = getenv("HVD_FAULT_ERRNO");
  Dl_info info;
  if (dladdr(&F, &info) && info.dli_fbase) { /* any object of libhvd.so */
    F.base = (uintptr_t)info.dli_fbase;
    snprintf(F.lib, sizeof F.lib, "%s", info.dli_fname ? info.dli_fname : "?");
  }
  F.kinds = parse_kinds(getenv("HVD_FAULT_KINDS"));
  F.mode = !mode || strcmp(mode, "hard") == 0 ? M_HARD
           : strcmp(mode, "eintr") == 0      ? M_EINTR
           : strcmp(mode, "eagain") == 0     ? M_EAGAIN
                                             : -1;
  F.report = getenv("HVD_FAULT_REPORT");
  F.persist = getenv("HVD_FAULT_PERSIST") && strcmp(getenv("HVD_FAULT_PERSIST"), "1") == 0;
  if (at) F.at = strtoul(at, NULL, 0);
  if (site) {
    char *end;
    F.site = (uintptr_t)strtoull(site, &end, 16);
    F.site_nth = *end == ':' ? strtoul(end + 1, NULL, 10) : 1;
  }
  F.armed = F.mode >= 0 && (F.at || F.site) && (!rank || (mine && strcmp(rank, mine) == 0));
  if (F.mode < 0) {
    fprintf(stderr, "fault: HVD_FAULT_ERRNO=%s is not hard, eintr or eagain\n", mode);
    F.mode = M_HARD;
  }
}

static void note_site(uintptr_t off, int fn) {
  size_t i = (off * 0x9e3779b97f4a7c15ull) >> 51; /* 13 bits */
  for (size_t probe = 0; probe < SITES; probe++, i = (i + 1) % SITES) {
    uintptr_t cur = atomic_load(&F.sites[i].off);
    if (cur == 0) {
      uintptr_t expect = 0;
      if (atomic_compare_exchange_strong(&F.sites[i].off, &expect, off)) {
        atomic_store(&F.sites[i].fn, fn);
        cur = off;
      } else {
        cur = expect;
      }
    }
    if (cur == off) {
      atomic_fetch_add(&F.sites[i].calls, 1);
      return;
    }
  }
}

/* Whether this call, of fn from `caller`, is the one to fail. */
static int fail_now(int fn, void *caller) {
  if (!(fns[fn].kind & F.kinds) || !fns[fn].err[F.mode]) return 0;
  unsigned long n = atomic_fetch_add(&F.calls, 1) + 1;
  uintptr_t off = (uintptr_t)caller - F.base;
  if (F.report) note_site(off, fn);
  if (!F.armed) return 0;
  if (atomic_load(&F.fired)) return F.persist;
  int hit = F.at ? n == F.at
                 : off == F.site && atomic_fetch_add(&F.site_calls, 1) + 1 == F.site_nth;
  if (!hit || atomic_exchange(&F.fired, 1)) return 0;
  F.fired_call = n;
  F.fired_site = off;
  F.fired_fn = fn;
  return 1;
}

#define FAIL(fn) fail_now(fn, __builtin_return_address(0))
#define ERR(fn) (errno = fns[fn].err[F.mode])

/* For the test program: the countable call that failed (1, 2, ...), or 0. */
API unsigned long hvd__fault_fired(void);
API unsigned long hvd__fault_fired(void) {
  return atomic_load(&F.fired) ? F.fired_call : 0;
}

__attribute__((destructor)) static void fault_report(void) {
  char path[1024];
  if (!F.report) return;
  snprintf(path, sizeof path, "%s/fault.%d", F.report, (int)getpid());
  FILE *f = fopen(path, "w");
  if (!f) return;
  const char *rank = getenv("HOROVOD_RANK");
  fprintf(f, "pid %d rank %s lib %s calls %lu armed %d fired %lu", (int)getpid(),
          rank ? rank : "-", F.lib, atomic_load(&F.calls), F.armed, hvd__fault_fired());
  if (atomic_load(&F.fired))
    fprintf(f, " site 0x%lx %s", (unsigned long)F.fired_site, fns[F.fired_fn].name);
  fputc('\n', f);
  for (size_t i = 0; i < SITES; i++) {
    uintptr_t off = atomic_load(&F.sites[i].off);
    if (off)
      fprintf(f, "site 0x%lx %s %lu\n", (unsigned long)off, fns[atomic_load(&F.sites[i].fn)].name,
              atomic_load(&F.sites[i].calls));
  }
  fclose(f);
}

/* ---- the wrappers ---- */

#define REAL(ret, name, ...) ret __real_##name(__VA_ARGS__); ret __wrap_##name(__VA_ARGS__)

REAL(void *, malloc, size_t n);
void *__wrap_malloc(size_t n) {
  if (FAIL(F_MALLOC)) return ERR(F_MALLOC), NULL;
  return __real_malloc(n);
}

REAL(void *, calloc, size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size) {
  if (FAIL(F_CALLOC)) return ERR(F_CALLOC), NULL;
  return __real_calloc(n, size);
}

REAL(void *, realloc, void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) {
  if (FAIL(F_REALLOC)) return ERR(F_REALLOC), NULL;
  return __real_realloc(p, n);
}

REAL(char *, strdup, const char *s);
char *__wrap_strdup(const char *s) {
  if (FAIL(F_STRDUP)) return ERR(F_STRDUP), NULL;
  return __real_strdup(s);
}

REAL(int, socket, int domain, int type, int protocol);
int __wrap_socket(int domain, int type, int protocol) {
  if (FAIL(F_SOCKET)) return ERR(F_SOCKET), -1;
  return __real_socket(domain, type, protocol);
}

REAL(int, bind, int fd, const struct sockaddr *a, socklen_t len);
int __wrap_bind(int fd, const struct sockaddr *a, socklen_t len) {
  if (FAIL(F_BIND)) return ERR(F_BIND), -1;
  return __real_bind(fd, a, len);
}

REAL(int, listen, int fd, int backlog);
int __wrap_listen(int fd, int backlog) {
  if (FAIL(F_LISTEN)) return ERR(F_LISTEN), -1;
  return __real_listen(fd, backlog);
}

REAL(int, accept4, int fd, struct sockaddr *a, socklen_t *len, int flags);
int __wrap_accept4(int fd, struct sockaddr *a, socklen_t *len, int flags) {
  if (FAIL(F_ACCEPT4)) return ERR(F_ACCEPT4), -1;
  return __real_accept4(fd, a, len, flags);
}

REAL(int, connect, int fd, const struct sockaddr *a, socklen_t len);
int __wrap_connect(int fd, const struct sockaddr *a, socklen_t len) {
  if (!FAIL(F_CONNECT)) return __real_connect(fd, a, len);
  if (F.mode != M_EINTR) return ERR(F_CONNECT), -1;
  /* A signal does not stop a connection attempt, only the wait for it:
   * the attempt goes on (POSIX), so start it and say EINTR. */
  if (__real_connect(fd, a, len) == 0 || errno == EINPROGRESS) return ERR(F_CONNECT), -1;
  return -1;
}

REAL(ssize_t, send, int fd, const void *buf, size_t n, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t n, int flags) {
  if (FAIL(F_SEND)) return ERR(F_SEND), -1;
  return __real_send(fd, buf, n, flags);
}

REAL(ssize_t, sendmsg, int fd, const struct msghdr *m, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags) {
  if (FAIL(F_SENDMSG)) return ERR(F_SENDMSG), -1;
  return __real_sendmsg(fd, m, flags);
}

REAL(ssize_t, recv, int fd, void *buf, size_t n, int flags);
ssize_t __wrap_recv(int fd, void *buf, size_t n, int flags) {
  if (FAIL(F_RECV)) return ERR(F_RECV), -1;
  return __real_recv(fd, buf, n, flags);
}

REAL(ssize_t, recvmsg, int fd, struct msghdr *m, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags) {
  if (FAIL(F_RECVMSG)) return ERR(F_RECVMSG), -1;
  return __real_recvmsg(fd, m, flags);
}

REAL(ssize_t, read, int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n) {
  if (FAIL(F_READ)) return ERR(F_READ), -1;
  return __real_read(fd, buf, n);
}

REAL(ssize_t, write, int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n) {
  if (FAIL(F_WRITE)) return ERR(F_WRITE), -1;
  return __real_write(fd, buf, n);
}

REAL(int, poll, struct pollfd *fds, nfds_t n, int ms);
int __wrap_poll(struct pollfd *fds, nfds_t n, int ms) {
  if (FAIL(F_POLL)) return ERR(F_POLL), -1;
  return __real_poll(fds, n, ms);
}

REAL(int, open, const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  if (FAIL(F_OPEN)) return ERR(F_OPEN), -1;
  return __real_open(path, flags, mode);
}

REAL(int, shm_open, const char *name, int flags, mode_t mode);
int __wrap_shm_open(const char *name, int flags, mode_t mode) {
  if (FAIL(F_SHM_OPEN)) return ERR(F_SHM_OPEN), -1;
  return __real_shm_open(name, flags, mode);
}

REAL(int, ftruncate, int fd, off_t len);
int __wrap_ftruncate(int fd, off_t len) {
  if (FAIL(F_FTRUNCATE)) return ERR(F_FTRUNCATE), -1;
  return __real_ftruncate(fd, len);
}

REAL(void *, mmap, void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (FAIL(F_MMAP)) return ERR(F_MMAP), MAP_FAILED;
  return __real_mmap(addr, len, prot, flags, fd, off);
}

REAL(ssize_t, getrandom, void *buf, size_t n, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags) {
  if (FAIL(F_GETRANDOM)) return ERR(F_GETRANDOM), -1;
  return __real_getrandom(buf, n, flags);
}

REAL(int, pthread_create, pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
  if (FAIL(F_PTHREAD_CREATE)) return fns[F_PTHREAD_CREATE].err[F.mode];
  return __real_pthread_create(t, a, fn, arg);
}

REAL(int, getaddrinfo, const char *node, const char *service, const struct addrinfo *hints,
     struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res) {
  if (FAIL(F_GETADDRINFO)) return fns[F_GETADDRINFO].err[F.mode];
  return __real_getaddrinfo(node, service, hints, res);
}

REAL(int, getifaddrs, struct ifaddrs **out);
int __wrap_getifaddrs(struct ifaddrs **out) {
  if (FAIL(F_GETIFADDRS)) return ERR(F_GETIFADDRS), -1;
  return __real_getifaddrs(out);
}
