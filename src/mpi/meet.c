/*
 * meet.c -- forming the job through MPI (hvd__mpi_meet, mpi_controller.h).
 *
 * On hvd's own duplicate of the communicator, every step nonblocking and
 * waited for within HOROVOD_START_TIMEOUT:
 *   1. allgather where each rank runs (host name, host id): local ranks
 *      for a communicator no launcher described, and whether the job is
 *      one host;
 *   2. rank 0 broadcasts a fresh secret and the address that reaches it
 *      (127.0.0.1 on one host; else its address on the route to another
 *      host), or why it cannot go on;
 *   3. every rank listens on HOROVOD_GLOO_IFACE's address, 127.0.0.1 on
 *      one host, or its address on the route to rank 0's, and the ranks
 *      allgather their rendezvous entries -- encoded and decoded by
 *      rdzv.h's codec, so they are checked as if they came from a stranger.
 * Then bootstrap.c connects hvd's transports as for any other job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/host_plan.h"
#include "env.h"
#include "wire/iface.h"
#include "mpi_int.h"

#define KNOB "HOROVOD_START_TIMEOUT"
#define SUBCOMM_TAG 0x687664 /* MPI_Comm_create_group's tag: "hvd" */

typedef struct {
  char hostname[HVD_HOSTNAME_MAX];
  char host_id[HVD_HOST_ID_MAX];
} where;

/* Rank 0's word to everyone. */
typedef struct {
  char addr[HVD_NET_ADDR_MAX]; /* reaches rank 0; "" when error says why not */
  uint8_t key[HVD_SECRET_LEN];
  char error[512];
} word;

/* An encoded entry and its length, one slot of the allgather. */
typedef struct {
  uint32_t len;
  uint8_t bytes[HVD_RDZV_REGISTER_MAX];
} slot;

typedef struct {
  hvd_job *job;
  MPI_Comm comm;
  int rank, size;
  uint64_t deadline;
  hvd_rdzv_entry *table;
} meeting;

/* A nonblocking call's request, waited for within the start deadline. */
static int finish(int mpi_rc, MPI_Request *req, const meeting *m, const char *what) {
  char msg[160];
  snprintf(msg, sizeof msg, "forming the job through MPI: %s", what);
  if (mpi_rc != MPI_SUCCESS) return hvd__mpi_fail(mpi_rc, msg);
  return hvd__mpi_wait(req, m->deadline, msg, KNOB);
}

/* A rank hvd_init_ranks() leaves out takes no part in the job.  It does
 * initialise MPI (finalised at its exit), as every process mpirun starts
 * must once any does. */
static int check_member(const hvd_job *job) {
  if (!job->ranks) return 0;
  for (int i = 0; i < job->nranks; i++)
    if (job->ranks[i] == job->rank) return 0;
  (void)hvd__mpi_start();
  return hvd__err(HVD_E_INVALID, "rank %d of MPI_COMM_WORLD is not among the ranks given to "
                  "hvd_init_ranks()", job->rank);
}

/* hvd's duplicate of the job's communicator, its errors returned. */
static int make_comm(meeting *m) {
  const hvd_job *job = m->job;
  MPI_Request req;
  int rc;
  if (job->ranks) { /* only the members call it: blocking, but among live ranks */
    MPI_Group world, sub;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    rc = MPI_Group_incl(world, job->nranks, job->ranks, &sub);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, SUBCOMM_TAG, &m->comm);
    MPI_Group_free(&world);
    if (rc == MPI_SUCCESS) MPI_Group_free(&sub);
    if (rc != MPI_SUCCESS) return hvd__mpi_fail(rc, "MPI_Comm_create_group");
  } else {
    MPI_Comm base = job->meet.mpi_comm ? *(const MPI_Comm *)job->meet.mpi_comm : MPI_COMM_WORLD;
    rc = MPI_Comm_idup(base, &m->comm, &req);
    HVD__CHECK(finish(rc, &req, m, "MPI_Comm_idup"));
  }
  hvd__mpi.comm = m->comm;
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m->comm, &m->rank);
  MPI_Comm_size(m->comm, &m->size);
  return 0;
}

