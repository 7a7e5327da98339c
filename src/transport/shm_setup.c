/*
 * shm_setup.c -- setting up the shared memory of a group of ranks on one
 * host (shm.h).
 *
 * Over the job's TCP mesh, small messages between the group's leader
 * (its first member) and the others:
 *   1. the leader creates the segment and tells everyone whether it could;
 *   2. every member maps it, writes its pid there and says whether it could;
 *   3. the leader unlinks the segment's name (from here on nothing can be
 *      left in /dev/shm) and says "go" if every member mapped it, or "TCP"
 *      if one could not.
 * Which ranks form a group, and whether they want shared memory at all,
 * was settled before from what every rank registered (bootstrap.c), so
 * there is nothing to agree on here but whether it worked.
 *
 * The segment is created O_EXCL with mode 0600 under a name only this
 * job's secret gives, so no other job, or user, can see it; the leader's
 * rank in the name keeps the groups of a job apart where hosts share one
 * /dev/shm (hosts emulated by network namespaces do).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "env.h"
#include "shm.h"
#include "shm_seg.h"

/* Tag of the setup messages: collectives' tags start at 1. */
#define SETUP_TAG 0
/* Bytes of each ring: 1 MiB (four chunks of the collectives) while the
 * segment stays small; smaller rings for big jobs, whose n^2 rings would
 * otherwise take gigabytes of address space. */
#define RING_CAP_MAX (1u << 20)
#define RING_CAP_MIN (64u << 10)
#define SEG_BUDGET ((size_t)1 << 30)

static size_t ring_cap_for(int size) {
  size_t cap = RING_CAP_MAX;
  while (cap > RING_CAP_MIN && (size_t)size * (size_t)size * cap > SEG_BUDGET) cap /= 2;
  return cap;
}

void hvd__shm_seg_init(seg_hdr *h, int size, size_t cap) {
  memset(h, 0, seg_rings_off((size_t)size));
  h->magic = SEG_MAGIC;
  h->size = (uint32_t)size;
  h->ring_cap = (uint32_t)cap;
  h->bytes = seg_bytes((size_t)size, cap);
  atomic_init(&h->reports, 0);
  h->shared_cores = !hvd__core_each(size);
  atomic_init(&h->arrived, 0);
  atomic_init(&h->sync_wake, 0);
  seg_rank *ranks = seg_ranks(h);
  for (int r = 0; r < size; r++) {
    atomic_init(&ranks[r].wake, 0);
    atomic_init(&ranks[r].sleeping, 0);
    atomic_init(&ranks[r].pid, 0);
    atomic_init(&ranks[r].reported, 0);
    atomic_init(&ranks[r].waits_on, -1);
    atomic_init(&ranks[r].beat_ms, hvd__now_ms());
    atomic_init(&ranks[r].sync[0].reached, 0);
    atomic_init(&ranks[r].sync[1].reached, 0);
    ranks[r].lost = -1;
  }
  /* The rings are zeros: empty (hvd__ring_init would write what is there). */
}

/* Rank 0: creates, sizes and maps the segment. */
static int seg_create(const char *name, int size, seg_hdr **out, size_t *cap_out) {
  size_t cap = ring_cap_for(size), bytes = seg_bytes((size_t)size, cap);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return hvd__err_sys(HVD_E_SYSTEM, errno, "shm_open(%s)", name);
  void *p = MAP_FAILED;
  int rc = ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
  if (rc == 0) {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) rc = errno;
  }
  close(fd);
  if (rc != 0) {
    shm_unlink(name);
    return hvd__err_sys(HVD_E_SYSTEM, rc, "sizing and mapping %zu bytes of %s", bytes, name);
  }
  hvd__shm_seg_init(p, size, cap);
  *out = p;
  *cap_out = cap;
  return 0;
}

