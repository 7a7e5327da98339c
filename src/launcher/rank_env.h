/*
 * rank_env.h -- the environment each rank starts with: hvdrun's own, plus
 * the HOROVOD_* variables that tell the rank who it is and where the
 * rendezvous is, and those hvdrun's flags set (Horovod's names, so
 * programs written for horovodrun see what they expect).
 *
 * A rank on this machine gets all of hvdrun's environment.  A rank on
 * another host gets it less what belongs to this machine or this login
 * session (HOSTNAME, DISPLAY, SSH_*, HOME, ...: the table in rank_env.c);
 * hvdrun's agent lays what is left over the environment sshd gave it
 * there (rank_env_merge()).
 */
#ifndef HVDRUN_RANK_ENV_H
#define HVDRUN_RANK_ENV_H

#include <stddef.h>

#include "options.h"

/* What is the same for every rank of the job. */
typedef struct {
  const hvdrun_options *opt;
  const char *secret; /* base64 */
} rank_env_job;

/* What differs between ranks: who the rank is, where its host is, and
 * where that host reaches the rendezvous. */
typedef struct {
  int rank;
  const rank_place *place;
  const char *hostname; /* HOROVOD_HOSTNAME */
  const char *rdzv_addr;
  int rdzv_port;
} rank_env_rank;

/* HOROVOD_RANK, the place's four, the host name and the rendezvous' two. */
#define RANK_ENV_PER_RANK 8

typedef struct {
  char **vars;   /* NULL-terminated: vars[0..common), then the per-rank ones */
  size_t common; /* the entries the same for every rank */
  char *set[RANK_ENV_PER_RANK + 32]; /* the job-wide variables hvdrun sets, owned */
  size_t nset;
  char var[RANK_ENV_PER_RANK][320]; /* "HOROVOD_LOCAL_RANK=3" */
  int elastic; /* an elastic job: the worker's id instead of its rank (rank_env.c) */
} rank_env;

/* Builds the job-wide part from environ (all of it for this machine; for
 * another host, without the machine's and session's variables).  0, or
 * -1 (out of memory). */
int rank_env_init(rank_env *e, const rank_env_job *job, int remote);
/* The environment for one rank: valid until the next call or free.  Its
 * per-rank entries are the last RANK_ENV_PER_RANK, from vars[common]. */
char **rank_env_for(rank_env *e, const rank_env_rank *r);
void rank_env_free(rank_env *e);

/* 1 if "NAME=value" is a variable of this machine or login session
 * (HOSTNAME, SSH_*, HOME, ...), which ranks on other hosts do not get. */
int rank_env_machine_variable(const char *entry);

/* base without the entries that a variable of over[0..n) names (nor,
 * with remote, the machine's and session's), then over's entries; a
 * NULL-terminated array of pointers into both, to free() alone.  NULL
 * when out of memory. */
char **rank_env_merge(char *const *base, char *const *over, size_t n, int remote);

#endif /* HVDRUN_RANK_ENV_H */