/* What the environment said of MPI_COMM_WORLD must be what MPI says. */
static int check_world(const meeting *m) {
  const hvd_job *job = m->job;
  if (job->ranks || job->meet.mpi_comm || job->size < 0) return 0;
  if (job->size != m->size || job->rank != m->rank)
    return hvd__err(HVD_E_ENV, "the environment (%s) says rank %d of %d, MPI_COMM_WORLD says "
                    "rank %d of %d: %s is not the MPI this program uses (or variables of "
                    "another job are in the environment)", job->source, job->rank, job->size,
                    m->rank, m->size, job->meet.launcher);
  return 0;
}

/* Step 1: every rank's host into the table; local ranks where no
 * launcher said them. */
static int gather_hosts(meeting *m) {
  hvd_job *job = m->job;
  where me, *all = calloc((size_t)m->size, sizeof *all);
  MPI_Request req;
  if (!all) return hvd__err(HVD_E_NOMEM, "the hosts of %d ranks", m->size);
  memset(&me, 0, sizeof me);
  snprintf(me.hostname, sizeof me.hostname, "%s", job->hostname);
  snprintf(me.host_id, sizeof me.host_id, "%s", job->host_id);
  int rc = MPI_Iallgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, m->comm, &req);
  rc = finish(rc, &req, m, "MPI_Iallgather of the hosts");
  for (int i = 0; rc == 0 && i < m->size; i++) {
    all[i].hostname[HVD_HOSTNAME_MAX - 1] = all[i].host_id[HVD_HOST_ID_MAX - 1] = '\0';
    strcpy(m->table[i].hostname, all[i].hostname);
    strcpy(m->table[i].host_id, all[i].host_id);
  }
  free(all);
  if (rc < 0) return rc;
  if (job->ranks || job->meet.mpi_comm || job->local_size < 1) {
    hvd__layout_local(m->table, m->size);
    job->local_rank = (int)m->table[m->rank].local_rank;
    job->local_size = (int)m->table[m->rank].local_size;
  }
  return 0;
}

static int one_host(const meeting *m) {
  for (int i = 1; i < m->size; i++)
    if (strcmp(m->table[i].host_id, m->table[0].host_id) != 0) return 0;
  return 1;
}

/* Step 2 on rank 0: the word, or why not. */
static void rank0_word(const meeting *m, word *w) {
  hvd_secret key;
  memset(w, 0, sizeof *w);
  int other = 0;
  while (other < m->size && strcmp(m->table[other].host_id, m->table[0].host_id) == 0) other++;
  int rc = hvd__secret_generate(&key);
  if (rc == 0 && other == m->size) snprintf(w->addr, sizeof w->addr, "127.0.0.1");
  else if (rc == 0) rc = hvd__iface_route_src(m->table[other].hostname, w->addr);
  if (rc < 0) {
    snprintf(w->error, sizeof w->error, "rank 0 (on %s): %s (HOROVOD_GLOO_IFACE names the "
             "interface to use)", m->table[0].hostname, hvd_last_error());
    w->addr[0] = '\0';
  }
  memcpy(w->key, key.bytes, sizeof w->key);
}

static int share_word(const meeting *m, word *w) {
  MPI_Request req;
  if (m->rank == 0) rank0_word(m, w);
  int rc = MPI_Ibcast(w, sizeof *w, MPI_BYTE, 0, m->comm, &req);
  HVD__CHECK(finish(rc, &req, m, "MPI_Ibcast of the secret"));
  w->addr[sizeof w->addr - 1] = w->error[sizeof w->error - 1] = '\0';
  if (!w->addr[0]) return hvd__err(HVD_E_SYSTEM, "%s", w->error);
  return 0;
}

