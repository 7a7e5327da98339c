/*
 * rank_env.h -- the environment each rank starts with: hvdrun's own, plus the
 * HOROVOD_* variables that tell the rank who it is and where the
 * rendezvous is, and those hvdrun's flags set (Horovod's names, so
 * programs written for horovodrun see what they expect).
 */
#ifndef HVDRUN_RANK_ENV_H
#define HVDRUN_RANK_ENV_H

#include <stddef.h>

#include "options.h"

/* What is the same for every rank. */
typedef struct {
  const hvdrun_options *opt;
  const rank_place *places; /* opt->np entries: where each rank runs */
  int port;             /* the rendezvous port on 127.0.0.1 */
  const char *secret;   /* base64 */
  const char *hostname; /* this machine's name */
} rank_env_job;

/* The variables that differ between ranks: HOROVOD_RANK and the place's. */
#define RANK_ENV_PER_RANK 5

typedef struct {
  char **vars; /* NULL-terminated; owns its strings but the per-rank ones */
  size_t n;
  const rank_place *places;
  size_t slot[RANK_ENV_PER_RANK];       /* where in vars the per-rank ones sit */
  char var[RANK_ENV_PER_RANK][48];     /* "HOROVOD_LOCAL_RANK=3" */
} rank_env;

/* Builds the job-wide part from environ.  0, or -1 (out of memory). */
int rank_env_init(rank_env *e, const rank_env_job *job);
/* The environment for `rank`: valid until the next call or free. */
char **rank_env_for(rank_env *e, int rank);
void rank_env_free(rank_env *e);

#endif /* HVDRUN_RANK_ENV_H */
