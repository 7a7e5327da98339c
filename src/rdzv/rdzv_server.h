/*
 * rdzv_server.h -- the server side of the rendezvous (rdzv.h): hvdrun runs
 * it for its ranks, and rank 0 runs it inside hvd_init() for a job that no
 * hvdrun started (rdzv_host.h: srun without MPI).
 *
 * A non-blocking state machine that lives in its owner's poll() loop (in
 * hvdrun next to output forwarding): it never waits on a connection, so a stranger that
 * sends garbage, fails authentication or says nothing costs the job
 * nothing but a slot, and is dropped (the slot too, after a deadline).
 *
 * Each loop turn: hvd__rdzv_server_prepare() adds the server's descriptors
 * to the poll set, hvd__rdzv_server_dispatch() handles what poll() reported
 * for that same slice, hvd__rdzv_server_expire() drops connections past
 * their deadline.  hvd__rdzv_server_deadline() says when the next one falls
 * due.
 *
 * Once all `size` ranks have registered, each gets the table and the
 * server is ready for another round (a rank that calls hvd_shutdown() and
 * hvd_init() again registers anew).
 */
#ifndef HVD_RDZV_SERVER_H
#define HVD_RDZV_SERVER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv.h"

typedef struct hvd_rdzv_server hvd_rdzv_server;

/* The most addresses one server listens on. */
#define HVD_RDZV_LISTEN_MAX 16

/* Where the server's messages go: one line, without "\n". */
typedef void (*hvd_rdzv_log_fn)(void *arg, const char *line);

/* An elastic job's workers join with their ids and are placed in jobs by
 * the server's owner (hvdrun's elastic driver, rdzv_elastic.h): it learns
 * through these that worker `worker` joined (its entry is kept), or that
 * a joined worker's connection went away before it was placed. */
typedef struct {
  void *arg;
  void (*joined)(void *arg, uint32_t worker);
  void (*left)(void *arg, uint32_t worker);
} hvd_rdzv_elastic_hooks;

typedef struct {
  uint32_t size;             /* ranks in the job (elastic: the most workers at once) */
  const hvd_secret *key;
  const char *const *addrs;  /* numeric addresses to listen on: where the ranks reach it */
  size_t naddrs;
  const char *who;           /* the server's owner in refusals: "hvdrun", "rank 0" */
  hvd_rdzv_log_fn log;       /* refusals of a real rank always; the rest under verbose */
  void *log_arg;
  int verbose;
} hvd_rdzv_server_config;

/* Listens on each of cfg->addrs, addrs[i] on ports[i] (0: an ephemeral
 * port, which ports[i] then receives).  Fails with an HVD_E_* code and
 * hvd_last_error() set. */
int hvd__rdzv_server_start(const hvd_rdzv_server_config *cfg, int *ports,
                           hvd_rdzv_server **out);

/* The most descriptors hvd__rdzv_server_prepare() can add. */
size_t hvd__rdzv_server_poll_max(const hvd_rdzv_server *s);
size_t hvd__rdzv_server_prepare(hvd_rdzv_server *s, struct pollfd *fds, uint64_t now);
void hvd__rdzv_server_dispatch(hvd_rdzv_server *s, const struct pollfd *fds, size_t n);
void hvd__rdzv_server_expire(hvd_rdzv_server *s, uint64_t now);
uint64_t hvd__rdzv_server_deadline(const hvd_rdzv_server *s);

/* Rounds completed (every rank got the table), and whether a
 * connection is still open (a reply still on its way). */
uint64_t hvd__rdzv_server_rounds(const hvd_rdzv_server *s);
int hvd__rdzv_server_busy(const hvd_rdzv_server *s);

/* ---- elastic jobs (rdzv_server_elastic.c) ---- */

/* hvd__rdzv_server_start for an elastic job: workers JOIN instead of
 * registering, and `hooks` (kept) hear of them. */
int hvd__rdzv_server_start_elastic(const hvd_rdzv_server_config *cfg,
                                   const hvd_rdzv_elastic_hooks *hooks, int *ports,
                                   hvd_rdzv_server **out);

/* A member of a job the owner formed, in rank order. */
typedef struct {
  uint32_t worker;
  uint32_t local_rank, local_size, cross_rank, cross_size;
} hvd_rdzv_member;

/* Sends every member (n, in rank order, all joined) its PLACE in the job
 * `generation`; their connections stay open for NOTICEs.  HVD_E_INVALID
 * naming a member that has not joined (nothing is sent then). */
int hvd__rdzv_server_place(hvd_rdzv_server *s, uint32_t generation, const hvd_rdzv_member *m,
                           int n);
/* Refuses a joined worker (an ERROR saying why); 0 if it had not joined. */
void hvd__rdzv_server_refuse(hvd_rdzv_server *s, uint32_t worker, const char *why);
/* Sends a NOTICE to every placed worker still connected. */
void hvd__rdzv_server_notice(hvd_rdzv_server *s, uint64_t stamp, int added, int removed);

void hvd__rdzv_server_free(hvd_rdzv_server *s);

#endif /* HVD_RDZV_SERVER_H */
