/*
 * rdzv_server.h -- hvdrun's side of the rendezvous (bootstrap/rdzv.h).
 *
 * A non-blocking state machine that lives in hvdrun's one poll() loop next
 * to output forwarding: it never waits on a connection, so a stranger that
 * sends garbage, fails authentication or says nothing costs the job
 * nothing but a slot, and is dropped (the slot too, after a deadline).
 *
 * Each loop turn: rdzv_server_prepare() adds the server's descriptors to
 * the poll set, rdzv_server_dispatch() handles what poll() reported for
 * that same slice, rdzv_server_expire() drops connections past their
 * deadline.  rdzv_server_deadline() says when the next one falls due.
 *
 * Once all `size` ranks have registered, each gets the table and the
 * server is ready for another round (a rank that calls hvd_shutdown() and
 * hvd_init() again registers anew).
 */
#ifndef HVDRUN_RDZV_SERVER_H
#define HVDRUN_RDZV_SERVER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/rdzv.h"
#include "output.h"

typedef struct rdzv_server rdzv_server;

/* The most addresses one server listens on. */
#define RDZV_LISTEN_MAX 16

/* Listens on each of addrs[0..naddrs) (numeric addresses: where the
 * hosts of the job reach this one), each with an ephemeral port
 * (ports[i]).  Messages go to `log` (hvdrun's stderr): refusals of a real
 * rank always, dropped strangers and progress under `verbose`.  Fails
 * with an HVD_E_* code and hvd_last_error() set. */
int rdzv_server_start(uint32_t size, const hvd_secret *key, const char *const *addrs,
                      size_t naddrs, output_sink *log, int verbose, rdzv_server **out,
                      int *ports);

/* The most descriptors rdzv_server_prepare() can add. */
size_t rdzv_server_poll_max(const rdzv_server *s);
size_t rdzv_server_prepare(rdzv_server *s, struct pollfd *fds, uint64_t now);
void rdzv_server_dispatch(rdzv_server *s, const struct pollfd *fds, size_t n);
void rdzv_server_expire(rdzv_server *s, uint64_t now);
uint64_t rdzv_server_deadline(const rdzv_server *s);

void rdzv_server_free(rdzv_server *s);

#endif /* HVDRUN_RDZV_SERVER_H */
