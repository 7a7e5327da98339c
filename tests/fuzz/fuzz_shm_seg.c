/*
 * fuzz_shm_seg.c -- the shared-memory segment as a rank that maps it reads
 * it (transport/shm_seg.h): the header its creator wrote, then, through
 * the transport, the other ranks' records (pid, whom they wait on, abort
 * reports, sync stamps) and the rings' counters and message headers.
 *
 * Input: the segment's bytes, for a group of 3 ranks, mapped as rank 1
 * (job ranks 10, 11, 12).  Properties:
 *   - a header that does not describe exactly this mapping is refused
 *     with a message before any offset is derived from it;
 *   - over a segment that passes, a sendrecv (to rank 2, from rank 0) and
 *     a sync end at once (no-progress deadline 0) with success or an
 *     error that says why, whatever the counters and records hold.
 */
#include <sys/mman.h>

#include "fuzz.h"
#include "transport/shm_seg.h"

#define GROUP 3
#define ME 1

static const int names[GROUP] = {10, 11, 12};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_quiet();
  return 0;
}

/* One transport over its own mapping of the segment at fd, or NULL. */
static hvd_transport *open_as_rank(int fd) {
  seg_hdr *seg;
  size_t cap;
  hvd_transport *t = NULL;
  int rc = hvd__shm_seg_map(fd, GROUP, &seg, &cap);
  if (rc < 0) {
    FUZZ_CHECK_ERROR(rc);
    return NULL;
  }
  FUZZ_CHECK(hvd__shm_transport_new(seg, GROUP, cap, ME, 0, names, &t) == 0);
  return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz-seg", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
  hvd_transport *t = open_as_rank(fd);
  if (t) {
    uint8_t out[32] = {1, 2, 3}, in[100];
    int rc = hvd__sendrecv(t, 2, out, sizeof out, 0, in, sizeof in, 5);
    if (rc < 0) FUZZ_CHECK_ERROR(rc);
    t->ops->destroy(t);
  }
  t = open_as_rank(fd); /* a fresh transport: the first may have broken */
  if (t) {
    hvd_sync_stamp mine = {5, 1, 100}, odd;
    int odd_rank = -1;
    int rc = t->ops->caps.sync(t, &mine, &odd, &odd_rank);
    if (rc < 0) FUZZ_CHECK_ERROR(rc);
    if (rc == 1) FUZZ_CHECK(odd_rank >= 10 && odd_rank <= 12 && odd_rank != 11);
    t->ops->destroy(t);
  }
  close(fd);
  return 0;
}
