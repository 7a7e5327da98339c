/*
 * api_hooks.h -- what tests and tools (hvd-bench) may ask the running
 * library beyond hvd.h.  Defined in api.c, which holds the library's one
 * context; each takes its lock, so call them while no collective runs.
 */
#ifndef HVD_API_HOOKS_H
#define HVD_API_HOOKS_H

#include <stdint.h>

#include "engine/engine.h"

/* The name of the transport hvd_init() built ("shm", "tcp"), or "none"
 * (not initialized, or a job of one rank): for tools such as hvd-bench
 * that report what they measured. */
const char *hvd__transport_name(void);

/* For benchmarks: the global communicator's steps (comm.h) so far. */
uint64_t hvd__steps(void);

/* For tests: 1 when the job's ranks read each other's memory for the shm
 * allreduce (the single-copy probe passed), 2 once an allreduce did, else
 * 0. */
int hvd__peer_read_on(void);

/* For tests: the collectives c->local and c->cross have run (their
 * sequence numbers), or -1 when the global communicator is flat. */
int hvd__hier_counts(uint32_t *local, uint32_t *cross);

/* For tests: the running engine's hvd__engine_cycle_counts; -1 before
 * hvd_init. */
int hvd__cycle_counts(uint64_t *fast, uint64_t *full);
/* For tests: tensors reduced on the fast path's exchange (engine/rider.c). */
int hvd__rider_count(uint64_t *rode);

/* For tests: the running engine's hvd__engine_watched. */
int hvd__watch_count(uint64_t *watched);

/* For tests: the running engine's hvd__engine_tune_history. */
int hvd__tune_history(hvd_tune_change *out, int cap);

#endif /* HVD_API_HOOKS_H */