/* Checks what rank 0 wrote before trusting any offset derived from it. */
static int seg_check(const seg_hdr *h, size_t mapped, int size, size_t *cap) {
  size_t c = h->ring_cap;
  if (h->magic != SEG_MAGIC || h->size != (uint32_t)size || c < 4096 || c > (1u << 26) ||
      (c & (c - 1)) != 0 || h->bytes != mapped || seg_bytes((size_t)size, c) != mapped ||
      h->shared_cores > 1)
    return hvd__err(HVD_E_PROTOCOL, "the shared-memory segment has an unexpected layout");
  *cap = c;
  return 0;
}

int hvd__shm_seg_map(int fd, int size, seg_hdr **out, size_t *cap) {
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < seg_rings_off((size_t)size))
    return hvd__err(HVD_E_PROTOCOL, "the shared-memory segment is too small");
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return hvd__err_sys(HVD_E_SYSTEM, errno, "mapping the segment");
  int rc = seg_check(p, (size_t)st.st_size, size, cap);
  if (rc < 0) {
    munmap(p, (size_t)st.st_size);
    return rc;
  }
  *out = p;
  return 0;
}

/* Other ranks: maps rank 0's segment. */
static int seg_open(const char *name, int size, seg_hdr **out, size_t *cap) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) return hvd__err_sys(HVD_E_SYSTEM, errno, "shm_open(%s)", name);
  int rc = hvd__shm_seg_map(fd, size, out, cap);
  close(fd);
  return rc < 0 ? hvd__err_prefix(rc, "%s", name) : 0;
}

/* ---- the messages, all to and from the leader ---- */

/* Leader: one word from every other member, in member order. */
static int gather(const hvd_shm_config *cfg, hvd_transport *tcp, uint32_t *all) {
  for (int i = 1; i < cfg->n; i++)
    HVD__CHECK(hvd__recv(tcp, cfg->members[i], &all[i], 4, SETUP_TAG));
  return 0;
}

static int broadcast(const hvd_shm_config *cfg, hvd_transport *tcp, uint32_t word) {
  for (int i = 1; i < cfg->n; i++)
    HVD__CHECK(hvd__send(tcp, cfg->members[i], &word, 4, SETUP_TAG));
  return 0;
}

/* Member: a word to the leader and its answer. */
static int ask_leader(const hvd_shm_config *cfg, hvd_transport *tcp, uint32_t word,
                      uint32_t *answer) {
  if (word != UINT32_MAX) HVD__CHECK(hvd__send(tcp, cfg->members[0], &word, 4, SETUP_TAG));
  return hvd__recv(tcp, cfg->members[0], answer, 4, SETUP_TAG);
}

typedef struct {
  seg_hdr *seg;
  size_t cap;
} mapping;

static void unmap(mapping *m, int size) {
  if (m->seg) munmap(m->seg, seg_bytes((size_t)size, m->cap));
  m->seg = NULL;
}

static void publish_pid(mapping *m, int index) {
  atomic_store_explicit(&seg_ranks(m->seg)[index].pid, (int32_t)getpid(), memory_order_release);
}

/* The leader's side.  1: use shared memory (m mapped), 0: keep TCP. */
static int lead(const hvd_shm_config *cfg, hvd_transport *tcp, const char *name, mapping *m) {
  uint32_t *all = calloc((size_t)cfg->n, sizeof *all), go = 1;
  if (!all) return hvd__err(HVD_E_NOMEM, "shm setup: out of memory for %d ranks", cfg->n);
  if (seg_create(name, cfg->n, &m->seg, &m->cap) < 0) {
    hvd__log(HVD_LOG_WARNING, "rank %d: no shared memory with the ranks of its host, using "
             "TCP: %s", tcp->rank, hvd_last_error());
    go = 0;
  }
  int rc = broadcast(cfg, tcp, go);
  if (rc == 0 && go) {
    publish_pid(m, 0);
    rc = gather(cfg, tcp, all);
    shm_unlink(name); /* everyone mapped it, or gave up: the name has served */
    for (int i = 1; rc == 0 && i < cfg->n; i++)
      if (all[i] != 1) {
        hvd__log(HVD_LOG_WARNING, "rank %d could not map the shared memory: using TCP",
                 cfg->members[i]);
        go = 0;
      }
    if (rc == 0) rc = broadcast(cfg, tcp, go);
    if (rc == 0) rc = (int)go;
  }
  if (m->seg) shm_unlink(name); /* also when a message failed on the way */
  free(all);
  return rc;
}