/* Step 3: where this rank listens for its peers. */
static int my_addr(const meeting *m, const word *w, hvd_rdzv_entry *me) {
  const char *names = hvd__param_raw(HVD_P_GLOO_IFACE);
  char iface[IF_NAMESIZE] = "?";
  if (names) {
    int rc = hvd__iface_addr(names, me->listen.addr, iface);
    if (rc < 0) return hvd__err_prefix(rc, "HOROVOD_GLOO_IFACE on host %s", me->hostname);
  } else if (one_host(m) || m->rank == 0) {
    snprintf(me->listen.addr, sizeof me->listen.addr, "%s", w->addr);
  } else {
    HVD__CHECK(hvd__iface_route_src(w->addr, me->listen.addr));
  }
  if (!names) hvd__iface_of_addr(me->listen.addr, iface);
  snprintf(me->iface, sizeof me->iface, "%s", iface);
  return 0;
}

static int gather_entries(meeting *m, const word *w, int *listen_fd) {
  hvd_rdzv_entry me = m->table[m->rank];
  const hvd_job *job = m->job;
  me.rank = (uint32_t)m->rank;
  me.size = (uint32_t)m->size;
  me.local_rank = (uint32_t)job->local_rank;
  me.local_size = (uint32_t)job->local_size;
  int shm_disable;
  HVD__CHECK(hvd__param_bool(HVD_P_SHM_DISABLE, &shm_disable));
  me.shm = (uint8_t)!shm_disable;
  HVD__CHECK(my_addr(m, w, &me));
  HVD__CHECK(hvd__net_listen(me.listen.addr, 0, listen_fd, &me.listen.port));
  slot mine, *all = calloc((size_t)m->size, sizeof *all);
  if (!all) return hvd__err(HVD_E_NOMEM, "the entries of %d ranks", m->size);
  memset(&mine, 0, sizeof mine);
  int len = hvd__rdzv_encode_register(&me, mine.bytes, sizeof mine.bytes), rc = len;
  MPI_Request req;
  if (len >= 0) {
    mine.len = (uint32_t)len;
    rc = MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, m->comm, &req);
    rc = finish(rc, &req, m, "MPI_Iallgather of the entries");
  }
  for (int i = 0; rc == 0 && i < m->size; i++) {
    hvd_rdzv_entry *e = &m->table[i];
    rc = all[i].len <= sizeof all[i].bytes
             ? hvd__rdzv_decode_register(all[i].bytes, all[i].len, e)
             : hvd__err(HVD_E_PROTOCOL, "an entry of %u bytes", all[i].len);
    if (rc == 0 && (e->rank != (uint32_t)i || e->size != (uint32_t)m->size))
      rc = hvd__err(HVD_E_PROTOCOL, "slot %d holds rank %u of %u", i, e->rank, e->size);
  }
  free(all);
  return rc < 0 ? hvd__err_prefix(rc, "forming the job through MPI") : 0;
}

int hvd__mpi_meet(hvd_job *job, uint64_t deadline, hvd_rdzv_entry **table, int *listen_fd,
                  hvd_secret *key) {
  meeting m = {job, MPI_COMM_NULL, 0, 0, deadline, NULL};
  word w;
  HVD__CHECK(check_member(job));
  HVD__CHECK(hvd__mpi_start());
  HVD__CHECK(make_comm(&m));
  HVD__CHECK(check_world(&m));
  m.table = calloc((size_t)m.size, sizeof *m.table);
  if (!m.table) return hvd__err(HVD_E_NOMEM, "the table of %d ranks", m.size);
  job->rank = m.rank;
  job->size = m.size;
  int rc = gather_hosts(&m);
  if (rc == 0) rc = share_word(&m, &w);
  if (rc == 0) rc = gather_entries(&m, &w, listen_fd);
  if (rc < 0) {
    free(m.table);
    return rc;
  }
  memcpy(key->bytes, w.key, sizeof key->bytes);
  *table = m.table;
  hvd__mpi.enabled = 1;
  return 0;
}
