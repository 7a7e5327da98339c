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
  int port;             /* the rendezvous port on 127.0.0.1 */
  const char *secret;   /* base64 */
  const char *hostname; /* this machine's name */
} rank_env_job;

typedef struct {
  char **vars; /* NULL-terminated; owns its strings but the two below */
  size_t n;
  size_t rank_slot, local_rank_slot;
  char rank_var[40], local_rank_var[48];
} rank_env;

/* Builds the job-wide part from environ.  0, or -1 (out of memory). */
int rank_env_init(rank_env *e, const rank_env_job *job);
/* The environment for `rank`: valid until the next call or free. */
char **rank_env_for(rank_env *e, int rank);
void rank_env_free(rank_env *e);

#endif /* HVDRUN_RANK_ENV_H */