/* Any other member's side.  1: use shared memory (m mapped), 0: keep TCP. */
static int follow_lead(const hvd_shm_config *cfg, hvd_transport *tcp, const char *name,
                       mapping *m) {
  uint32_t go, ok = 1;
  HVD__CHECK(ask_leader(cfg, tcp, UINT32_MAX, &go));
  if (go != 1) return 0;
  if (seg_open(name, cfg->n, &m->seg, &m->cap) < 0) {
    hvd__log(HVD_LOG_WARNING, "rank %d: cannot map the shared memory, using TCP: %s",
             tcp->rank, hvd_last_error());
    ok = 0;
  } else {
    publish_pid(m, cfg->me);
  }
  HVD__CHECK(ask_leader(cfg, tcp, ok, &go));
  return go == 1 && ok;
}

/* Whether the group's ranks may read each other's memory (the shm
 * allreduce then copies once): probed by all, said once by the leader. */
static int single_copy(const hvd_shm_config *cfg, hvd_transport *t) {
  int wanted;
  long min;
  char why[512];
  HVD__CHECK(hvd__param_bool(HVD_P_SHM_SINGLE_COPY, &wanted));
  HVD__CHECK(hvd__param_int(HVD_P_SHM_SINGLE_COPY_MIN_BYTES, &min));
  int on = hvd__shm_single_copy_probe(t, wanted, (uint64_t)min, why, sizeof why);
  if (on < 0) return on;
  if (cfg->me != 0) return 0;
  if (on)
    hvd__log(HVD_LOG_DEBUG, "rank %d: the %d ranks of its host read each other's memory "
             "(process_vm_readv): large allreduces copy once", cfg->members[0], cfg->n);
  else
    hvd__log(HVD_LOG_INFO, "shared memory of ranks %d..%d copies large allreduces twice, "
             "through shared windows, not once: %s", cfg->members[0], cfg->members[cfg->n - 1],
             why);
  return 0;
}

int hvd__shm_setup(const hvd_shm_config *cfg, hvd_transport *tcp, hvd_transport **out) {
  char name[HVD_SHM_NAME_MAX];
  mapping m = {NULL, 0};
  *out = NULL;
  if (cfg->n < 2 || cfg->me < 0 || cfg->me >= cfg->n || cfg->members[cfg->me] != tcp->rank)
    return hvd__err(HVD_E_INVALID, "shm setup: rank %d is not member %d of a group of %d",
                    tcp->rank, cfg->me, cfg->n);
  hvd__shm_name(&cfg->key, cfg->members[0], name, sizeof name);
  int rc = cfg->me == 0 ? lead(cfg, tcp, name, &m) : follow_lead(cfg, tcp, name, &m);
  if (rc == 1)
    rc = hvd__shm_transport_new(m.seg, cfg->n, m.cap, cfg->me, cfg->timeout_ms, cfg->members,
                                out);
  if (rc == 0 && *out) {
    rc = single_copy(cfg, *out);
    if (rc < 0) {
      (*out)->ops->destroy(*out); /* it owns the mapping */
      *out = NULL;
      m.seg = NULL;
    }
  }
  if (rc < 0) {
    unmap(&m, cfg->n);
    return hvd__err_prefix(rc, "setting up shared memory");
  }
  if (*out) {
    hvd__log(HVD_LOG_DEBUG, "rank %d: shared memory with %d ranks of its host (rings of %zu "
             "KiB)", tcp->rank, cfg->n, m.cap >> 10);
  } else {
    unmap(&m, cfg->n);
  }
  return 0;
}
