/*
 * shm_setup.c -- agreeing on shared memory and setting up its segment
 * (shm.h).
 *
 * Over the job's TCP mesh, all small messages to and from rank 0:
 *   1. every rank tells rank 0 whether it wants shared memory;
 *   2. rank 0 checks they all agree, creates the segment if so and
 *      answers with the verdict;
 *   3. every rank maps the segment, writes its pid there and says whether
 *      it could;
 *   4. rank 0 unlinks the segment's name (from here on nothing can be left
 *      in /dev/shm) and says "go" if every rank mapped it, or "TCP" if one
 *      could not.
 * The segment is created O_EXCL with mode 0600 under a name only this
 * job's secret gives, so no other job, or user, can see it.
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

enum { VERDICT_TCP, VERDICT_SHM, VERDICT_DISAGREE };

void hvd__shm_name(const hvd_secret *key, char *out, size_t cap) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a: the secret is random already */
  for (size_t i = 0; i < sizeof key->bytes; i++) h = (h ^ key->bytes[i]) * 1099511628211ull;
  snprintf(out, cap, "/hvd-%016llx", (unsigned long long)h);
}

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
  seg_rank *ranks = seg_ranks(h);
  for (int r = 0; r < size; r++) {
    atomic_init(&ranks[r].wake, 0);
    atomic_init(&ranks[r].sleeping, 0);
    atomic_init(&ranks[r].pid, 0);
    atomic_init(&ranks[r].reported, 0);
    atomic_init(&ranks[r].waits_on, -1);
    atomic_init(&ranks[r].beat_ms, hvd__now_ms());
    atomic_init(&ranks[r].arrived, 0);
    ranks[r].lost = -1;
  }
  for (int i = 0; i < size; i++)
    for (int j = 0; j < size; j++)
      if (i != j) hvd__ring_init(seg_ring(h, (size_t)size, cap, i, j));
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
      (c & (c - 1)) != 0 || h->bytes != mapped || seg_bytes((size_t)size, c) != mapped)
    return hvd__err(HVD_E_PROTOCOL, "the shared-memory segment has an unexpected layout");
  *cap = c;
  return 0;
}

/* Other ranks: maps rank 0's segment. */
static int seg_open(const char *name, int size, seg_hdr **out, size_t *cap) {
  struct stat st;
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) return hvd__err_sys(HVD_E_SYSTEM, errno, "shm_open(%s)", name);
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < seg_rings_off((size_t)size)) {
    close(fd);
    return hvd__err(HVD_E_PROTOCOL, "the shared-memory segment %s is too small", name);
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) return hvd__err_sys(HVD_E_SYSTEM, err, "mapping %s", name);
  int rc = seg_check(p, (size_t)st.st_size, size, cap);
  if (rc < 0) {
    munmap(p, (size_t)st.st_size);
    return rc;
  }
  *out = p;
  return 0;
}

/* ---- the messages, all to and from rank 0 ---- */

static int gather(hvd_transport *tcp, uint32_t mine, uint32_t *all) {
  all[0] = mine;
  for (int r = 1; r < tcp->size; r++) HVD__CHECK(hvd__recv(tcp, r, &all[r], 4, SETUP_TAG));
  return 0;
}

static int broadcast(hvd_transport *tcp, const uint32_t msg[2]) {
  for (int r = 1; r < tcp->size; r++) HVD__CHECK(hvd__send(tcp, r, msg, 8, SETUP_TAG));
  return 0;
}

/* Rank 0's verdict on everyone's wishes: msg = {verdict, a rank that disagrees}. */
static int decide(hvd_transport *tcp, int want, uint32_t msg[2], uint32_t *all) {
  HVD__CHECK(gather(tcp, (uint32_t)want, all));
  msg[0] = want ? VERDICT_SHM : VERDICT_TCP;
  msg[1] = 0;
  for (int r = 1; r < tcp->size; r++)
    if (all[r] != (uint32_t)want) {
      msg[0] = VERDICT_DISAGREE;
      msg[1] = (uint32_t)r;
    }
  return 0;
}

static int disagree(int rank, int want) {
  return hvd__err(HVD_E_ENV,
                  "the ranks disagree on the transport: rank %d %s shared memory, rank 0 %s "
                  "(HOROVOD_SHM_DISABLE and HOROVOD_LOCAL_SIZE must be the same for every "
                  "rank)",
                  rank, want ? "does not want" : "wants", want ? "does" : "does not");
}

typedef struct {
  seg_hdr *seg;
  size_t cap;
} mapping;

static void unmap(mapping *m, int size) {
  if (m->seg) munmap(m->seg, seg_bytes((size_t)size, m->cap));
  m->seg = NULL;
}

/* Rank 0's side.  1: use shared memory (m mapped), 0: keep TCP. */
static int lead(const hvd_shm_config *cfg, hvd_transport *tcp, const char *name, mapping *m) {
  int size = tcp->size, rc;
  uint32_t msg[2], *all = calloc((size_t)size, sizeof *all);
  if (!all) return hvd__err(HVD_E_NOMEM, "shm setup: out of memory for %d ranks", size);
  rc = decide(tcp, cfg->want, msg, all);
  if (rc == 0 && msg[0] == VERDICT_SHM && seg_create(name, size, &m->seg, &m->cap) < 0) {
    hvd__log(HVD_LOG_WARNING, "rank 0: no shared memory, using TCP: %s", hvd_last_error());
    msg[0] = VERDICT_TCP;
  }
  if (rc == 0) rc = broadcast(tcp, msg);
  if (rc == 0 && msg[0] == VERDICT_DISAGREE) rc = disagree((int)msg[1], cfg->want);
  if (rc == 0 && msg[0] == VERDICT_SHM) {
    atomic_store_explicit(&seg_ranks(m->seg)[0].pid, (int32_t)getpid(), memory_order_release);
    rc = gather(tcp, 1, all);
    shm_unlink(name); /* everyone mapped it, or gave up: the name has served */
    msg[0] = 1;
    for (int r = 1; rc == 0 && r < size; r++)
      if (all[r] != 1) {
        hvd__log(HVD_LOG_WARNING, "rank %d could not map the shared memory: using TCP", r);
        msg[0] = 0;
      }
    if (rc == 0) rc = broadcast(tcp, msg);
    if (rc == 0) rc = (int)msg[0];
  }
  if (m->seg) shm_unlink(name); /* also when a message failed on the way */
  free(all);
  return rc;
}

/* Any other rank's side.  1: use shared memory (m mapped), 0: keep TCP. */
static int follow_lead(const hvd_shm_config *cfg, hvd_transport *tcp, const char *name,
                       mapping *m) {
  uint32_t want = (uint32_t)cfg->want, msg[2], ok = 1;
  HVD__CHECK(hvd__send(tcp, 0, &want, 4, SETUP_TAG));
  HVD__CHECK(hvd__recv(tcp, 0, msg, 8, SETUP_TAG));
  if (msg[0] == VERDICT_DISAGREE) return disagree((int)msg[1], !cfg->want);
  if (msg[0] != VERDICT_SHM) return 0;
  if (seg_open(name, tcp->size, &m->seg, &m->cap) < 0) {
    hvd__log(HVD_LOG_WARNING, "rank %d: cannot map the shared memory, using TCP: %s",
             tcp->rank, hvd_last_error());
    ok = 0;
  } else {
    atomic_store_explicit(&seg_ranks(m->seg)[tcp->rank].pid, (int32_t)getpid(),
                          memory_order_release);
  }
  HVD__CHECK(hvd__send(tcp, 0, &ok, 4, SETUP_TAG));
  HVD__CHECK(hvd__recv(tcp, 0, msg, 8, SETUP_TAG));
  return msg[0] == 1 && ok;
}

int hvd__shm_setup(const hvd_shm_config *cfg, hvd_transport *tcp, hvd_transport **out) {
  char name[HVD_SHM_NAME_MAX];
  mapping m = {NULL, 0};
  int size = tcp->size;
  *out = NULL;
  hvd__shm_name(&cfg->key, name, sizeof name);
  int rc = tcp->rank == 0 ? lead(cfg, tcp, name, &m) : follow_lead(cfg, tcp, name, &m);
  if (rc == 1) rc = hvd__shm_transport_new(m.seg, size, m.cap, tcp->rank, cfg->timeout_ms, out);
  if (rc < 0) {
    unmap(&m, size);
    tcp->ops->abort(tcp, -1, hvd_last_error());
    tcp->ops->destroy(tcp);
    return hvd__err_prefix(rc, "setting up shared memory");
  }
  if (*out) {
    hvd__log(HVD_LOG_DEBUG, "rank %d: shm transport (%d ranks, rings of %zu KiB)", tcp->rank,
             size, m.cap >> 10);
    tcp->ops->destroy(tcp);
  } else {
    unmap(&m, size);
    hvd__log(HVD_LOG_DEBUG, "rank %d: tcp transport", tcp->rank);
    *out = tcp;
  }
  return 0;
}
